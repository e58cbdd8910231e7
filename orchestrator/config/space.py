"""A search's space (conf/search/): Hydra's sweep syntax parsed into a :class:`~contracts.search.Space`.

Pipeline position: beside the composer, at the bottom of the sweep (the Hydra boundary: the only Hydra
import of the search). ``search.space`` holds expressions in the syntax Hydra users know from its
sweepers, ``choice(a,b)``, ``range(start,stop,step)``, ``interval(low,high)``,
``tag(log,interval(low,high))``, parsed by Hydra's own override grammar (:func:`parse_space`);
:func:`override_text` writes a value back in that grammar (a trial's overrides). What a point of the space
is as a candidate, and what of the space cannot start, is the search's own wing: :mod:`orchestrator.search`
(``point``, ``prune``). Pure over its inputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from hydra.errors import HydraException

from contracts.errors import ConfigError, ConfigProblem
from contracts.search import (
    EXTRA_PREFIX,
    INTEGER_FIELDS,
    LAYOUT_FIELDS,
    SEARCH_FIELDS,
    Dimension,
    SearchConfig,
    Space,
)

#: A vLLM flag's name as ``extra_args.<flag>`` spells it (without ``--``).
_FLAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def _flatten(space: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in space.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def override_text(value: Any) -> str:
    """A value as Hydra's override grammar reads it back (a YAML boolean as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_search_field(name: str) -> bool:
    """Whether a space may vary ``name``: a field of ``SEARCH_FIELDS``, or ``extra_args.<flag>``.

    >>> [is_search_field(n) for n in ("max_num_seqs", "extra_args.block_size", "extra_args.", "block_size")]
    [True, True, False, False]
    """
    flag = name.removeprefix(EXTRA_PREFIX)
    return name in SEARCH_FIELDS or (flag != name and _FLAG_NAME.fullmatch(flag) is not None)


def parse_space(search: SearchConfig, *, where: str = "<search>") -> Space:
    """``search.space`` as a :class:`Space`; every problem (unknown field, bad expression, unknown layout,
    empty space) in one :class:`ConfigError` naming the file, the field, the value and what is allowed."""
    parser = OverridesParser.create()
    problems: list[ConfigProblem] = []
    dims: list[Dimension] = []
    fixed: dict[str, Any] = {}
    allowed = f"one of {', '.join(SEARCH_FIELDS)}, or {EXTRA_PREFIX}<flag> for any other vLLM flag"
    for name, raw in _flatten(search.space):
        field = f"search.space.{name}"
        if not is_search_field(name):
            problems.append(ConfigProblem(where, field, raw, f"a candidate field a search varies: {allowed}"))
            continue
        try:
            value = parser.parse_override(f"{name}={override_text(raw)}").value()
        except HydraException as exc:
            why = str(exc).splitlines()[0]
            problems.append(
                ConfigProblem(
                    where,
                    field,
                    raw,
                    f"Hydra's sweep syntax: choice(a,b,...), range(start,stop,step), interval(low,high), "
                    f"tag(log,interval(low,high)), or a value ({why})",
                )
            )
            continue
        if isinstance(value, ChoiceSweep):
            values = tuple(value.list)
        elif isinstance(value, RangeSweep):
            if value.start is None or value.stop is None:
                problems.append(ConfigProblem(where, field, raw, "range(start,stop[,step]) with both ends"))
                continue
            step = value.step if value.step is not None else 1
            values = tuple(_range(value.start, value.stop, step))
        elif isinstance(value, IntervalSweep):
            if value.start is None or value.end is None:
                problems.append(ConfigProblem(where, field, raw, "interval(low,high) with both ends"))
                continue
            low, high = float(value.start), float(value.end)
            log = "log" in value.tags
            # an extra flag's type is its own: int(interval(a,b)) (Hydra keeps its bounds whole) is integers
            cast = name.startswith(EXTRA_PREFIX) and all(type(v) is int for v in (value.start, value.end))
            whole = name in INTEGER_FIELDS or cast
            if not low < high or (log and low <= 0):
                problems.append(
                    ConfigProblem(where, field, raw, "interval(low,high), low < high (low > 0 with log)")
                )
                continue
            if whole and math.ceil(low) > math.floor(high):
                problems.append(
                    ConfigProblem(
                        where, field, raw, f"an interval holding a whole number ({name} takes integers)"
                    )
                )
                continue
            dims.append(Dimension(name, low=low, high=high, log=log, integer=whole))
            continue
        else:
            fixed[name] = value
            continue
        if not values:
            problems.append(ConfigProblem(where, field, raw, "at least one value"))
            continue
        dims.append(Dimension(name, values=values))
    for dim in dims:
        if dim.name == "layout":
            for value in dim.values:
                if str(value) not in search.layouts:
                    known = ", ".join(sorted(search.layouts)) or "none defined"
                    problems.append(
                        ConfigProblem(
                            where, "search.space.layout", value, f"a layout of search.layouts: {known}"
                        )
                    )
    for name, layout in search.layouts.items():
        for key in layout:
            if key not in LAYOUT_FIELDS:
                problems.append(
                    ConfigProblem(where, f"search.layouts.{name}.{key}", layout[key], f"{LAYOUT_FIELDS}")
                )
    if not dims and not problems:
        problems.append(
            ConfigProblem(where, "search.space", dict(search.space), "at least one choice, range or interval")
        )
    if problems:
        raise ConfigError(problems)
    return Space(dimensions=tuple(dims), layouts=dict(search.layouts), fixed=fixed)


def _range(start: float, stop: float, step: float) -> Iterator[float | int]:
    """Hydra's range: Python's for integers (stop excluded), the same rule for floats."""
    if all(isinstance(v, int) for v in (start, stop, step)):
        yield from range(int(start), int(stop), int(step))
        return
    count = max(0, math.ceil((stop - start) / step - 1e-9))  # 0.3 / 0.1 is 3.0000000000000004
    for k in range(count):
        yield round(start + k * step, 12)
