"""``python -m load SUMMARY.json [--base-url URL]``: run one recorded profile again, by hand.

Pipeline position: beside the sweep, not in it. A sweep's ``summary.json`` records exactly what the load
runner was asked to run (:class:`contracts.results.LoadSettings`: the workload as run, the served model,
``run.scale``, the time scale, the prompts directory and the run's salt); this command hands the same
settings to :func:`load.runner.run_profile` against a server someone started (the recorded one by
default), writing records, summary and metrics into a directory of its own, never into the sweep::

    python -m load sweeps/latest/candidates/baseline/decode_heavy/r1/summary.json --base-url http://gpu7:8000

The salt is fresh by default, so no request shares prefix-cache blocks with the recorded run (the same
isolation the sweep gives each run); ``--same-salt`` reuses the recorded one (request ``i`` carries
``cache_salt = SALT-i`` again, to match server-side logs), ``--salt S`` sets one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from contracts.errors import GauntletError, ResultFileError
from contracts.files import read_model
from contracts.layout import CANDIDATES_DIR, SUMMARY_FILE, RepeatPaths
from contracts.results import LoadSettings, ProfileSummary
from load.runner import new_salt, run_profile


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m load",
        description="Run one recorded load profile again against a server, with the settings its "
        f"{SUMMARY_FILE} recorded (the report prints this command for each sweep).",
    )
    p.add_argument(
        "summary", type=Path, help=f"a {SUMMARY_FILE} a sweep wrote (<sweep>/{CANDIDATES_DIR}/...)"
    )
    p.add_argument("--base-url", help="the server to drive (default: the one recorded)")
    p.add_argument("--model", help="the served model name to send (default: the one recorded)")
    p.add_argument("--out", type=Path, help="where to write records, summary, metrics (default: rerun/...)")
    salt = p.add_mutually_exclusive_group()
    salt.add_argument("--same-salt", action="store_true", help="reuse the recorded run's salt")
    salt.add_argument("--salt", help="this salt for every request (cache_salt = SALT-index)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    return p


def recorded_settings(summary_file: Path) -> tuple[ProfileSummary, LoadSettings]:
    """The summary and its settings; a summary written before settings were recorded cannot be re-run."""
    summary = read_model(summary_file, ProfileSummary)
    if summary.settings is None:
        raise ResultFileError(
            f"{summary_file}: no recorded load settings (written by an older gauntlet)",
            hint="re-run the sweep's candidate to record them, or drive the server with the profile's YAML",
        )
    return summary, summary.settings


def choose_salt(settings: LoadSettings, *, same: bool, given: str | None) -> str:
    if given is not None:
        return given
    return settings.salt if same else new_salt()


def default_out(summary: ProfileSummary, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return Path("rerun") / f"{summary.candidate}-{summary.profile}-r{summary.repeat}-{stamp}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        summary, settings = recorded_settings(args.summary)
        salt = choose_salt(settings, same=args.same_salt, given=args.salt)
        out = args.out or default_out(summary)
        base_url = args.base_url or settings.base_url
        print(
            f"load: {summary.candidate}/{summary.profile} (repeat {summary.repeat}) against {base_url}, "
            f"salt {salt}, writing {out}",
            file=sys.stderr,
        )
        result = run_profile(
            base_url,
            args.model or settings.served_model,
            settings.workload,
            candidate=summary.candidate,
            fingerprint=summary.fingerprint,
            repeat=summary.repeat,
            out_dir=out,
            backend=summary.backend,
            host=summary.host,
            time_scale=settings.time_scale,
            scale=settings.scale,
            salt=salt,
            progress=not args.no_progress,
            prompts_dir=Path(settings.prompts_dir),
            load=settings.load,  # the same workers, lateness bound and TLS files (None: older summaries)
        )
    except GauntletError as exc:
        print(f"load: {exc}", file=sys.stderr)
        return exc.exit_code
    ttft = result.ttft.p50
    print(
        f"{result.completed}/{result.num_requests} completed, {result.failed} failed, "
        f"output {result.output_tps:,.0f} tok/s, TTFT p50 "
        f"{'-' if ttft is None else f'{ttft:.3f} s'}; recorded run: {summary.output_tps:,.0f} tok/s; "
        f"{RepeatPaths(out).summary}"
    )
    return 0 if result.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
