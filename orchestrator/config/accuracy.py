"""The answer_accuracy gate's configuration, checked when the config is composed: a labelled set's file
(:mod:`contracts.labelled`) read and refused by ``file:line``, and the gate's settings against the profile.

Pipeline position: :func:`orchestrator.config.validate.validate` calls both; each returns problems, never
raises, so one run of ``plan`` names every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from contracts.errors import ConfigProblem, HarnessError
from contracts.labelled import is_labelled, parse_labelled
from contracts.schema import GauntletConfig, WorkloadConfig
from orchestrator.config.accuracy_power import power_problems


class Origins(Protocol):
    """Which file set a config key (:class:`orchestrator.config.validate.Sources`), for messages."""

    choices: dict[str, str]

    def origin(self, group: str, choice: str | None, key_path: Sequence[str], package: str = "") -> str: ...

    def describe(self, package: str) -> str: ...


def labelled_file_problems(
    path: Path, wl: WorkloadConfig, bad: Callable[[Sequence[str], object, str], None]
) -> None:
    """``bad(key_path, value, what is allowed)`` for each problem of the labelled set at ``path`` that ``wl``
    sends: the file unreadable or misshapen (its ``file:line``), a request count that is not its size."""
    try:
        items = parse_labelled(path.read_text(), str(path))
    except (HarnessError, OSError, ValueError) as exc:
        why = exc.message if isinstance(exc, HarnessError) else f"cannot read {path}: {exc}"
        bad(["prompts_file"], wl.prompts_file, f"a labelled set, one JSON object a line: {why}")
        return
    if wl.num_requests != len(items):
        bad(["num_requests"], wl.num_requests, f"{len(items)}: each item of {path} sent once")


def accuracy_problems(cfg: GauntletConfig, src: Origins) -> list[ConfigProblem]:
    """The gate's bounds, and, when the sweep runs its profile, that the profile is a labelled set sent at
    temperature 0 with at least ``min_items`` items, and enough for the gate to ever pass
    (:mod:`orchestrator.config.accuracy_power`); each problem names the file that set it."""
    acc, out, gates_where = cfg.gates.accuracy, [], src.describe("gates")
    tolerance, least = acc.tolerance, acc.min_items
    if not (isinstance(tolerance, int | float) and 0 <= tolerance < 1):
        out.append(
            ConfigProblem(gates_where, "gates.accuracy.tolerance", tolerance, "accuracy points in [0, 1)")
        )
    if not (isinstance(least, int) and least >= 1):
        out.append(ConfigProblem(gates_where, "gates.accuracy.min_items", least, "an integer >= 1"))
    cut = acc.max_truncated
    if not (isinstance(cut, int | float) and 0 <= cut <= 1):
        allowed = "a share of a side's answers in [0, 1] (0.02: 2%)"
        out.append(ConfigProblem(gates_where, "gates.accuracy.max_truncated", cut, allowed))
    wl = cfg.workloads.get(acc.profile)
    if acc.profile not in cfg.run.profiles or wl is None:
        return out  # not asked for: the gate is not applicable
    if not is_labelled(wl.prompts_file):
        allowed = f"a profile whose prompts_file is a labelled set (.jsonl), not {wl.prompts_file!r}"
        return [*out, ConfigProblem(gates_where, "gates.accuracy.profile", acc.profile, allowed)]
    section = f"workloads.{acc.profile}"
    choice = src.choices.get(f"workload@{section}")

    def at(key: str) -> str:
        return src.origin("workload", choice, [key], section) if choice else f"<{section}>"

    if wl.temperature != 0:
        allowed = "0: a labelled set is scored on greedy answers"
        out.append(ConfigProblem(at("temperature"), f"{section}.temperature", wl.temperature, allowed))
    if isinstance(least, int) and wl.num_requests < least:
        allowed = f"at least gates.accuracy.min_items = {least} items, or a smaller gates.accuracy.min_items"
        out.append(ConfigProblem(at("num_requests"), f"{section}.num_requests", wl.num_requests, allowed))
    return [*out, *power_problems(cfg, gates_where, at)]
