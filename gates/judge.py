"""The judge: a sweep directory's stored results -> ``<sweep>/verdicts.json``, a stage of its own.

Pipeline position: between measuring and reporting, joined to both by files. It reads the sweep's typed
config (``config.yaml``, :func:`contracts.sweepdir.read_sweep_config`) and result files, runs the gates
(:func:`gates.evaluate_sweep`: decisions, key figures, rankings, reversals) and writes ``verdicts.json``,
which the report renders without judging again. The sweep calls it when it closes; any time later::

    python -m orchestrator judge sweeps/20261202-101500     # rewrites verdicts.json, prints a summary
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from contracts.errors import EXIT_INCOMPLETE, GauntletError, ResultFileError
from contracts.layout import CONFIG_FILE, VERDICTS_FILE, SweepPaths
from contracts.schema import GauntletConfig
from contracts.sweepdir import read_sweep_config, sweep_dir_argument
from contracts.verdicts import SweepVerdict, decision_label, spelled_reason, write_verdicts
from gates.evidence import Expected
from gates.sequential import candidate_plan
from gates.verdict import evaluate_sweep

#: Longest reason shown per candidate in the summary (the whole reason is in verdicts.json).
SUMMARY_WIDTH = 100


def judge(sweep_dir: Path, cfg: GauntletConfig) -> SweepVerdict:
    """Judge a stored sweep with its own configuration (reads files, writes nothing)."""
    plan = candidate_plan(cfg.run)  # adaptive repeats: the confidence of each candidate's last look
    expected = Expected.from_config(cfg)  # what a complete measurement holds: else ``incomplete``
    return evaluate_sweep(sweep_dir, cfg.gates, baseline=cfg.baseline.name, plan=plan, expected=expected)


def judge_sweep(sweep_dir: Path, cfg: GauntletConfig | None = None) -> SweepVerdict:
    """Judge ``sweep_dir`` (config read from its ``config.yaml`` unless given) and write verdicts.json."""
    if not sweep_dir.is_dir():
        raise ResultFileError(f"{sweep_dir}: no such sweep directory", hint="pass a directory a sweep wrote")
    verdicts = judge(sweep_dir, cfg if cfg is not None else read_sweep_config(sweep_dir))
    write_verdicts(sweep_dir, verdicts)
    return verdicts


def _shorten(text: str, width: int = SUMMARY_WIDTH) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3].rstrip() + "..."


def summary_lines(verdicts: SweepVerdict) -> list[str]:
    """One line per candidate (decision and the start of its reason), then what is retained and drift.

    >>> from contracts.verdicts import DriftResult
    >>> summary_lines(SweepVerdict(baseline="b", retained="b", retained_reason="no candidate is KEEP",
    ...     drift=DriftResult(status="pass", message="no drift"), verdicts=[]))
    ['b  baseline  retained configuration', 'retained: b (no candidate is KEEP)', 'drift: pass: no drift']
    """
    rows = [(verdicts.baseline, decision_label("baseline"), "retained configuration")]
    if verdicts.retained != verdicts.baseline:
        rows[0] = (verdicts.baseline, decision_label("baseline"), f"replaced by {verdicts.retained}")
    for v in verdicts.verdicts:
        label = decision_label(v.decision)
        reason = spelled_reason(v.decision, v.reason)  # a file judged before the one spelling, too
        reason = reason.split(": ", 1)[1] if reason.startswith(f"{label}: ") else reason
        rows.append((v.candidate, label, _shorten(reason)))
    name_w = max(len(r[0]) for r in rows)
    label_w = max(len(r[1]) for r in rows)
    lines = [f"{n.ljust(name_w)}  {d.ljust(label_w)}  {why}" for n, d, why in rows]
    lines.append(f"retained: {verdicts.retained} ({_shorten(verdicts.retained_reason)})")
    lines.append(f"drift: {verdicts.drift.status}: {_shorten(verdicts.drift.message)}")
    lines += [f"reversal: {r.candidate} ({r.direction} on the empty road)" for r in verdicts.reversals]
    incomplete = verdicts.incomplete
    if incomplete:
        names = ", ".join(v.candidate for v in incomplete)
        lines.append(f"INCOMPLETE: {names}: verdict(s) read from partial evidence, none acted on")
        if verdicts.resume:
            lines.append(f"resume: {verdicts.resume}")
        else:
            lines.append("resume: resuming would measure nothing missing; each reason says what to change")
    return lines


def exit_code(verdicts: SweepVerdict) -> int:
    """``EXIT_INCOMPLETE`` (8, :mod:`contracts.errors`) when some verdict is ``incomplete``, else 0: a
    script never reads partial evidence as a finished sweep, whether resuming completes it
    (``verdicts.resume``) or each gap says what to change instead (the load client's lag)."""
    return EXIT_INCOMPLETE if verdicts.incomplete else 0


def partial(sweep_dir: Path, running: str, *, measuring: Sequence[str] = ()) -> int:
    """``judge --force`` on a sweep that is still running (``running`` says so): what has landed, judged
    and printed under a PARTIAL line; nothing is written into the sweep (it judges itself when it ends).
    A candidate being measured reads as such, not as never launched; no resume command is given (the
    sweep is not over). Exit 8: every verdict here rests on partial evidence."""
    try:
        verdicts = judge(sweep_dir, read_sweep_config(sweep_dir))
    except GauntletError as exc:
        print(f"gauntlet: judge: {exc}", file=sys.stderr)
        return exc.exit_code
    now = "being measured now: judged on what has landed so far"
    shown = verdicts.model_copy(
        update={
            "verdicts": [
                v.model_copy(update={"reason": now}) if v.candidate in measuring else v
                for v in verdicts.verdicts
            ]
        }
    )
    lines = [line for line in summary_lines(shown) if not line.startswith("resume: ")]
    print(f"PARTIAL: {running}: what has landed so far, judged; nothing is written into it", flush=True)
    print("\n".join(lines), flush=True)
    print(f"gauntlet: judge: {VERDICTS_FILE} not written (the sweep writes it when it ends)", file=sys.stderr)
    return EXIT_INCOMPLETE


def main(args: list[str]) -> int:
    """``python -m orchestrator judge SWEEP_DIR``: write verdicts.json from disk and print a summary."""
    sweep_dir = sweep_dir_argument(
        args,
        prog="python -m orchestrator judge",
        description=f"Judge a sweep's stored results with its {CONFIG_FILE} and write {VERDICTS_FILE}.",
    )
    if isinstance(sweep_dir, int):
        return sweep_dir
    try:
        verdicts = judge_sweep(sweep_dir)
    except GauntletError as exc:
        print(f"gauntlet: judge: {exc}", file=sys.stderr)
        return exc.exit_code
    print("\n".join(summary_lines(verdicts)), flush=True)
    print(f"gauntlet: verdicts written to {SweepPaths(sweep_dir).verdicts}", file=sys.stderr)
    return exit_code(verdicts)
