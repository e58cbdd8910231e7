"""Is the evidence complete? What a verdict needed and did not get (the ``incomplete`` decision).

Pipeline position: the judge asks :func:`evidence_gaps` for every started candidate before it lets the
gates' results decide (:func:`gates.verdict.decide`), and :func:`not_measured` for a candidate without
``run.json``. A verdict is never read from partial evidence: a candidate stopped during its launch or
never reached, a run stopped early (``interrupted``, cancelled requests), fewer repeats than the sweep
asked for, a baseline whose server died or became unhealthy under load, a load-harness fault (bad
workload data, an exception in the runner: a ``harness`` watch event), a configured capacity search
without its ``capacity.json``.
A candidate's own server death or hang (and the runs it cut short) is not a gap: it is the stability
gate's evidence (a hung server is the candidate's fault: REJECT on stability, the evidence says "hung").
Nor is a candidate's run stopped by its time bound on a profile the baseline finished in time: that is
the concurrency gate's finding. The time bound stopping the baseline's run (or both) is a ``time_bound``
gap, which measuring again does not fill.
Pure: it reads the :class:`contracts.sweepdir.Results` already loaded and the expectations the sweep's
config gives.

    >>> gaps = evidence_gaps(candidate, baseline, Expected.from_config(cfg))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from contracts.results import ProfileSummary, WatchEvent
from contracts.schema import GauntletConfig
from contracts.sweepdir import Repeat, Results
from contracts.verdicts import Gap
from gates.confirm import to_confirm
from gates.sequential import candidate_plan

#: Watch events that say a server was lost under load (``harness`` is the load runner's own fault).
LOST = ("died", "hung", "unhealthy")


@dataclass(frozen=True)
class Expected:
    """What a complete measurement holds, from the sweep's configuration (``config.yaml``)."""

    #: profile -> repeats the baseline must have (a profile's own ``repeats``, else ``run.repeats``)
    baseline: Mapping[str, int] = field(default_factory=dict)
    #: profile -> its own ``repeats`` (the answer gate's 1), for the profiles that set one
    own: Mapping[str, int] = field(default_factory=dict)
    #: the least repeats of a candidate (``run.min_repeats`` with adaptive repeats, else ``run.repeats``)
    candidate_repeats: int = 1
    capacity: bool = False  # ``capacity.profile`` is set: every started launch needs its capacity.json
    #: candidates' repeats are adaptive (a candidate needs as many repeats of every profile as it ran of
    #: any, up to ``max_repeats``); fixed: ``candidate_repeats`` of each, confirmation runs
    #: (:mod:`gates.confirm`) on top
    adaptive: bool = False
    #: adaptive: the most repeats (``run.max_repeats``); runs beyond them are a loop's confirmation runs
    max_repeats: int | None = None
    #: ``host.kind`` (``sim``, ``cpu``, ``gpu``): on a GPU host every launch has its GPU memory reading
    host_kind: str | None = None
    #: ``run.confirm_runs``: the most runs on top of fixed repeats a profile whose runs disagree is owed
    #: (:mod:`gates.confirm`; a launch with fixed repeats: the baseline, a fixed candidate)
    confirm_runs: int = 0

    @classmethod
    def from_config(cls, cfg: GauntletConfig) -> Expected:
        own = {
            p: w.repeats for p in cfg.run.profiles if (w := cfg.workloads.get(p)) is not None and w.repeats
        }
        base = {p: own.get(p, cfg.run.repeats) for p in cfg.run.profiles}
        plan = candidate_plan(cfg.run)
        return cls(
            base,
            own,
            plan.min_repeats,
            cfg.capacity.profile is not None,
            plan.adaptive,
            plan.max_repeats,
            cfg.host.kind,
            cfg.run.confirm_runs,
        )

    def fixed(self, side: Literal["candidate", "baseline"]) -> int:
        """A launch's fixed repeats: the baseline's ``run.repeats`` (a profile without its own), a fixed
        candidate's ``run.repeats``."""
        if side == "candidate":
            return self.candidate_repeats
        return next((n for p, n in self.baseline.items() if p not in self.own), 0)

    def candidate(self, counts: Mapping[str, int]) -> dict[str, int]:
        """profile -> the repeats a candidate needs, given what it has: one repeat runs every profile
        (a profile with its own ``repeats`` k runs in the first k), so every profile without its own
        needs as many as the most of them, and at least ``candidate_repeats``. With fixed repeats a profile
        needs ``candidate_repeats``: its confirmation runs are on top, not a repeat the others lack, as
        are those of an adaptive loop that ran to ``max_repeats``."""
        own = [n for p, n in counts.items() if p not in self.own] if self.adaptive else []
        ran = max([self.candidate_repeats, *own])
        if self.max_repeats is not None:
            ran = min(ran, self.max_repeats)
        return {p: min(self.own[p], ran) if p in self.own else ran for p in self.baseline}


def not_measured(candidate: Results, *, begun: bool) -> Gap:
    """The gap of a candidate without ``run.json``: its launch was stopped before it finished (``begun``:
    its directory exists; Ctrl-C or ``stop`` during the startup), or the sweep never reached it."""
    why = (
        f"no {candidate.run_file}: stopped or interrupted during its launch"
        if begun
        else f"no {candidate.root}/: the sweep stopped before reaching it"
    )
    return Gap(
        kind="not_measured", side="candidate", message=f"not measured ({why})", file=candidate.run_file
    )


def _events(results: Results, kinds: tuple[str, ...]) -> list[WatchEvent]:
    return [e for e in (results.run.watch if results.run else []) if e.kind in kinds]


def server_lost(results: Results) -> bool:
    """The launch's server died or became unhealthy under load (its watch events say so)."""
    return bool(_events(results, LOST))


def lost_how(results: Results) -> str | None:
    """How the launch's server was lost under load, in words ("hung", "died", "became unhealthy": a hang
    or a death first, since an unanswered /health is ``unhealthy`` before it is ``hung``); None if not."""
    kinds = {e.kind for e in _events(results, LOST)}
    found = next((k for k in ("hung", "died", "unhealthy") if k in kinds), None)
    return "became unhealthy" if found == "unhealthy" else found


def finished_in_time(results: Results, profile: str) -> bool:
    """Every run of ``profile`` on disk ran to its end (none cut short, the time bound included)."""
    return bool(results.repeats(profile)) and results.samples(profile) == results.repeats(profile)


def unfinished(summary: ProfileSummary) -> str:
    """A run the time bound stopped, in words: how many requests it did not finish, within what."""
    limit = summary.settings.workload.time_limit_s if summary.settings is not None else None
    within = f"its time bound ({limit:g} s)" if limit is not None else "its time bound"
    return (
        f"did not finish {summary.num_requests - summary.completed} of {summary.num_requests} request(s) "
        f"within {within}"
    )


def _time_bound(rep: Repeat, side: Literal["candidate", "baseline"]) -> Gap:
    """A run the time bound stopped where no comparison can use it: the baseline's own, or a candidate's
    on a profile the baseline did not finish in time either. Resuming measures nothing new."""
    profile = rep.summary.profile
    what = (
        f"the baseline's {profile} run {unfinished(rep.summary)}"
        if side == "baseline"
        else f"the {profile} run {unfinished(rep.summary)}, and the baseline's did not finish in time either"
    )
    return Gap(
        kind="time_bound",
        side=side,
        message=f"{rep.summary_file}: {what}: nothing to compare; measuring again gives the same: raise "
        f"workloads.{profile}.time_limit_s and run the sweep again",
        file=rep.summary_file,
    )


def _interrupted(
    results: Results, side: Literal["candidate", "baseline"], baseline: Results | None = None
) -> list[Gap]:
    """Runs cut short. A candidate's run the time bound stopped on a profile the baseline finished in time
    is no gap: the concurrency gate judges it (:func:`finished_in_time`)."""
    out: list[Gap] = []
    for profile, reps in results.profiles.items():
        for rep in reps:
            cancelled = rep.summary.errors.get("cancelled", 0)
            if rep.summary.time_bound:
                if side == "baseline" or baseline is None or not finished_in_time(baseline, profile):
                    out.append(_time_bound(rep, side))
                continue
            if rep.summary.interrupted or cancelled:
                what = "interrupted" if rep.summary.interrupted else "not interrupted"
                out.append(
                    Gap(
                        kind="interrupted",
                        side=side,
                        message=f"{rep.summary_file}: run {what}, {cancelled} of "
                        f"{rep.summary.num_requests} request(s) cancelled",
                        file=rep.summary_file,
                    )
                )
    return out


def _repeats(
    results: Results, side: Literal["candidate", "baseline"], wanted: Mapping[str, int]
) -> list[Gap]:
    """Profiles with fewer repeats on disk than wanted."""
    out: list[Gap] = []
    for profile, need in wanted.items():
        have = len(results.repeats(profile))
        if have < need:
            out.append(
                Gap(
                    kind="missing_repeats",
                    side=side,
                    message=f"{results.root}/{profile}: {have} of {need} repeat(s) on disk",
                    file=f"{results.root}/{profile}",
                )
            )
    return out


def _owed(
    results: Results, side: Literal["candidate", "baseline"], expected: Expected, repeats: int
) -> list[Gap]:
    """Confirmation runs a launch with ``repeats`` fixed repeats still owes (:func:`gates.confirm.to_confirm`,
    what resume measures again): a profile whose runs disagree and that has fewer than ``repeats +
    confirm_runs`` runs. Not a profile with its own ``repeats`` (the answer gate's one run is the design)."""
    if not expected.confirm_runs:
        return []
    profiles = [p for p in expected.baseline if p not in expected.own]
    return [
        Gap(
            kind="missing_repeats",
            side=side,
            message=f"{results.root}/{found.profile}: a confirmation run is owed ({found.message()}); "
            f"{len(found.values)} of at most {repeats + expected.confirm_runs} run(s) on disk",
            file=f"{results.root}/{found.profile}",
        )
        for found in to_confirm(results, profiles, repeats=repeats, extra=expected.confirm_runs)
    ]


def evidence_gaps(candidate: Results, baseline: Results, expected: Expected | None = None) -> list[Gap]:
    """Every gap in the evidence a started candidate's verdict rests on.

    ``expected`` None (an adaptive look, a caller without the sweep's config): only what the files
    themselves say (interrupted runs, lost baseline, harness faults) is checked, not the counts.
    """
    gaps: list[Gap] = []
    if baseline.run is None and not baseline.profiles:
        return [
            Gap(
                kind="missing_repeats",
                side="baseline",
                message=f"{baseline.root}/: no results for the baseline {baseline.name!r}",
                file=baseline.root,
            )
        ]
    if baseline.run is not None and not baseline.run.startup.ok:
        startup = baseline.run.startup
        return [
            Gap(
                kind="baseline_died",
                side="baseline",
                message=f"{baseline.run_file}: the baseline {baseline.name!r} did not start "
                f"({startup.kind}): nothing to compare against",
                file=baseline.run_file,
            )
        ]
    sides: tuple[tuple[Literal["candidate", "baseline"], Results], ...] = (
        ("candidate", candidate),
        ("baseline", baseline),
    )
    if not baseline.profiles:
        gaps.append(
            Gap(
                kind="missing_repeats",
                side="baseline",
                message=f"{baseline.root}/: the baseline {baseline.name!r} started but measured no profile",
                file=baseline.root,
            )
        )
    for side, results in sides:
        lost = server_lost(results)
        if not (side == "candidate" and lost):  # a candidate's lost server cut its runs short: stability
            gaps += _interrupted(results, side, baseline)
        gaps += [
            Gap(
                kind="harness",
                side=side,
                message=f"{results.run_file}: the load harness failed at {e.at}, not the server ({e.detail})",
                file=results.run_file,
            )
            for e in _events(results, ("harness",))
        ]
        if side == "baseline" and lost:
            gaps += [
                Gap(
                    kind="baseline_died",
                    side="baseline",
                    message=f"{results.run_file}: the baseline {results.name!r} server {e.kind} under load "
                    f"at {e.at} ({e.detail}); its remaining runs are missing",
                    file=results.run_file,
                )
                for e in _events(results, LOST)
            ]
        if expected is None or (side == "candidate" and lost):
            continue  # a candidate's own server death is its stability result, not a gap
        counts = {p: len(results.repeats(p)) for p in expected.baseline}
        wanted = expected.candidate(counts) if side == "candidate" else expected.baseline
        gaps += _repeats(results, side, wanted)
        if side == "baseline" or not expected.adaptive:  # an adaptive loop settles its own (resume re-runs)
            gaps += _owed(results, side, expected, expected.fixed(side))
        if expected.capacity and results.capacity is None:
            gaps.append(
                Gap(
                    kind="missing_measurement",
                    side=side,
                    message=f"{results.capacity_file}: the capacity search (capacity.profile is set) "
                    "did not finish",
                    file=results.capacity_file,
                )
            )
    return gaps
