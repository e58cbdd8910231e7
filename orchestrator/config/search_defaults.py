"""What a search takes from the service and its baseline instead of the user's files (docs/search.md,
"Search on your own host").

Pipeline position: between typing and validation (:func:`orchestrator.config.compose.load`, plan's
candidates, the sweeper's jobs and its opening), and beside :mod:`orchestrator.search.checks`,
which refuses what cannot be derived. With a search selected, a value the user did not write (on the
command line, in an experiment or in a file of their own; the shipped ``conf/config.yaml`` and group
defaults are not theirs) is derived:

- ``capacity.max_level``: the most requests any configuration of the search runs at once, the largest
  ``max_num_seqs`` (the baseline's and the space's) x the largest ``data_parallel_size`` (the baseline's
  and the layouts'); a closed-loop level above it only queues. ``capacity.start``: a quarter of it.
- the profiles the gates judge (``run.profiles``, ``run.recovery_profiles``, ``gates.accepted_profiles``,
  ``gates.loaded_profiles``): a shipped profile whose longest request cannot fit ``service.max_model_len``
  is left out, with a line. A profile the user named is refused instead (validation's own problem),
  as vLLM derives its own defaults from ``max_model_len`` but refuses an explicit value that conflicts.

Each derived value is a :class:`Derived` with its reason; ``plan`` prints them, the sweep says them at
its opening and records them in ``config.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import ConfigError, ConfigProblem
from contracts.paths import CONF_DIR
from contracts.schema import GauntletConfig, WorkloadConfig
from contracts.search import Space
from orchestrator.config.space import parse_space
from orchestrator.config.validate import Sources, longest, read_yaml

#: The lists of profiles a search's gates judge; a shipped one is derived from the service's context.
PROFILE_LISTS = ("run.profiles", "run.recovery_profiles", "gates.accepted_profiles", "gates.loaded_profiles")


@dataclass(frozen=True)
class Derived:
    """A value the search took from the service or the baseline, and why."""

    field: str  # dotted, as a command-line override names it: capacity.max_level
    value: Any
    why: str

    @property
    def line(self) -> str:
        """``capacity.max_level: 256, from ...``, as plan and the sweep's opening print it."""
        return f"{self.field}: {_shown(self.value)}, {self.why}"


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def request_tokens(wl: WorkloadConfig) -> int | None:
    """The longest request a generated profile sends (shared prefix + longest prompt + longest output), in
    tokens; None for a prompts file or a data source (their lengths are checked where they are read)."""
    if wl.data is not None or wl.prompts_file is not None:
        return None
    prefix = wl.shared_prefix.prefix_tokens if wl.shared_prefix is not None else 0
    return prefix + longest(wl.prompt_tokens) + longest(wl.output_tokens)


# ---------------------------------------------------------------- the pure rules


def derive(cfg: GauntletConfig, space: Space | None, user_set: Callable[[str], bool]) -> list[Derived]:
    """What a search takes from the service and its baseline, for each field ``user_set`` says the user
    did not write; [] without a search. ``space``: the search's parsed space (None: it does not parse,
    which :mod:`orchestrator.search.checks` refuses), for the largest ``max_num_seqs``."""
    if cfg.search is None:
        return []
    return [*_capacity_bounds(cfg, space, user_set), *_fitting_profiles(cfg, user_set)]


def _capacity_bounds(
    cfg: GauntletConfig, space: Space | None, user_set: Callable[[str], bool]
) -> list[Derived]:
    cap = cfg.capacity
    profile = cfg.workloads.get(cap.profile) if cap.profile is not None else None
    if profile is None or profile.mode != "closed" or user_set("capacity.max_level"):
        return []  # an open-loop level is a rate, which max_num_seqs does not bound
    seqs = cfg.baseline.max_num_seqs
    if seqs is None:
        why = (
            "the schema's default: the baseline sets no max_num_seqs (vLLM's default depends on its version "
            "and GPU), so the most requests it runs at once is not known; set the baseline's max_num_seqs, "
            "or capacity.max_level"
        )
        return [Derived("capacity.max_level", cap.max_level, why)]
    seqs_from = f"the baseline's max_num_seqs ({seqs})"
    searched = _largest(space, "max_num_seqs")
    if searched is not None and searched > seqs:
        seqs, seqs_from = int(searched), f"the search's largest max_num_seqs ({int(searched)})"
    dp, dp_from = cfg.baseline.data_parallel_size, "the baseline's"
    if space is not None and "layout" in {*(d.name for d in space.dimensions), *space.fixed}:
        widest = max((int(lay.get("data_parallel_size", 1)) for lay in space.layouts.values()), default=dp)
        if widest > dp:
            dp, dp_from = widest, "the widest layout's"
    ceiling = float(seqs * dp)
    out = [
        Derived(
            "capacity.max_level",
            ceiling,
            f"from {seqs_from} x {dp_from} data_parallel_size ({dp}): no configuration of the search runs "
            "more requests at once (set capacity.max_level to choose another)",
        )
    ]
    if not user_set("capacity.start"):
        start = float(max(int(cap.min_level), int(ceiling // 4)))
        if start != cap.start:
            out.append(Derived("capacity.start", start, "a quarter of capacity.max_level"))
    return out


def _largest(space: Space | None, name: str) -> float | None:
    """The largest value ``space`` gives a numeric field (a fixed value, a choice's, an interval's top)."""
    if space is None:
        return None
    values: list[float] = []
    if isinstance(space.fixed.get(name), int | float):
        values.append(float(space.fixed[name]))
    for dim in space.dimensions:
        if dim.name != name:
            continue
        if dim.high is not None:
            values.append(dim.high)
        values.extend(float(v) for v in dim.values if isinstance(v, int | float))
    return max(values, default=None)


def _fitting_profiles(cfg: GauntletConfig, user_set: Callable[[str], bool]) -> list[Derived]:
    context = cfg.service.max_model_len
    too_long: dict[str, int] = {}
    for name, wl in cfg.workloads.items():
        tokens = request_tokens(wl)
        if tokens is not None and tokens > context and name != cfg.capacity.profile:
            too_long[name] = tokens  # the capacity profile is the search's own: validation refuses it
    out: list[Derived] = []
    for dotted in PROFILE_LISTS:
        names: list[str] = _get(cfg, dotted)
        dropped = [n for n in names if n in too_long]
        if not dropped or user_set(dotted):
            continue  # one the user named is refused by validation, naming the profile
        left = ", ".join(f"{n} ({too_long[n]} tokens)" for n in dropped)
        why = (
            f"without {left}: longer than service.max_model_len ({context}); "
            f"name {dotted} to choose the profiles"
        )
        out.append(Derived(dotted, [n for n in names if n not in too_long], why))
    return out


def _get(cfg: GauntletConfig, dotted: str) -> Any:
    node: Any = cfg
    for key in dotted.split("."):
        node = getattr(node, key)
    return node


def _set(cfg: GauntletConfig, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node: Any = cfg
    for key in parents:
        node = getattr(node, key)
    setattr(node, last, value)


# ---------------------------------------------------------------- who wrote a value


def user_setter(sources: Sources) -> Callable[[str], bool]:
    """Whether the user wrote a field: a command-line override, an experiment (``+experiment=NAME``, the
    shipped ones included: choosing one is the user's act), the primary config when it is not the shipped
    ``conf/config.yaml``, or a group file of their own (``gates=mine``, outside ``conf/``)."""

    def user_set(dotted: str) -> bool:
        if sources.override_of(dotted) is not None:
            return True
        path = dotted.split(".")
        files = _chain(sources, "experiment", sources.choices.get("experiment"))
        primary = sources.group_file("", sources.config_name)
        if primary is not None and not _shipped(primary):
            files.append(primary)
        if any(_sets(read_yaml(f), path) for f in files):
            return True
        group = _chain(sources, path[0], sources.choices.get(path[0]))
        return any(not _shipped(f) and _sets(read_yaml(f), path[1:]) for f in group)

    return user_set


def _chain(sources: Sources, group: str, choice: str | None) -> list[Path]:
    """A group file and the same-group files it extends (``defaults: [demo, _self_]``)."""
    out: list[Path] = []
    while choice is not None and (path := sources.group_file(group, choice)) is not None and path not in out:
        out.append(path)
        parents = [
            e for e in read_yaml(path).get("defaults") or [] if isinstance(e, str) and e not in ("_self_",)
        ]
        choice = next((e for e in parents if not e.startswith("/")), None)
    return out


def _shipped(path: Path) -> bool:
    return path.resolve().is_relative_to(CONF_DIR.resolve())


def _sets(raw: Mapping[str, Any], path: Sequence[str]) -> bool:
    node: Any = raw
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


# ---------------------------------------------------------------- the call sites


def apply_search_defaults(cfg: GauntletConfig, sources: Sources) -> list[Derived]:
    """Derive (:func:`derive`), set the values on ``cfg`` and note their lines in ``sources.derived``
    (what ``plan`` prints); the derived values. Once per composition: a second call finds them set."""
    if cfg.search is None or sources.derived:
        return []
    try:
        space: Space | None = parse_space(cfg.search, where=sources.describe("search"))
    except ConfigError:
        space = None  # refused by orchestrator.search.checks, with the problem
    derived = derive(cfg, space, user_setter(sources))
    for item in derived:
        _set(cfg, item.field, item.value)
    sources.derived = [item.line for item in derived]
    return derived


def capacity_profile_problem(cfg: GauntletConfig, where: str) -> ConfigProblem:
    """``capacity.profile`` unset under a search: what to set, with the closed-loop profiles it could be
    (the search's objective is the user's to choose, so it is refused rather than guessed)."""
    closed = sorted(
        (wl.concurrency, name)
        for name, wl in cfg.workloads.items()
        if name in cfg.run.profiles and wl.mode == "closed" and wl.concurrency > 1
    )
    offer = ", ".join(f"{name} ({n} in flight)" for n, name in reversed(closed)) or "none in run.profiles"
    example = closed[-1][1] if closed else "NAME"
    return ConfigProblem(
        where,
        "capacity.profile",
        None,
        "a workload: a search screens and measures capacity on it; set it on the command line "
        f"(capacity.profile={example}) or in an experiment; closed-loop profiles of run.profiles: {offer}",
    )


def format_derived(lines: Sequence[str]) -> str:
    """``plan``'s lines for the derived values ("" when none), after the search's plan."""
    if not lines:
        return ""
    head = "  derived, as your files do not set them (the sweep records them in its config.yaml):"
    return "\n".join([head, *(f"    {line}" for line in lines)]) + "\n"
