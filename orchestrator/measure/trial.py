"""One search trial: a point launched once, screened on the cheapest evidence, measured fully if promising.

Pipeline position: the search's measuring step (:mod:`orchestrator.search.loop` drives it, one job per
trial), through the same :func:`~orchestrator.measure.launch.measured_launch` as every candidate, into
``search/candidates/<trial>/`` (a context whose directory is ``search/``: the judge never sees a trial).
Fidelity, cheapest first, on one launch:

1. **start**: a point that does not start is infeasible (its startup class is the reason, and
   ``startup`` the class, which the search's memory probe reads: :mod:`orchestrator.search.memory`); a
   server that starts and is then lost under load (died, OOM-killed, hung) at any later step is
   infeasible too (:func:`died_under_load`): the sampler learns it as a constraint, and the point is never
   launched again;
2. **screen**: one run of the capacity profile at the screen level (the baseline's capacity): its SLO
   margin x the level is a rough estimate, reported to the pruner (``report(1, estimate)``), which may stop
   the trial here (pruned); before it is asked, one run of each constraint profile
   (:mod:`.trial_constraints`: the serial and accepted profiles at their own load, against the baseline's
   opening runs; a second run of a profile whose figure was within noise of a limit): a point the
   evidence does not show within every gated requirement is infeasible at its screen (which requirement,
   by how much: ``constraints``) and never measured fully;
3. **full**: the capacity search (capacity objective), or a second run at the level (goodput, tokens/s
   per GPU); with ``pareto`` also one serial run for the latency objective.

A trial's figure is the search's estimate; no verdict is drawn here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean, median

from contracts.cost import capacity_output_tps, usd_per_mtok
from contracts.files import read_model
from contracts.layout import LaunchPaths
from contracts.pipeline import gpus_held
from contracts.results import CapacityResult, ProfileSummary, WatchEvent
from contracts.schema import CandidateConfig
from contracts.search import SearchConfig
from contracts.trials import Fidelity, TrialState
from orchestrator.measure.capacity import level_label, level_workload, run_capacity
from orchestrator.measure.launch import Launch, RunLabels, measured_launch
from orchestrator.measure.profile import LOST, measure_profile, server_lost
from orchestrator.measure.trial_accuracy import (
    accuracy_profile,
    probe_size,
    requirement_name,
    space_fields,
    touches_lossy,
)
from orchestrator.measure.trial_constraints import (
    baseline_runs,
    broken,
    constraint_profiles,
    describe,
    requirements,
    screened,
)
from orchestrator.servers.context import SweepContext
from orchestrator.servers.session import ServerSession

#: The pruner's question after an intermediate value: (step, value) -> stop this trial here.
Report = Callable[[int, float], bool]
#: Step numbers the pruner sees.
SCREEN_STEP, FULL_STEP = 1, 2
#: How an infeasible trial's reason begins when its server started and was then lost under load.
DIED_UNDER_LOAD = "the server started and was lost under load"
#: The $/Mtok of a point that served nothing within the SLO (a finite worst, as Optuna is told).
WORST_USD = 1e12


@dataclass
class TrialOutcome:
    """What one trial measured: its state and why, how far it got, its value(s) (estimates)."""

    state: TrialState
    why: str = ""
    fidelity: Fidelity = "none"
    values: list[float] | None = None
    screen: float | None = None
    launches: int = 0
    gpus: int = 0
    notes: list[str] = field(default_factory=list)
    at_least: bool = False  # the capacity search held the SLO at every level it tried: values[0] is a floor
    #: The startup class of a point that did not start (launch.failures: "out-of-memory", ...), else "".
    startup: str = ""
    #: At the capacity it found: the SLO margin (median of that level's runs) and attainment; what breaks
    #: a tie of two points at the capacity ceiling (both held the SLO at max_level).
    margin: float | None = None
    attainment: float | None = None
    #: Each gated requirement ruled on at the screen (:mod:`.trial_constraints`): its violation size, > 0
    #: broken by that fraction beyond the gates' limit (``TrialRecord.constraints``).
    constraints: dict[str, float] = field(default_factory=dict)
    #: The trial's own wall seconds in its job, launch to teardown (0: not timed): its budget share.
    seconds: float = 0.0
    #: The node's baseline measured first for this trial (a parallel search's node opening): its launches
    #: and GPU-seconds (wall), charged to the search's budget with the trial.
    baseline_launches: int = 0
    baseline_gpu_s: float = 0.0


def objective_of(search: SearchConfig, summary: ProfileSummary, gpus: int) -> float:
    """The objective a run at the load level gives (goodput or output tokens/s per GPU)."""
    if search.objective == "goodput":
        slo = summary.slo
        return slo.goodput_tps if slo is not None and slo.goodput_tps is not None else 0.0
    return summary.output_tps / max(1, gpus)


def usd_at(output_tps: float, gpus: int, gpu_hour_price: float | None) -> float:
    """$ per million output tokens of ``gpus`` GPUs at ``output_tps`` (:func:`contracts.cost.usd_per_mtok`,
    the GPUs' price; the search's checks refuse this objective without ``host.gpu_hour_price``); no
    throughput is the worst cost Optuna is told (``WORST_USD``)."""
    if gpu_hour_price is None:
        raise ValueError("search.objective usd_per_mtok_at_slo needs host.gpu_hour_price")
    cost = usd_per_mtok(output_tps, gpus=max(1, gpus), gpu_hour_price=gpu_hour_price)
    return cost if cost is not None else WORST_USD


def screen_estimate(level: float, margin: float) -> float:
    """The screen's estimate of capacity: the level scaled by its SLO margin (>= 1 held), a rough figure
    the pruner ranks points by; the full search replaces it."""
    return level * max(0.0, margin)


def measure_trial(
    ctx: SweepContext,
    candidate: CandidateConfig,
    *,
    search: SearchConfig,
    level: float,
    report: Report,
    clock: Callable[[], float] = time.monotonic,
) -> TrialOutcome:
    """Launch ``candidate`` once into ``search/candidates/<name>/`` and measure it as far as it earns,
    timed (``TrialOutcome.seconds``: the trial's own share of the budget)."""
    start = clock()
    outcome = _measure_trial(ctx, candidate, search=search, level=level, report=report)
    outcome.seconds = round(clock() - start, 3)
    return outcome


def _measure_trial(
    ctx: SweepContext, candidate: CandidateConfig, *, search: SearchConfig, level: float, report: Report
) -> TrialOutcome:
    trials = replace(ctx, dir=ctx.paths.search)  # candidate_dir(name): search/candidates/<name>
    cap = ctx.cfg.capacity
    if cap.profile is None:
        raise ValueError("a search needs capacity.profile (validated when the sweep opens)")
    wl = ctx.cfg.workloads[cap.profile]
    integer = wl.mode != "open"
    level = float(int(level)) if integer else level
    gpus = gpus_held(candidate.tensor_parallel_size, candidate.data_parallel_size, candidate.extra_args)
    name = candidate.name
    out = trials.candidate_dir(name)
    # A trial run as a parallel job names its node's baseline (orchestrator.app.jobs.run_trial).
    paired = ctx.paired_baseline
    labels = RunLabels(is_baseline=False, phase="candidate", node=ctx.node, paired_baseline=paired)
    spec = ctx.render(candidate)
    outcome = TrialOutcome(state="running", launches=1, gpus=gpus)
    ctx.check_stop()
    with measured_launch(trials, spec, out, role="candidate", labels=labels, discard_as=name) as launch:
        if not launch.ready:
            startup = launch.run.startup
            outcome.state, outcome.fidelity = "infeasible", "start"
            outcome.startup = startup.kind or ""
            line = startup.matched_line or "-"
            outcome.why = f"did not start ({startup.kind}): {line[:160]}{'...' if len(line) > 160 else ''}"
            return outcome
        outcome.fidelity = "start"
        label = level_label(level, integer=integer)
        #: What the watcher saw while load ran (a server lost under load makes the point infeasible).
        watched: list[WatchEvent] = []

        def at_level(attempt: int) -> ProfileSummary | None:
            run = LaunchPaths(out).repeat(f"screen@{label}", attempt)
            seen = measure_profile(
                trials,
                launch.session,
                profile=f"{cap.profile}@{label}",
                repeat=attempt,
                out=run.root,
                workload=level_workload(wl, cap, level),
                load_level=level,
            )
            launch.watch.extend(seen)
            watched.extend(seen)
            if server_lost(seen) or any(e.kind == "harness" for e in seen):
                return None
            return read_model(run.summary, ProfileSummary)

        first = at_level(1)
        if first is None or first.slo is None:
            return unfinished(outcome, watched, f"the screening run at {label}")
        outcome.fidelity = "screen"
        if search.objective == "capacity":
            outcome.screen = screen_estimate(level, first.slo.margin)
        elif search.objective == "usd_per_mtok_at_slo":  # the level's tokens/s, scaled by a missed SLO
            outcome.screen = usd_at(
                first.output_tps * min(1.0, first.slo.margin), gpus, ctx.cfg.host.gpu_hour_price
            )
        else:
            outcome.screen = objective_of(search, first, gpus)
        ctx.say(f"{name}: screen at {label}: estimate {outcome.screen:.3g} ({search.objective})")
        sizes = _constraints(ctx, launch, watched, lossy=touches_lossy(space_fields(search.space)))
        if sizes is None:
            return unfinished(outcome, watched, "a constraint profile's screening run")
        outcome.constraints = sizes
        if broken(sizes):  # the gates would refuse it: not promoted, whatever its estimate
            outcome.state, outcome.why = "infeasible", f"screen breaks a constraint: {describe(sizes)}"
            return outcome
        if not search.pareto and report(SCREEN_STEP, outcome.screen):
            outcome.state, outcome.why = "pruned", f"screen estimate {outcome.screen:.3g} not among the best"
            outcome.values = [outcome.screen]
            return outcome
        value = _full(
            trials,
            launch.session,
            candidate=candidate,
            search=search,
            first=first,
            at_level=at_level,
            gpus=gpus,
            watched=watched,
        )
        if value is None:
            return unfinished(outcome, watched, "the full measurement")
        outcome.values, outcome.fidelity = [value[0]], "full"
        outcome.at_least = value[1]
        if search.objective == "capacity":
            outcome.margin, outcome.attainment = held_at(trials.paths.candidate(name).capacity)
        if search.pareto:
            latency = _serial_latency(trials, launch, watched)
            if latency is None:
                return unfinished(outcome, watched, "the serial run for the latency objective")
            outcome.values.append(latency)
        outcome.state = "complete"
        return outcome


def _constraints(
    ctx: SweepContext, launch: Launch, watched: list[WatchEvent], *, lossy: bool
) -> dict[str, float] | None:
    """One run of each constraint profile on the trial's launch, ruled on against the baseline's opening
    runs on this node (:func:`.trial_constraints.screened`: a second run of a profile only where a ruling
    was within noise of its limit, and none broken), and, when the space touches a lossy setting
    (``lossy``), one run of the labelled profile scored as the accuracy gate scores it
    (:mod:`.trial_accuracy`); None when a run did not complete (its events in ``watched``: a server lost
    under load makes the point infeasible)."""
    labelled = accuracy_profile(ctx.cfg) if lossy else None
    profiles = constraint_profiles(ctx.cfg)
    if not profiles and labelled is None:
        return {}
    base_launch = ctx.paths.candidate(ctx.paired_baseline or ctx.cfg.baseline.name)
    base = baseline_runs(base_launch.root, profiles)

    def run(profile: str, repeat: int) -> ProfileSummary | None:
        ctx.check_stop()
        events = launch.measure(profile, repeat)
        watched.extend(events)
        path = LaunchPaths(launch.out).repeat(profile, repeat).summary
        if server_lost(events) or not path.exists():
            return None
        return read_model(path, ProfileSummary)

    sizes = screened(requirements(profiles, ctx.cfg.gates), base, profiles, run, ctx.cfg.gates)
    if sizes is None:
        return None
    if labelled is not None:
        ctx.check_stop()
        events = launch.measure(labelled, 1)
        watched.extend(events)
        if server_lost(events):
            return None
        root = ctx.paths.root
        size = probe_size(
            root,
            base_launch.root.relative_to(root).as_posix(),
            launch.out.relative_to(root).as_posix(),
            labelled,
            ctx.cfg.gates,
        )
        if size is not None:
            sizes[requirement_name(labelled)] = size
    return sizes


def _full(
    ctx: SweepContext,
    session: ServerSession,
    *,
    candidate: CandidateConfig,
    search: SearchConfig,
    first: ProfileSummary,
    at_level: Callable[[int], ProfileSummary | None],
    gpus: int,
    watched: list[WatchEvent],
) -> tuple[float, bool] | None:
    """The full fidelity: the capacity search's answer (0 when even the lowest level failed; a floor,
    flagged, when the SLO held at every level it tried), the $/Mtok at that capacity's tokens/s, or the
    mean of two runs at the level."""
    if search.objective in ("capacity", "usd_per_mtok_at_slo"):
        events = run_capacity(ctx, session, candidate)
        watched.extend(events)
        path = ctx.paths.candidate(candidate.name).capacity
        if not path.exists() or server_lost(events):
            return None
        capacity, at_least = measured_capacity(path)
        if search.objective == "usd_per_mtok_at_slo":  # a floor of capacity is a ceiling of cost
            tps = capacity_output_tps(read_model(path, CapacityResult))
            return usd_at(tps or 0.0, gpus, ctx.cfg.host.gpu_hour_price), at_least
        return (capacity if capacity is not None else 0.0), at_least
    second = at_level(2)
    if second is None:
        return None
    return mean([objective_of(search, first, gpus), objective_of(search, second, gpus)]), False


def unfinished(outcome: TrialOutcome, events: list[WatchEvent], during: str) -> TrialOutcome:
    """A step that did not complete: a server that started and was then lost under load (died, OOM-killed,
    hung, unhealthy: ``LOST``) makes the point infeasible (a constraint the sampler learns; the point is
    never launched again); anything else (a harness fault, a run without an SLO figure) is a failed trial,
    which says nothing of the point."""
    event = next((e for e in events if e.kind in LOST), None)
    if event is None:
        outcome.state, outcome.why = "failed", f"{during} did not complete"
        return outcome
    detail = event.detail[:160] + ("..." if len(event.detail) > 160 else "")
    outcome.state = "infeasible"
    outcome.why = f"{DIED_UNDER_LOAD} ({event.kind}) during {during}: {detail}"
    return outcome


def measured_capacity(path: Path) -> tuple[float | None, bool]:
    """A ``capacity.json``'s capacity and whether it is a floor (the SLO held at every level the search
    tried: "≥ 16", never more than was measured); (None, False) without the file or a capacity."""
    if not path.exists():
        return None, False
    result = read_model(path, CapacityResult)
    return result.capacity, result.capacity is not None and result.high is None


def held_at(path: Path) -> tuple[float | None, float | None]:
    """A ``capacity.json``'s SLO margin (the median of the runs at its capacity level) and attainment (their
    mean) at the capacity it found; (None, None) without the file, a capacity or a run at that level."""
    if not path.exists():
        return None, None
    result = read_model(path, CapacityResult)
    runs = [p for p in result.points if result.capacity is not None and p.level == result.capacity]
    if not runs:
        return None, None
    return median(p.margin for p in runs), mean(p.attainment for p in runs)


def _serial_latency(ctx: SweepContext, launch: Launch, watched: list[WatchEvent]) -> float | None:
    """Median end-to-end seconds of one run of the serial profile (the Pareto front's second objective):
    the constraint's serial run when the screen measured it on this launch, else one run now."""
    profile = ctx.cfg.gates.serial_profile
    if LaunchPaths(launch.out).repeat(profile, 1).summary.exists():
        return launch.summary(profile, 1).e2e.p50
    events = launch.measure(profile, 1)
    watched.extend(events)
    if server_lost(events):
        return None
    return launch.summary(profile, 1).e2e.p50
