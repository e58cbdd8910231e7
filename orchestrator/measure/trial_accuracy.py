"""A search trial's accuracy probe: the labelled profile run once at the screen, scored as the gate scores it.

Pipeline position: inside a trial's job (:func:`orchestrator.measure.trial.measure_trial`), beside the
screen's other gated requirements (:mod:`.trial_constraints`). A space that touches a lossy setting
(:func:`touches_lossy`: the KV cache's dtype, or a speculative-decoding field, whose draft sampling may
change answers) can trade answers for speed, which the ``answer_accuracy`` gate refuses at the
confirmation; so each started trial of such a space runs the labelled profile (``gates.accuracy.profile``,
when the sweep runs it) once, and its items are scored against the baseline's opening runs of it with the
gate's own rules (:mod:`gates.answer_accuracy`: each item right or wrong on each side, the drop's Tango
score interval on the paired items). The requirement's violation size, where the gate would fail on these
runs, is how far the drop's upper bound lies beyond ``gates.accuracy.tolerance`` in accuracy points (0.15:
15 points): the tolerance plus the size is the one at which the gate would pass them, what the search's
advice to relax names; a drop within noise, or within the tolerance, is met (``<= 0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.schema import GatesConfig, GauntletConfig
from contracts.sweepdir import Repeat, load_results
from gates.answer_accuracy import accuracy_status, labelled_set, score_side
from gates.answers import correct
from gates.noninferiority import paired_drop

#: Fields of a space that touch a lossy setting: the KV cache's dtype (typed, or as a vLLM flag), and any
#: speculative-decoding field (its draft sampling may be probabilistic, which changes answers).
LOSSY_FIELDS = ("kv_cache_dtype", "extra_args.kv_cache_dtype", "extra_args.kv-cache-dtype")
LOSSY_PREFIXES = ("speculative.", "extra_args.speculative")
#: The name of the accuracy requirement is the profile's with this suffix ("accuracy accuracy" reads
#: "accuracy" for the shipped profile name).
SUFFIX = "accuracy"


def space_fields(space: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted field names of a search space (``search.space``, nested dicts flattened).

    >>> space_fields({"max_num_seqs": "choice(1,2)", "speculative": {"num_speculative_tokens": 3}})
    ['max_num_seqs', 'speculative.num_speculative_tokens']
    """
    out: list[str] = []
    for key, value in space.items():
        name = f"{prefix}{key}"
        out += space_fields(value, f"{name}.") if isinstance(value, Mapping) else [name]
    return out


def touches_lossy(fields: Iterable[str]) -> bool:
    """Whether a space with ``fields`` touches a lossy setting (:data:`LOSSY_FIELDS`,
    :data:`LOSSY_PREFIXES`)."""
    return any(f in LOSSY_FIELDS or f.startswith(LOSSY_PREFIXES) for f in fields)


def accuracy_profile(cfg: GauntletConfig) -> str | None:
    """The labelled profile the screen runs, when the sweep runs it (``run.profiles``); else None."""
    profile = cfg.gates.accuracy.profile
    return profile if profile in cfg.run.profiles and profile in cfg.workloads else None


def requirement_name(profile: str) -> str:
    return profile if profile == SUFFIX else f"{profile} {SUFFIX}"


def accuracy_size(base: Sequence[Repeat], cand: Sequence[Repeat], gates: GatesConfig) -> float | None:
    """The accuracy requirement's violation size of the candidate's run(s) ``cand`` against the baseline's
    ``base`` (:mod:`gates.answer_accuracy`'s scoring: an item the baseline answered is scored, the
    candidate's unanswered one as wrong); None when it cannot be ruled on (no labelled set, fewer than
    ``gates.accuracy.min_items`` items the baseline answered)."""
    if not base or not cand:
        return None
    found = labelled_set([*base, *cand])
    if isinstance(found, str):
        return None
    items, _path = found
    size = len(items)
    c_side, b_side = score_side(cand, size), score_side(base, size)
    paired = [i for i in range(size) if i in b_side.answers]
    if len(paired) < gates.accuracy.min_items:
        return None
    right_c = {i: i in c_side.answers and correct(c_side.first(i).output_text, items[i]) for i in paired}
    right_b = {i: correct(b_side.first(i).output_text, items[i]) for i in paired}
    lost = sum(right_b[i] and not right_c[i] for i in paired)
    won = sum(right_c[i] and not right_b[i] for i in paired)
    rates = paired_drop(len(paired), lost, won, confidence=gates.confidence)
    beyond = rates.drop - gates.accuracy.tolerance
    if accuracy_status(rates, gates.accuracy.tolerance) == "fail":  # non-inferior only at its upper bound
        return round(rates.interval[1] - gates.accuracy.tolerance, 4)
    return min(0.0, round(beyond, 4))  # within the tolerance, or beyond it within noise: met at a screen


def probe_size(
    sweep_dir: Path, base_root: str, trial_root: str, profile: str, gates: GatesConfig
) -> float | None:
    """:func:`accuracy_size` of the trial's launch (``trial_root``, relative to ``sweep_dir``) against the
    baseline's (``base_root``) runs of ``profile``."""
    base = load_results(sweep_dir, base_root, "baseline").repeats(profile)
    cand = load_results(sweep_dir, trial_root, "trial").repeats(profile)
    return accuracy_size(base, cand, gates)
