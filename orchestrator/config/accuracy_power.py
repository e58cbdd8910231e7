"""Whether a labelled set can ever pass the accuracy gate: refused at ``plan`` when it is too small.

Pipeline position: :func:`orchestrator.config.accuracy.accuracy_problems` (called by
:func:`orchestrator.config.validate.validate`) calls :func:`power_problems` when the sweep runs the
labelled profile. The gate passes only when the accuracy drop's upper bound is at or below
``gates.accuracy.tolerance`` (:mod:`gates.noninferiority`); with ``n`` items that bound is at best
``z^2 / (n + z^2)`` (a candidate that answers every item as the baseline does), so a set smaller than
:func:`gates.noninferiority.items_needed` cannot pass any candidate, and a sweep that runs it would spend
its launches on an answer known in advance. The problem says how many items are needed, and the smallest
tolerance the set could show.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from contracts.errors import ConfigProblem
from contracts.schema import GauntletConfig
from gates.noninferiority import items_needed, tango_interval


def best_bound(items: int, confidence: float) -> float:
    """The drop's upper bound with ``items`` items and none discordant: the smallest tolerance they can show.

    >>> round(best_bound(40, 0.95), 4)
    0.0876
    """
    return tango_interval(0, 0, items, confidence)[1]


def power_problems(cfg: GauntletConfig, gates_where: str, at: Callable[[str], str]) -> list[ConfigProblem]:
    """The labelled profile's set against ``gates.accuracy.tolerance`` at ``gates.confidence``: a tolerance
    no set can pass (0), or fewer items (``num_requests``: one per item) than a pass needs. ``gates_where``
    names the file that set the gates; ``at(key)`` the file that set a key of the profile."""
    acc, confidence = cfg.gates.accuracy, cfg.gates.confidence
    tolerance, section = acc.tolerance, f"workloads.{acc.profile}"
    if not isinstance(tolerance, int | float) or not 0 <= tolerance < 1 or not 0 < confidence < 1:
        return []  # refused by the bounds' own checks
    need = items_needed(float(tolerance), confidence)
    if need is None:
        allowed = (
            "above 0 when the sweep runs the labelled profile: the gate passes only when the accuracy drop's "
            "upper bound is at or below the tolerance, and no set shows a drop of at most 0 (the bound of "
            "an identical candidate is above 0); set the drop you accept, e.g. 0.02 (2 accuracy points: "
            f"{items_needed(0.02, confidence)} items at least)"
        )
        return [ConfigProblem(gates_where, "gates.accuracy.tolerance", tolerance, allowed)]
    wl = cfg.workloads[acc.profile]
    if wl.num_requests >= need:
        return []
    best = best_bound(wl.num_requests, confidence)
    allowed = (
        f"a labelled set of at least {need} items: with {wl.num_requests} items the accuracy drop's upper "
        f"bound ({confidence:.0%} Tango score interval) is at best {best * 100:.1f} points "
        f"(a candidate that answers every item as the baseline does), above gates.accuracy.tolerance = "
        f"{tolerance:g} ({tolerance * 100:g} points), so no candidate could pass; use a set of at least "
        f"{need} items (prompts_file, num_requests), or a gates.accuracy.tolerance of at least "
        f"{math.ceil(best * 1000) / 1000:g} for this one"
    )
    return [ConfigProblem(at("prompts_file"), f"{section}.prompts_file", wl.prompts_file, allowed)]
