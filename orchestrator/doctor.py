"""``python -m orchestrator doctor [overrides]``: will this host start these candidates? Nothing is started.

Pipeline position: the command line, beside ``plan``. It composes every selected candidate as the sweep
would and runs the pre-flight checks of :mod:`launch.preflight` (the server program and its version,
every rendered flag against the installed vLLM's ``--help``, NVML against the host config and each
candidate's TP x DP x EP placement, a memory-fit estimate, the weights or HF_TOKEN, the port). It prints
what it checked, then one line per problem, and exits 4 when there is one (a launch would fail). A
sweep runs the same checks when it opens, before it stops the live service.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from contracts.errors import ConfigError, LaunchError, SpecError
from contracts.paths import PROJECT_ROOT
from contracts.results import DoctorProblem, DoctorReport
from contracts.schema import GauntletConfig
from launch.netcheck import NodeNetwork, network_problems, real_network
from launch.preflight import Probes, diagnose, real_probes
from launch.spec import render_spec
from orchestrator.app.controller import jobs_run_elsewhere
from orchestrator.config.candidate_names import check_candidate_names
from orchestrator.config.candidates import CandidateComposer, LeftOut, named_candidates
from orchestrator.config.command import run_composing_command
from orchestrator.config.compose import ConfigLocation, select
from orchestrator.config.validate import Sources
from orchestrator.ledger.live import LiveService, live_service, live_service_mismatch
from orchestrator.search.checks import search_problems
from orchestrator.search.flags import flag_dimension, flag_problems
from orchestrator.search.prune import doctor_flag_check
from orchestrator.search.storage import StorageFault, storage_problem

#: Exit code when doctor finds a problem: a launch would fail (LaunchError's code).
EXIT_PROBLEMS = LaunchError.exit_code

DOCTOR_USAGE = """usage: python -m orchestrator doctor [hydra flags] [overrides]

Check, before anything is started or stopped, that the host can start every selected candidate (all of
the group the host can place by default, the others listed; `candidate=a,b` selects): the server program
and its version, every flag and value of each rendered command line against the installed vLLM's own
--help (the simulator's parser on host=sim), GPUs from NVML against the host config and each TP x DP
placement, a memory-fit estimate, the weights or HF_TOKEN, the port, and with search=NAME the search's
settings and its study's database (search.storage). One line per problem; exit 4 when there is any.

"""


def gauntlet_live_service(cfg: GauntletConfig, alive: Callable[[int, float], bool]) -> LiveService | None:
    """The live retained server gauntlet left on the service's port, found as the sweep's opening finds it
    (:func:`orchestrator.ledger.live.live_service`: the copy beside the port's lock, then the latest sweep
    under ``run.sweeps_dir``), or None. A candidate's server left by a crashed sweep is not it: a sweep
    does not stop that one, so its port stays a problem. ``alive(pid, create_time)``: the same process
    still runs."""
    return live_service(
        cfg.service.port,
        lambda server: alive(server.pid, server.create_time),
        sweeps_dir=Path(cfg.run.sweeps_dir),
    )


def live_service_problem(cfg: GauntletConfig, live: LiveService, baseline_file: str) -> DoctorProblem | None:
    """The sweep's opening refuses a live service whose spec is not the configured baseline's: said now,
    in the opening's words (:func:`orchestrator.ledger.live.live_service_mismatch`)."""
    try:
        spec = render_spec(cfg.service, cfg.baseline, cfg.host)
    except SpecError:
        return None  # the baseline's own spec problem is reported by the checks
    mismatch = live_service_mismatch(live, spec, baseline_file)
    if mismatch is None:
        return None
    found = mismatch.differences
    differences = f" ({'; '.join(found[:3])}{'; ...' if len(found) > 3 else ''})" if found else ""
    return DoctorProblem(
        candidate=cfg.baseline.name,
        check="live service",
        message=f"{mismatch.message}{differences}: a sweep would refuse before stopping it; {mismatch.hint}",
    )


def _alive(pid: int, create_time: float) -> bool:
    from launch.process import PsutilProcesses  # noqa: PLC0415  (only when a previous sweep left one)

    info = PsutilProcesses().info(pid)
    return info is not None and abs(info.create_time - create_time) < 1.0


def doctor(
    overrides: Sequence[str] = (),
    location: ConfigLocation | None = None,
    probes: Probes | None = None,
    alive: Callable[[int, float], bool] = _alive,
    storage: Callable[[str | None], StorageFault | None] = storage_problem,
    *,
    network: NodeNetwork | None = None,
) -> DoctorReport:
    """Compose every selected candidate and diagnose them together (config problems count, per candidate).

    When gauntlet's own live service (left by the latest sweep) holds the port, the port and free-memory
    checks are skipped as in a sweep, which stops that server before it measures. A search is checked as
    the sweep checks it (:func:`orchestrator.search.checks.search_problems`), and its study's
    database reached (``storage``: :func:`orchestrator.search.storage.storage_problem`). A candidate
    across nodes has its nodes' network checked (``network``: :func:`launch.netcheck.real_network`)."""
    loc = location or ConfigLocation()
    selection = select(loc, overrides)
    check_candidate_names(selection.search_path)
    named = named_candidates(overrides)
    configs: list[GauntletConfig] = []
    problems: list[DoctorProblem] = []
    left_out: list[LeftOut] = []
    sources: Sources | None = None
    with CandidateComposer(loc, selection.rest) as composer:  # the part candidates share, composed once
        for option in selection.candidates:
            try:
                got = composer.load(option) if named else composer.load_fitting(option)
            except ConfigError as exc:
                for text in dict.fromkeys(str(p) for p in exc.problems):
                    if all(text != known.message for known in problems):  # the baseline's recurs in each
                        problems.append(DoctorProblem(candidate=option, check="spec", message=text))
                continue
            if isinstance(got, str):  # not named, and the host cannot place it: not what would run here
                left_out.append(LeftOut(option, got))
                continue
            cfg, sources = got
            configs.append(cfg)
    if not configs:
        return DoctorReport(problems=problems)
    first = configs[0]
    assert sources is not None
    probes = probes if probes is not None else real_probes(Path(PROJECT_ROOT))
    problems.extend(search_doctor_problems(first, sources, storage, probes))
    live = gauntlet_live_service(first, alive)
    report = diagnose(
        first, [first.baseline, *(c.candidate for c in configs)], probes, live_service=live is None
    )
    notes = list(report.notes)
    if left_out:
        why = "; ".join(f"{item.option}: {item.why}" for item in left_out)
        notes.append(
            f"not checked: {len(left_out)} candidate(s) of the group that host '{first.host.name}' cannot "
            f"place (no candidate=... was named; `candidate=NAME` checks one as a sweep would): {why}"
        )
    if live is not None:
        notes.append(
            f"port and free GPU memory: held by gauntlet's live service {live.describe()}; "
            "a sweep stops it first"
        )
        if (mismatch := live_service_problem(first, live, sources.baseline_file())) is not None:
            problems.append(mismatch)
    problems.extend(node_network_problems(configs, network or real_network(), notes))
    return DoctorReport(problems=[*problems, *report.problems], notes=notes)


def node_network_problems(
    configs: Sequence[GauntletConfig], net: NodeNetwork, notes: list[str]
) -> list[DoctorProblem]:
    """Each multi-node spec's nodes resolve and reach the head's RPC port (:mod:`launch.netcheck`), the
    baseline's once; what was checked goes to ``notes``."""
    problems: list[DoctorProblem] = []
    seen: set[str] = set()
    for cfg in configs:
        for cand in (cfg.baseline, cfg.candidate):
            try:
                spec = render_spec(cfg.service, cand, cfg.host)
            except SpecError:
                continue  # said by the spec check
            if spec.fingerprint in seen:
                continue
            seen.add(spec.fingerprint)
            found, checked = network_problems(spec, net)
            problems.extend(DoctorProblem(candidate=cand.name, check="network", message=m) for m in found)
            notes.extend(checked)
    return problems


def search_doctor_problems(
    cfg: GauntletConfig,
    sources: Sources,
    storage: Callable[[str | None], StorageFault | None],
    probes: Probes,
) -> list[DoctorProblem]:
    """What the sweep's opening would refuse of the search, said now: its settings (the same problems, the
    same words), a flag of its space the installed vLLM does not take (doctor's flag table,
    :func:`orchestrator.search.flags.flag_problems`, as ``plan`` and the opening ask it) and its study's
    database out of reach."""
    if cfg.search is None:
        return []
    try:  # where its trials run: the node baseline its budget pays (the sweep's view of its launcher)
        elsewhere, refused = jobs_run_elsewhere(sources.launcher, cfg), []
    except ConfigError as exc:
        elsewhere, refused = True, exc.problems
    space, found = search_problems(cfg, sources, elsewhere=elsewhere)
    found = [*refused, *found]
    if space is not None and any(flag_dimension(d) for d in space.dimensions):
        check, _ = doctor_flag_check(cfg, probes)
        found = [*found, *flag_problems(cfg, space, check, where=sources.describe("search"))]
    problems = [DoctorProblem(candidate=None, check="search", message=str(p)) for p in found]
    fault = storage(cfg.search.storage)
    if fault is not None:
        message = (
            f"{fault.message()}: a sweep would refuse before stopping the live service; check {fault.check}"
        )
        problems.append(DoctorProblem(candidate=None, check="search", message=message))
    return problems


def format_report(report: DoctorReport) -> str:
    lines = [f"  ok  {note}" for note in report.notes]
    lines += [f"  PROBLEM  {p.line()}" for p in report.problems]
    verdict = (
        f"gauntlet doctor: {len(report.problems)} problem(s); nothing was started or stopped"
        if report.problems
        else "gauntlet doctor: no problem found; nothing was started or stopped"
    )
    return "\n".join([*lines, verdict]) + "\n"


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    """``doctor [hydra flags] [overrides]``; exit 0 when nothing would fail, 4 when something would."""
    return run_composing_command(
        argv, command="doctor", usage=DOCTOR_USAGE, act=doctor, render=_rendered, out=out
    )


def _rendered(report: DoctorReport) -> tuple[str, int]:
    return format_report(report), EXIT_PROBLEMS if report.problems else 0
