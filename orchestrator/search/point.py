"""A point of a search's space as a candidate: one encoding, from which its three forms derive.

Pipeline position: the search's vocabulary, used by pruning (:mod:`.prune`), the run loop (:mod:`.loop`,
:mod:`.batch`) and the winner's file (:mod:`.rules`). A point is field -> value (dotted for nested fields,
``layout`` naming one of ``search.layouts``). :func:`encode` turns it, once, into what it changes in the
baseline's candidate file: the top-level fields it sets (a layout expanded to its fields, an integer field's
value as an ``int``), its speculative block (absent: the baseline's kept; None: off, the one rule of
:func:`speculative_off`; a dict: its fields merged onto the baseline's block) and its extra vLLM flags
(``extra_args.<flag>``: merged onto the baseline's ``extra_args``). Every form of a point is
that encoding written out: the typed candidate (:func:`as_candidate`, what pruning renders and the
tie-break counts), the Hydra overrides of the trial's job (:func:`as_overrides`) and the winner's candidate
file (:func:`as_file_fields`), so the three cannot disagree on what a point is. Pure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import asdict, replace
from typing import Any

from contracts.schema import CandidateConfig
from contracts.search import EXTRA_PREFIX, INTEGER_FIELDS, SPECULATIVE_OFF, Space
from orchestrator.config.space import override_text

#: A point of the space: field (dotted for nested ones) -> value.
Point = dict[str, Any]
#: A point encoded: candidate field -> value; ``speculative`` -> None (off) or the block's fields it sets.
Changes = dict[str, Any]
#: The candidate field that holds the speculative block, and the prefix of its fields in a point.
SPECULATIVE = "speculative"
_SPEC_PREFIX = f"{SPECULATIVE}."
#: The candidate field that holds further vLLM flags (a point's ``extra_args.<flag>``).
EXTRA = EXTRA_PREFIX.rstrip(".")


def speculative_off(point: Mapping[str, Any]) -> bool:
    """Whether ``point`` turns speculative decoding off (``speculative.method: off``): its block is then
    None, whatever else of the block the point sets.

    >>> speculative_off({"speculative.method": "off", "speculative.num_speculative_tokens": 3})
    True
    """
    return point.get(f"{_SPEC_PREFIX}method") == SPECULATIVE_OFF


def encode(
    point: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]], baseline: CandidateConfig
) -> Changes:
    """What ``point`` changes in ``baseline``'s candidate file, in the point's order.

    Raises ValueError when the point cannot be a candidate: an integer field given a fraction, or a point
    that turns speculative decoding on for a baseline that runs without it (a job's Hydra overrides
    cannot add a block the baseline's file sets to null: Hydra refuses to merge into it)."""
    changes: Changes = {}
    spec: dict[str, Any] = {}
    off = speculative_off(point)
    for field, value in point.items():
        if field == "layout":
            changes.update(layouts[str(value)])
        elif field.startswith(_SPEC_PREFIX):
            changes.setdefault(SPECULATIVE, None if off else spec)
            if not off:
                spec[field.removeprefix(_SPEC_PREFIX)] = _whole(field, value)
        elif field.startswith(EXTRA_PREFIX):
            changes.setdefault(EXTRA, {})[extra_key(baseline, field)] = value
        else:
            changes[field] = _whole(field, value)
    if spec and baseline.speculative is None:
        shown = ", ".join(f"{_SPEC_PREFIX}{k}={v}" for k, v in spec.items())
        raise ValueError(
            f"{shown}: the baseline runs without speculative decoding, and a trial's overrides cannot add a "
            f"speculative block to it (a point may change the baseline's block, or turn it off with "
            f"{_SPEC_PREFIX}method {SPECULATIVE_OFF}); measure speculative decoding as a candidate file"
        )
    return changes


def extra_key(baseline: CandidateConfig, field: str) -> str:
    """The ``extra_args`` key of a point's ``extra_args.<flag>``: the baseline's own key when it sets the
    flag (in either spelling: vLLM reads ``--block_size`` as ``--block-size``), else the flag's dashed
    spelling, as vLLM's ``--help`` and the simulator's parser write it.

    >>> base = CandidateConfig(name="b", extra_args={"enable_prefix_caching": True})
    >>> extra_key(base, "extra_args.enable-prefix-caching"), extra_key(base, "extra_args.block_size")
    ('enable_prefix_caching', 'block-size')
    """
    flag = field.removeprefix(EXTRA_PREFIX).replace("_", "-")
    return next((k for k in baseline.extra_args if k.replace("_", "-") == flag), flag)


def _whole(field: str, value: Any) -> Any:
    """An integer field's value as an ``int`` (64.0 is 64); a fraction there is no candidate."""
    if field not in INTEGER_FIELDS or not isinstance(value, float):
        return value
    if not value.is_integer():
        raise ValueError(f"{field} {value}: the field takes whole numbers")
    return int(value)


def as_candidate(
    baseline: CandidateConfig, changes: Changes, *, name: str, description: str
) -> CandidateConfig:
    """The encoded point as a typed candidate: ``baseline`` with the changes, named ``name``."""
    fields = dict(changes)
    block = fields.get(SPECULATIVE)
    if block is not None:
        assert baseline.speculative is not None  # encode refuses a block the baseline has not
        fields[SPECULATIVE] = replace(baseline.speculative, **block)
    if EXTRA in fields:
        fields[EXTRA] = {**baseline.extra_args, **fields[EXTRA]}
    return replace(baseline, name=name, description=description, **fields)


def as_overrides(changes: Changes, *, baseline_option: str, name: str) -> list[str]:
    """The encoded point as Hydra overrides of one job: the baseline's candidate file, renamed, with the
    changes (a speculative block field by field, merged onto the baseline's; off as null; an extra flag
    added to the baseline's ``extra_args``, or set there: ``++``)."""
    out = [f"candidate={baseline_option}", f"candidate.name={name}"]
    for field, value in changes.items():
        if field == EXTRA:
            out.extend(f"++candidate.{EXTRA}.{k}={override_text(v)}" for k, v in value.items())
        elif field != SPECULATIVE:
            out.append(f"candidate.{field}={override_text(value)}")
        elif value is None:
            out.append(f"candidate.{SPECULATIVE}=null")
        else:
            out.extend(f"candidate.{SPECULATIVE}.{k}={override_text(v)}" for k, v in value.items())
    return out


def as_file_fields(changes: Changes) -> dict[str, Any]:
    """The encoded point as a candidate file's fields over the baseline's (``defaults: [baseline,
    _self_]``: Hydra merges a speculative block and extra flags onto the baseline's, and null turns
    speculative decoding off)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in changes.items()}


def candidate_at(
    baseline: CandidateConfig, point: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]], name: str
) -> CandidateConfig:
    """The candidate a point stands for: ``baseline`` with the point's fields, named ``name``.

    Raises ValueError when the point cannot be a candidate (:func:`encode`)."""
    return as_candidate(baseline, encode(point, layouts, baseline), name=name, description=describe(point))


def point_overrides(
    point: Mapping[str, Any],
    layouts: Mapping[str, Mapping[str, Any]],
    baseline: CandidateConfig,
    *,
    baseline_option: str,
    name: str,
) -> list[str]:
    """The point as Hydra overrides of one job (what :func:`candidate_at` builds, composed by Hydra)."""
    return as_overrides(encode(point, layouts, baseline), baseline_option=baseline_option, name=name)


def describe(point: Mapping[str, Any]) -> str:
    return "search point: " + ", ".join(f"{k}={v}" for k, v in point.items())


def changed_fields(baseline: CandidateConfig, candidate: CandidateConfig) -> list[str]:
    """The candidate fields a point changes from the baseline (``speculative.*`` and ``extra_args.*`` one
    by one; name and description are not settings). A field the baseline leaves unset and the point sets
    counts as changed.

    >>> base = CandidateConfig(name="b", max_num_batched_tokens=16384)
    >>> changed_fields(base, replace(base, name="c", max_num_seqs=64, max_num_batched_tokens=16384))
    ['max_num_seqs']
    """

    def flat(c: CandidateConfig) -> dict[str, Any]:
        out = {k: v for k, v in asdict(c).items() if k not in ("name", "description", SPECULATIVE, EXTRA)}
        spec = asdict(c.speculative) if c.speculative is not None else {}
        out.update({f"{_SPEC_PREFIX}{k}": v for k, v in spec.items()})
        out.update({f"{EXTRA_PREFIX}{k}": v for k, v in c.extra_args.items()})
        return out

    before, after = flat(baseline), flat(candidate)
    return [k for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)]


def baseline_point(space: Space, baseline: CandidateConfig) -> Point | None:
    """The point of ``space`` that is ``baseline`` itself (its candidate changes none of the baseline's
    settings), or None when the baseline is not a point of the space (a value not among a field's, one
    outside an interval, a fixed field set otherwise).

    >>> from contracts.search import Dimension
    >>> space = Space((Dimension("max_num_seqs", (64, 128)),), layouts={}, fixed={})
    >>> baseline_point(space, CandidateConfig(name="b", max_num_seqs=128))
    {'max_num_seqs': 128}
    """
    point: Point = dict(space.fixed)
    for dim in space.dimensions:
        if dim.finite:
            options: tuple[Any, ...] = dim.values
        else:
            value, low, high = _setting(baseline, dim.name), dim.low, dim.high
            number = isinstance(value, int | float) and not isinstance(value, bool)
            inside = number and low is not None and high is not None and low <= value <= high
            options = (value,) if inside else ()
        same = [v for v in options if _unchanged(baseline, {dim.name: v}, space.layouts)]
        if not same:
            return None
        point[dim.name] = same[0]
    return point if _unchanged(baseline, point, space.layouts) else None


def _setting(baseline: CandidateConfig, field: str) -> Any:
    if field.startswith(_SPEC_PREFIX):
        block = baseline.speculative
        return None if block is None else getattr(block, field.removeprefix(_SPEC_PREFIX))
    if field.startswith(EXTRA_PREFIX):  # a flag the baseline leaves to vLLM's default is no point's value
        return baseline.extra_args.get(extra_key(baseline, field))
    return getattr(baseline, field, None)


def _unchanged(baseline: CandidateConfig, point: Point, layouts: Mapping[str, Mapping[str, Any]]) -> bool:
    try:
        return not changed_fields(baseline, candidate_at(baseline, point, layouts, baseline.name))
    except ValueError:
        return False


def grid(space: Space) -> Iterator[Point]:
    """Every point of a finite space, in declaration order (the fixed fields in each)."""
    names = [d.name for d in space.dimensions]
    for values in itertools.product(*(d.values for d in space.dimensions)):
        yield {**space.fixed, **dict(zip(names, values, strict=True))}
