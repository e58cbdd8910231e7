"""Two sweeps compared: the same configurations measured again, judged with the gates' own intervals.

Pipeline position: beside the judge, reading two sweep directories (:mod:`contracts.sweepdir`) and
writing nothing. For each pair of runs (the same candidate in both sweeps, or ``--candidate NAME`` of the
newer sweep against the retained configuration of the older one) and each profile both measured, it
compares the newer runs with the older ones the way the drift check compares a baseline with itself
later (:func:`gates.drift.judge_drift`): output tokens/s by the gates' two-stage bootstrap
(:func:`gates.compare.throughput`), median TTFT (and serial e2e) by Welch's t on the repeats' medians
(:func:`gates.compare.latency`, with the load client's dispatch lag as the resolution); the answer profile
is left out (a few fixed prompts whose visible-answer count each sweep's own verdict judges by policy).
A change counts
only when it is beyond the tolerance of the newer sweep's gates **and** its interval excludes "no change";
the family of every comparison printed is held at the gates' confidence (Bonferroni). A sweep compared
with itself changes nothing::

    python -m orchestrator compare sweeps/20261201-090000 sweeps/20261204-090000
    python -m orchestrator compare OLD NEW --candidate spec_greedy     # NEW's spec_greedy vs OLD's retained

Exit code: 0 nothing changed beyond noise; 1 something did (as ``diff``); 2 a usage error; 6 a sweep that
cannot be read. ``--json`` prints the result as data.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import GauntletError, ResultFileError
from contracts.layout import CANDIDATES_DIR, SweepPaths, candidate_dir, candidate_root
from contracts.metrics import e2e_value, ttft_value
from contracts.schema import GatesConfig
from contracts.sweepdir import Repeat, Results, candidate_names, load_results, read_sweep_config
from contracts.verdicts import Comparison, GateStatus, read_verdicts
from gates.compare import Measured, latency, throughput
from gates.drift import judge_drift
from gates.significance import bonferroni
from gates.stats import RatioEstimate

PairStatus = Literal["changed", "unsettled", "same", "not_compared"]

#: How a comparison's status reads here: the drift rule's ``fail`` is a change beyond noise.
STATUS_WORDS: dict[GateStatus, PairStatus] = {
    "fail": "changed",
    "inconclusive": "unsettled",
    "pass": "same",
    "not_run": "not_compared",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class PairComparison(_Model):
    """One configuration measured in both sweeps: every profile both measured, newer against older."""

    old: str  # the run in the older sweep (a candidate, or its retained configuration)
    new: str  # the run in the newer sweep
    status: PairStatus
    note: str = ""  # why it was not compared, or what changed besides the numbers (startup)
    comparisons: list[Comparison] = Field(default_factory=list)  # status fail = changed beyond noise


class SweepComparison(_Model):
    """Two sweeps compared (``python -m orchestrator compare OLD NEW``)."""

    old_sweep: str
    new_sweep: str
    confidence: float  # family-wise, over every comparison below
    per_comparison_confidence: float
    pairs: list[PairComparison]
    only_old: list[str] = Field(default_factory=list)  # candidates measured only in the older sweep
    only_new: list[str] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(p.status == "changed" for p in self.pairs)


# ------------------------------------------------------------------------------------------ planning


def _started(results: Results) -> bool:
    return results.started and bool(results.profiles)


def retained_of(sweep_dir: Path) -> str:
    """The configuration a sweep retained (its ``verdicts.json``), else its baseline."""
    if SweepPaths(sweep_dir).verdicts.exists():
        return read_verdicts(sweep_dir).retained
    return read_sweep_config(sweep_dir).baseline.name


def pairs_to_compare(old_dir: Path, new_dir: Path, candidate: str | None) -> list[tuple[str, str]]:
    """(old name, new name): the same names in both sweeps, or ``candidate`` against the old retained."""
    if candidate is not None:
        return [(retained_of(old_dir), candidate)]
    new_names = set(candidate_names(new_dir))
    return [(n, n) for n in candidate_names(old_dir) if n in new_names]


# ------------------------------------------------------------------------------------------ comparing

Judge = Callable[[RatioEstimate], tuple[GateStatus, float]]


def _judge(tolerance: float) -> Judge:
    return lambda est: judge_drift(est, tolerance)


def _planned(gates: GatesConfig, profiles: Sequence[str]) -> list[tuple[str, str]]:
    """(metric, profile) in the order they are printed: throughput, TTFT, and serial e2e; the answer
    profile is left out (its visible-answer count is a policy, in each sweep's own verdicts)."""
    out: list[tuple[str, str]] = []
    for profile in profiles:
        if profile == gates.answer_profile:
            continue  # a few fixed prompts judged by a policy on their count, not by an interval
        out += [("output_tps", profile), ("ttft_p50", profile)]
        if profile == gates.serial_profile:
            out.append(("e2e_p50", profile))
    return out


def _measure(
    metric: str,
    profile: str,
    new: Sequence[Repeat],
    old: Sequence[Repeat],
    *,
    gates: GatesConfig,
    confidence: float,
) -> Measured | None:
    if metric == "output_tps":
        return throughput(
            "output_tps",
            profile,
            new,
            old,
            confidence=confidence,
            resamples=gates.bootstrap_resamples,
            seed=gates.seed,
            judge=_judge(gates.throughput_tolerance),
        )
    serial = profile == gates.serial_profile
    extract = e2e_value if metric == "e2e_p50" else ttft_value
    label = f"{profile} {'e2e' if metric == 'e2e_p50' else 'TTFT'} p50"
    return latency(
        metric,
        profile,
        new,
        old,
        extract,
        confidence=confidence,
        judge=_judge(gates.latency_tolerance),
        label=label,
        client_lag=not serial,
        lag_limits=(1 - gates.latency_tolerance, 1 + gates.latency_tolerance),
    )


def _pair_status(comparisons: Sequence[Comparison]) -> PairStatus:
    statuses = {c.status for c in comparisons}
    if "fail" in statuses:
        return "changed"
    if "inconclusive" in statuses:
        return "unsettled"
    return "same" if comparisons else "not_compared"


def compare_sweeps(old_dir: Path, new_dir: Path, *, candidate: str | None = None) -> SweepComparison:
    """Every pair of runs both sweeps measured, judged with the newer sweep's gates (writes nothing)."""
    for d in (old_dir, new_dir):
        if not SweepPaths(d).candidates.is_dir():
            raise ResultFileError(
                f"{d}: not a sweep directory (no {CANDIDATES_DIR}/)", hint="pass two sweep directories"
            )
    gates = read_sweep_config(new_dir).gates
    pairs = pairs_to_compare(old_dir, new_dir, candidate)
    loaded = {
        (o, n): (load_results(old_dir, candidate_root(o), o), load_results(new_dir, candidate_root(n), n))
        for o, n in pairs
    }
    if candidate is not None and not candidate_dir(new_dir, candidate).is_dir():
        raise ResultFileError(
            f"{new_dir}: no candidate {candidate!r}",
            hint=f"one of: {', '.join(candidate_names(new_dir)) or 'none'}",
        )
    plans = {
        key: _planned(gates, [p for p in old.profiles if p in new.profiles])
        for key, (old, new) in loaded.items()
        if _started(old) and _started(new)
    }
    total = sum(len(plan) for plan in plans.values())
    each = bonferroni(gates.confidence, total)
    out: list[PairComparison] = []
    for (o, n), (old, new) in loaded.items():
        if (o, n) not in plans:
            out.append(_not_compared(o, n, old, new))
            continue
        comparisons = [
            m.comparison
            for metric, profile in plans[(o, n)]
            if (
                m := _measure(
                    metric, profile, new.repeats(profile), old.repeats(profile), gates=gates, confidence=each
                )
            )
        ]
        out.append(PairComparison(old=o, new=n, status=_pair_status(comparisons), comparisons=comparisons))
    old_names, new_names = set(candidate_names(old_dir)), set(candidate_names(new_dir))
    return SweepComparison(
        old_sweep=str(old_dir),
        new_sweep=str(new_dir),
        confidence=gates.confidence,
        per_comparison_confidence=each,
        pairs=out,
        only_old=sorted(old_names - new_names) if candidate is None else [],
        only_new=sorted(new_names - old_names) if candidate is None else [],
    )


def _not_compared(old_name: str, new_name: str, old: Results, new: Results) -> PairComparison:
    """A pair where one side measured nothing: a change of its own when exactly one side started."""

    def state(r: Results) -> str:
        if r.run is None:
            return "was not launched"
        if not r.run.startup.ok:
            return f"did not start ({r.run.startup.kind or 'failed'})"
        return "started" if r.profiles else "started but measured nothing"

    a, b = state(old), state(new)
    changed = (a == "started") != (b == "started") and "measured nothing" not in a + b
    return PairComparison(
        old=old_name,
        new=new_name,
        status="changed" if changed else "not_compared",
        note=f"{a} in the older sweep, {b} in the newer",
    )


# ------------------------------------------------------------------------------------------ printing


def render(result: SweepComparison) -> str:
    """What changed beyond noise first, then what is unsettled, then one line for the rest."""
    lines = [
        f"compare {result.old_sweep} -> {result.new_sweep} (newer / older; {result.confidence:.0%} "
        f"family-wise over {sum(len(p.comparisons) for p in result.pairs)} comparisons)"
    ]
    for pair in result.pairs:
        name = pair.new if pair.old == pair.new else f"{pair.new} (against {pair.old}, the older retained)"
        if pair.status == "not_compared" or (pair.note and not pair.comparisons):
            word = "CHANGED" if pair.status == "changed" else "not compared"
            lines.append(f"  {name}: {word}: {pair.note}")
            continue
        changed = [c for c in pair.comparisons if c.status == "fail"]
        unsettled = [c for c in pair.comparisons if c.status == "inconclusive"]
        head = {"changed": "CHANGED beyond noise", "unsettled": "no change beyond noise; unsettled",
                "same": "no change beyond noise"}[pair.status]  # fmt: skip
        lines.append(f"  {name}: {head} ({len(pair.comparisons)} comparisons)")
        lines += [f"    changed: {c.message}" for c in changed]
        lines += [f"    unsettled: {c.message}" for c in unsettled]
    if result.only_old:
        lines.append(f"  only in the older sweep: {', '.join(result.only_old)}")
    if result.only_new:
        lines.append(f"  only in the newer sweep: {', '.join(result.only_new)}")
    lines.append(
        "result: " + ("something changed beyond noise" if result.changed else "nothing changed beyond noise")
    )
    return "\n".join(lines) + "\n"


def main(args: Sequence[str]) -> int:
    """``python -m orchestrator compare OLD NEW [--candidate NAME] [--json]``; exit 1 when a run changed."""
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator compare",
        description="The same configurations across two sweeps, judged with the gates' intervals: what "
        "changed beyond noise (exit 0: nothing, 1: something, 2: usage, 6: unreadable sweep).",
    )
    parser.add_argument("old", type=Path, help="the earlier sweep directory")
    parser.add_argument("new", type=Path, help="the later sweep directory")
    parser.add_argument(
        "--candidate",
        help="compare this candidate of NEW against the configuration OLD retained (default: every "
        "candidate both sweeps measured, name for name)",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    try:
        ns = parser.parse_args(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        result = compare_sweeps(ns.old, ns.new, candidate=ns.candidate)
    except GauntletError as exc:
        print(f"gauntlet: compare: {exc}", file=sys.stderr)
        return exc.exit_code
    print(result.model_dump_json(indent=2) if ns.json else render(result), end="\n" if ns.json else "")
    return 1 if result.changed else 0
