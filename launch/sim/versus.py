"""The simulator against a measured sweep: each candidate's figures predicted by a profile, beside the
figures real vLLM gave, as ratios (simulated / measured), so the simulator's error is a tracked number.

Pipeline position: after a sweep on a real host (the e2e test on real vLLM on CPU runs it). For every
launched candidate it reads the recorded launch spec (the command vLLM ran), replays the very requests the
load runner measured (their prompt and output token counts, the profile's concurrency, its warmup) through
the engine model in virtual time (:func:`launch.sim.replay.replay_closed_loop`), and writes
``sim-vs-real.json`` and ``sim-vs-real.md`` into the sweep::

    python -m launch.sim.versus sweeps/latest --profile cpu2_tiny_head80
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, ConfigDict

from contracts import layout
from contracts.errors import GauntletError, ResultFileError
from contracts.files import atomic_write_text, read_jsonl, read_model, write_model
from contracts.results import CandidateRun, ProfileSummary, RequestRecord
from launch.sim.cli import parse_args
from launch.sim.model import EngineConfig, StartupError, check_startup
from launch.sim.profile import Profile, ProfileError, load_profile
from launch.sim.replay import ReplayRequest, replay_closed_loop
from launch.spec import LaunchSpec

#: The figures compared, per (candidate, profile): what each means and its unit.
FIGURES = {
    "output_tps": "output tokens/s (mean over repeats)",
    "ttft_p50_s": "median TTFT, s (mean over repeats)",
    "e2e_p50_s": "median end-to-end latency, s (mean over repeats)",
}
#: A figure relative to the baseline's (``output_tps/baseline``): what the gates compare, so what a
#: prediction of a verdict needs the simulator to get right.
RELATIVE = "/baseline"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FigureRow(_Model):
    """One figure of one candidate's profile: simulated, measured and their ratio."""

    candidate: str
    profile: str
    figure: str  # a key of FIGURES, or one with RELATIVE appended (candidate / baseline, both sides)
    simulated: float | None  # None: the simulator predicts no start, or no value
    measured: float | None
    ratio: float | None  # simulated / measured; None when either is missing or measured is 0
    repeats: int  # measured repeats averaged


class StartupRow(_Model):
    """Whether the candidate started, as simulated and as measured."""

    candidate: str
    simulated_starts: bool
    simulated_reason: str  # the simulator's root-cause line when it refuses the candidate
    measured_starts: bool
    measured_kind: str | None  # the launcher's classification of a failed start (incompatible, ...)
    agree: bool


class SimVersusReal(_Model):
    """Every comparison of one sweep, labelled as a simulation set beside a measurement."""

    kind: Literal["simulation vs measurement"] = "simulation vs measurement"
    sweep: str
    sim_profile: str
    sim_profile_description: str
    host: str  # the host the measurement ran on (from the specs)
    note: str
    startups: list[StartupRow]
    figures: list[FigureRow]

    def ratios(self, figure: str) -> list[float]:
        return [r.ratio for r in self.figures if r.figure == figure and r.ratio is not None]


def engine_config(spec: LaunchSpec) -> EngineConfig:
    """The engine settings of a recorded launch, read from its argv as vLLM's parser would read them."""
    argv = list(spec.argv)
    start = next((i for i, item in enumerate(argv) if item.startswith("--")), len(argv))
    try:
        return parse_args(argv[start:]).engine
    except SystemExit as exc:  # argparse's way of refusing a flag
        raise GauntletError(
            f"the launch of {spec.candidate} has a flag the simulator does not know ({exc})",
            hint="add the flag to launch/sim/cli.py or compare a sweep without it",
        ) from None


def _replay_request(record: RequestRecord) -> ReplayRequest:
    tokens = record.completion_tokens or record.target_output_tokens
    return ReplayRequest(
        prompt_tokens=record.prompt_tokens or 1,
        max_tokens=max(1, tokens),
        min_tokens=max(1, tokens),
        ignore_eos=True,
    )


def _p50(values: list[float]) -> float | None:
    ordered = sorted(v for v in values if math.isfinite(v))
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _predict(
    profile: Profile, cfg: EngineConfig, summary: ProfileSummary, records: list[RequestRecord]
) -> dict[str, float | None]:
    """The simulated figures of one measured run: the same requests, concurrency and warmup."""
    workload = summary.settings.workload if summary.settings is not None else None
    if workload is None or workload.mode != "closed":
        return dict.fromkeys(FIGURES)
    measured = [_replay_request(r) for r in records if not r.warmup and r.error is None]
    warmup = [_replay_request(r) for r in records if r.warmup and r.error is None]
    if not measured:
        return dict.fromkeys(FIGURES)
    result = replay_closed_loop(profile, cfg, measured, workload.concurrency, warmup=warmup)
    return {
        "output_tps": result.output_tps,
        "ttft_p50_s": _p50([r.ttft for r in result.records if r.ttft is not None]),
        "e2e_p50_s": _p50([r.end for r in result.records if r.end is not None]),
    }


def _measured(summary: ProfileSummary) -> dict[str, float | None]:
    return {"output_tps": summary.output_tps, "ttft_p50_s": summary.ttft.p50, "e2e_p50_s": summary.e2e.p50}


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def _ratio(simulated: float | None, measured: float | None) -> float | None:
    if simulated is None or measured is None or measured <= 0:
        return None
    return simulated / measured


def _relative(rows: list[FigureRow], baseline: str | None) -> list[FigureRow]:
    """Each candidate's figures divided by the baseline's, simulated and measured alike."""
    base = {(r.profile, r.figure): r for r in rows if r.candidate == baseline}
    out: list[FigureRow] = []
    for row in rows:
        ref = base.get((row.profile, row.figure))
        if row.candidate == baseline or ref is None:
            continue
        sim, real = _ratio(row.simulated, ref.simulated), _ratio(row.measured, ref.measured)
        out.append(
            row.model_copy(
                update={
                    "figure": row.figure + RELATIVE,
                    "simulated": sim,
                    "measured": real,
                    "ratio": _ratio(sim, real),
                }
            )
        )
    return out


def _runs(root: Path, run: CandidateRun) -> dict[str, list[tuple[ProfileSummary, list[RequestRecord]]]]:
    """The measured runs of one launch, by profile (``run.profiles`` lists ``<profile>/r<k>``)."""
    out: dict[str, list[tuple[ProfileSummary, list[RequestRecord]]]] = {}
    for rel in run.profiles:
        folder = root / rel
        summary = read_model(layout.RepeatPaths(folder).summary, ProfileSummary)
        records = read_jsonl(folder / summary.records_file, RequestRecord)
        out.setdefault(summary.profile, []).append((summary, records))
    return out


def compare(sweep: Path, profile: Profile) -> SimVersusReal:
    """Predict every launched candidate of ``sweep`` with ``profile`` and set it beside the measurement."""
    candidates = layout.candidates_dir(sweep)
    if not candidates.is_dir():
        raise ResultFileError(
            f"{candidates} does not exist: not a sweep directory", hint="pass the sweep's folder"
        )
    startups: list[StartupRow] = []
    figures: list[FigureRow] = []
    hosts: set[str] = set()
    baseline: str | None = None
    for root in sorted(p for p in candidates.iterdir() if layout.LaunchPaths(p).run_file.is_file()):
        if "@" in root.name:
            continue  # a node's own baseline (a parallel sweep): same spec as the baseline
        run = read_model(layout.LaunchPaths(root).run_file, CandidateRun)
        if run.is_baseline:
            baseline = run.candidate
        spec = LaunchSpec.read(layout.LaunchPaths(root).spec)
        hosts.add(spec.host)
        try:
            cfg: EngineConfig | None = engine_config(spec)
        except GauntletError as exc:
            if run.startup.ok:
                raise  # a launch that ran has flags the simulator must model
            cfg = None  # refused by both: the simulator's parser, and vLLM's (or doctor's) before it
            starts, why = False, exc.message
        if cfg is not None:
            try:
                check_startup(profile, cfg)
                starts, why = True, ""
            except StartupError as exc:
                starts, why = False, exc.log[-1] if exc.log else exc.kind
        startups.append(
            StartupRow(
                candidate=run.candidate,
                simulated_starts=starts,
                simulated_reason=why,
                measured_starts=run.startup.ok,
                measured_kind=run.startup.kind,
                agree=starts == run.startup.ok,
            )
        )
        if cfg is None or not (starts and run.startup.ok):
            continue
        for name, runs in _runs(root, run).items():
            simulated = [_predict(profile, cfg, s, recs) for s, recs in runs]
            measured = [_measured(s) for s, _ in runs]
            for figure in FIGURES:
                sim = _mean([p[figure] for p in simulated])
                real = _mean([m[figure] for m in measured])
                figures.append(
                    FigureRow(
                        candidate=run.candidate,
                        profile=name,
                        figure=figure,
                        simulated=sim,
                        measured=real,
                        ratio=_ratio(sim, real),
                        repeats=len(runs),
                    )
                )
    figures += _relative(figures, baseline)
    return SimVersusReal(
        sweep=str(sweep),
        sim_profile=profile.name,
        sim_profile_description=profile.description,
        host=", ".join(sorted(hosts)),
        note=(
            f"Simulated: profile {profile.name} replaying the measured requests in virtual time. "
            f"Measured: the sweep on host {', '.join(sorted(hosts)) or '?'}. Ratio = simulated / measured."
        ),
        startups=startups,
        figures=figures,
    )


def _num(value: float | None, figure: str) -> str:
    if value is None:
        return "-"
    if figure.endswith(RELATIVE):
        return f"{value:.2f}x"
    return f"{value:,.1f}" if figure == "output_tps" else f"{value:.3f}"


def render(result: SimVersusReal) -> str:
    """The comparison as a Markdown table, labelled as simulation against measurement."""
    lines = [
        f"# Simulation vs measurement: {result.sim_profile} against the sweep on {result.host}",
        "",
        result.note,
        "",
        "| candidate | starts (simulated) | starts (measured) | agree |",
        "|---|---|---|---|",
    ]
    for s in result.startups:
        sim = "yes" if s.simulated_starts else f"no ({s.simulated_reason})"
        real = "yes" if s.measured_starts else f"no ({s.measured_kind})"
        lines.append(f"| {s.candidate} | {sim} | {real} | {'yes' if s.agree else 'NO'} |")
    lines += [
        "",
        "| candidate | profile | figure | simulated | measured | simulated / measured |",
        "|---|---|---|---|---|---|",
    ]
    for r in result.figures:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(
            f"| {r.candidate} | {r.profile} | {r.figure} | {_num(r.simulated, r.figure)} "
            f"| {_num(r.measured, r.figure)} | {ratio} |"
        )
    lines.append("")
    for figure in dict.fromkeys(r.figure for r in result.figures):
        ratios = result.ratios(figure)
        if ratios:
            lines.append(
                f"{figure}: simulated / measured from {min(ratios):.2f}x to {max(ratios):.2f}x "
                f"(geometric mean {math.exp(fmean(math.log(r) for r in ratios)):.2f}x, {len(ratios)} rows)"
            )
    return "\n".join(lines) + "\n"


def write(sweep: Path, result: SimVersusReal) -> tuple[Path, Path]:
    """Write ``sim-vs-real.json`` (validated) and ``sim-vs-real.md`` into the sweep."""
    data, text = layout.SweepPaths(sweep).sim_vs_real, layout.SweepPaths(sweep).sim_vs_real_md
    write_model(data, result)
    atomic_write_text(text, render(result))
    return data, text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch.sim.versus", description=__doc__)
    parser.add_argument("sweep", type=Path, help="a sweep directory (or sweeps/latest)")
    parser.add_argument("--profile", default="cpu2_tiny_head80", help="simulation profile (name or path)")
    args = parser.parse_args(argv)
    try:
        result = compare(args.sweep.resolve(), load_profile(args.profile))
    except (GauntletError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write(args.sweep.resolve(), result)
    print(render(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
