"""``python -m orchestrator plan``: compose, validate and render every candidate, launching nothing.

Pipeline position: the dry run of the first two arrows (config -> validated config -> launch spec). It
prints, per candidate, the exact command, its environment and its fingerprint, so a reviewer sees what a
sweep would start before anything starts.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from contracts.errors import ConfigError, ConfigProblem, SpecError
from contracts.paths import PROJECT_ROOT
from contracts.schema import GauntletConfig
from launch.preflight import Probes, real_probes
from launch.ray_cluster import is_ray, launch_argv
from launch.spec import LaunchSpec, render_spec
from orchestrator.app.controller import jobs_run_elsewhere
from orchestrator.config.candidate_names import check_candidate_names
from orchestrator.config.candidates import CandidateComposer, LeftOut, format_left_out, named_candidates
from orchestrator.config.command import run_composing_command
from orchestrator.config.compose import ConfigLocation, load, select
from orchestrator.config.search_defaults import format_derived
from orchestrator.config.validate import Sources, display_path
from orchestrator.search.checks import checked_space
from orchestrator.search.flags import FLAG_HINT, flag_problems
from orchestrator.search.nodes import planned_nodes
from orchestrator.search.plan_text import format_search_plan, recorded_startup, startup_estimate
from orchestrator.search.prune import doctor_flag_check, prune
from orchestrator.search.shared import remote_launcher, sqlite_parallel_problem


@dataclass(frozen=True)
class PlannedCandidate:
    """One candidate as a sweep would launch it."""

    option: str
    spec: LaunchSpec
    is_baseline: bool


@dataclass(frozen=True)
class Planned:
    """What ``plan`` found: the candidates as a sweep would launch them, those left out, and one composed
    configuration (the search's plan reads it; None when nothing composed)."""

    candidates: list[PlannedCandidate]
    left_out: list[LeftOut]
    composed: tuple[GauntletConfig, Sources] | None


def plan(overrides: Sequence[str] = (), location: ConfigLocation | None = None) -> list[PlannedCandidate]:
    """Render the launch spec of every candidate selected by ``overrides`` (all of the group by default).

    ``location`` carries Hydra's ``--config-path/--config-name/--config-dir``; candidates found on the
    whole search path (``--config-dir``, ``hydra.searchpath``) count, as for the sweep's ``glob(*)``.
    Without ``candidate=``, those the host cannot place are left out (:func:`plan_selection`).
    """
    return plan_selection(overrides, location).candidates


def plan_selection(overrides: Sequence[str] = (), location: ConfigLocation | None = None) -> Planned:
    """:func:`plan`, with what it left out. Named candidates are validated as the sweep validates them
    (every problem refused); without ``candidate=`` the group's candidates that the host's placement rule
    refuses (the shipped 8-GPU ones on a smaller host) are left out and listed, since no sweep on this
    host would run them; the baseline is never left out."""
    loc = location or ConfigLocation()
    selection = select(loc, overrides)
    check_candidate_names(selection.search_path)
    sources = Sources(search_path=selection.search_path)
    named = named_candidates(overrides)
    planned: list[PlannedCandidate] = []
    left_out: list[LeftOut] = []
    problems: list[ConfigProblem] = []
    composed: tuple[GauntletConfig, Sources] | None = None
    baseline_name: str | None = None
    seen: set[str] = set()
    with CandidateComposer(loc, selection.rest) as composer:  # the part candidates share, composed once
        for option in selection.candidates:
            try:
                got = composer.load(option) if named else composer.load_fitting(option)
                if isinstance(got, str):
                    left_out.append(LeftOut(option, got))
                    continue
                cfg, cfg_sources = got
                spec = render_spec(cfg.service, cfg.candidate, cfg.host)
            except ConfigError as exc:
                for problem in exc.problems:  # each once, as the candidates share files
                    if str(problem) not in seen:
                        seen.add(str(problem))
                        problems.append(problem)
                continue
            except SpecError as exc:
                path = sources.group_file("candidate", option)
                where = display_path(path) if path else f"candidate/{option}.yaml"
                problem = ConfigProblem(where, "(rendering)", option, str(exc))
                seen.add(str(problem))
                problems.append(problem)
                continue
            baseline_name = cfg.baseline.name
            composed = composed or (cfg, cfg_sources)
            planned.append(PlannedCandidate(option, spec, cfg.candidate.name == cfg.baseline.name))
    if problems:
        raise ConfigError(problems)
    if baseline_name is not None:
        planned.sort(key=lambda p: (not p.is_baseline, p.option))
    return Planned(planned, left_out, composed)


def format_plan(planned: Sequence[PlannedCandidate]) -> str:
    if not planned:
        return "no candidates\n"
    first = planned[0].spec
    kind = {"sim": "simulated host (launch.sim)", "cpu": "real vLLM on CPU", "gpu": "GPU host"}.get(
        first.host_kind, first.host_kind
    )
    lines = [
        f"gauntlet plan: {len(planned)} candidate(s) on host '{first.host}' ({kind}); nothing is started",
        "",
    ]
    for item in planned:
        tag = "  [retained baseline]" if item.is_baseline else ""
        lines.append(f"{item.spec.candidate}{tag}")
        nodes = f" (the whole, {item.spec.nodes} nodes)" if item.spec.nodes > 1 else ""
        lines.append(f"  fingerprint: {item.spec.fingerprint}{nodes}")
        env = item.spec.env_line()
        if env:
            lines.append(f"  env: {env}")
        if item.spec.nodes == 1:
            lines.append(f"  command: {item.spec.command_line()}")
        for node, fingerprint in enumerate(item.spec.node_fingerprints() if item.spec.nodes > 1 else []):
            role = "head" if node == 0 else "follower"
            lines.append(f"  node {node} ({role}): {fingerprint}")
            lines.append(f"    command: {shlex.join(item.spec.node_argv(node))}")
            if node == 0 and is_ray(item.spec):  # Ray's head first, then that command (launch.ray_head)
                lines.append(f"    launched as: {shlex.join(launch_argv(item.spec))}")
        lines.append("")
    return "\n".join(lines)


def search_plan(
    overrides: Sequence[str] = (),
    location: ConfigLocation | None = None,
    probes: Probes | None = None,
    composed: tuple[GauntletConfig, Sources] | None = None,
) -> str:
    """With a search selected (``search=NAME``): its space's size, what is pruned before anything starts
    and why (the host's placement rule, doctor's flag table), its budget and the estimated wall time of
    its server starts (:func:`orchestrator.search.plan_text.format_search_plan`); "" without one. The search
    is checked as the sweep checks it (:func:`orchestrator.search.checks.checked_space`).
    ``composed``: a configuration :func:`plan_selection` composed (the search's part is every
    candidate's), else the overrides are composed here."""
    loc = location or ConfigLocation()
    cfg, sources = composed if composed is not None else load(select(loc, overrides).rest, location=loc)
    if cfg.search is None:
        return ""
    elsewhere = jobs_run_elsewhere(sources.launcher, cfg)  # the sweep's view of its launcher
    space = checked_space(cfg, sources, elsewhere=elsewhere)  # what the sweep refuses (.search.checks)
    check, flags = doctor_flag_check(cfg, probes if probes is not None else real_probes(PROJECT_ROOT))
    where = sources.describe("search")
    if refused := flag_problems(cfg, space, check, where=where):
        raise ConfigError(refused, hint=FLAG_HINT)  # a flag vLLM would refuse: the sweep's opening too
    remote = remote_launcher(list(overrides))  # SQLite written from other nodes: the sweep's opening too
    if (shared := sqlite_parallel_problem(cfg.search, remote=remote, where=where)) is not None:
        raise ConfigError([shared], hint="nothing was started")
    pruned = prune(space, cfg, check)
    nodes = planned_nodes(cfg, elsewhere=elsewhere)  # as the sweep's search charges
    startup = startup_estimate(cfg, recorded_startup(cfg))
    text = format_search_plan(cfg, space, pruned, flags=flags, startup=startup, nodes=nodes)
    return "\n" + text + format_derived(sources.derived)


PLAN_USAGE = """usage: python -m orchestrator plan [hydra flags] [overrides]

Compose and validate every candidate (or those `candidate=a,b` / `candidate=glob(tp*)` name) as the sweep
would, and print the exact command, environment and fingerprint of each; nothing is started. Without
`candidate=`, those the host cannot place (TP x DP) are listed as not planned. With `search=NAME`, the
search is checked as the sweep checks it and its space, pruning and budget are printed. Hydra's flags
work as on the sweep: -cd/--config-dir adds your own config dir (its candidates join the group),
-cp/--config-path and -cn/--config-name choose the primary config, --cfg/--info show instead of planning.

"""


def _planned_with_search(overrides: Sequence[str], location: ConfigLocation) -> tuple[Planned, str]:
    planned = plan_selection(overrides, location)
    search = search_plan(overrides, location, composed=planned.composed)
    if planned.left_out and planned.candidates:
        search = "\n" + format_left_out(planned.left_out, planned.candidates[0].spec.host) + search
    return planned, search


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    """``plan [hydra flags] [overrides]``: Hydra's own parser; ``--cfg/--info/--help`` show, not plan."""
    return run_composing_command(
        argv,
        command="plan",
        usage=PLAN_USAGE,
        act=_planned_with_search,
        render=lambda both: (format_plan(both[0].candidates) + both[1], 0),
        out=out,
    )
