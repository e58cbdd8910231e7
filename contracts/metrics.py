"""The metrics vocabulary: what a figure is, how it is reduced and how it is printed, in one place.

Pipeline position: the bottom layer, next to the records it reads. The load runner's summaries, the
gates, the judge's key figures, the report and the benchmarks all speak it, so a median, a ratio or a
"reversal" means the same thing in every file a sweep writes. Pure functions, no I/O:

- extractors: one latency of a :class:`~contracts.results.RequestRecord`, right-censored (+inf) when it
  never arrived (:func:`ttft_value`, :func:`e2e_value`, :func:`visible_value`);
- reductions: :func:`percentile`, :func:`stats`, :func:`median` (missing values count as +inf),
  :func:`censored_median` (the summary record), :func:`mean`, :func:`geometric_mean`, :func:`ratio`;
- noise and severity: :func:`excludes_one`, :func:`beyond_noise`, :func:`severity`, :func:`by_severity`;
- the one definition of a reversal: :func:`find_reversal`;
- formatting: :func:`fmt_value`, :func:`fmt_ratio`, :func:`fmt_bounds`, :func:`fmt_factor`,
  :func:`fmt_repeats`, :func:`fmt_capacity` (and :func:`capacity_bound`), :func:`fmt_estimate`.

    >>> fmt_value(median([4.1, None, 3.9]), "s"), fmt_ratio(0.1192)
    ('4.10 s', '0.119x')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from contracts.results import CapacityResult, CensoredMedian, RequestRecord, Stats
from contracts.schema import SloConfig
from contracts.verdicts import Comparison, KeyFigure, Reversal

Better = Literal["lower", "higher"]
Side = Literal["below", "above"]

_TINY = 1e-12  # ratios are clipped here before taking logs

# ----------------------------------------------------------------------------------------- extractors


def ttft_value(record: RequestRecord) -> float:
    """Time to first token; a request that never got one is right-censored (+inf)."""
    return math.inf if record.ttft_s is None else record.ttft_s


def e2e_value(record: RequestRecord) -> float:
    """Request latency; a failed request is right-censored (+inf)."""
    return record.end_s if record.ok and record.end_s is not None else math.inf


def visible_value(record: RequestRecord) -> float:
    """Time to first visible answer; a request that showed none is right-censored (+inf)."""
    return math.inf if record.first_visible_s is None else record.first_visible_s


# ----------------------------------------------------------------------------------------- reductions


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between order statistics (numpy's default); None for none.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0-100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def stats(values: Sequence[float]) -> Stats:
    """n, mean, p50/p90/p99, min and max of a sample (all None when it is empty)."""
    if not values:
        return Stats(n=0, mean=None, p50=None, p90=None, p99=None)
    return Stats(
        n=len(values),
        mean=math.fsum(values) / len(values),
        p50=percentile(values, 50),
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        min=min(values),
        max=max(values),
    )


def median(values: Sequence[float | None]) -> float | None:
    """The median, where a missing value (None) or +inf is right-censored; None when there are none.

    Sorted with the censored values last: the middle value, or the mean of the two middle values for
    an even count; +inf as soon as a middle position is censored.

    >>> median([43.95, 12.0, None, 80.1, 30.2])
    43.95
    >>> median([1.0, 2.0, None, None])
    inf
    """
    if not values:
        return None
    ordered = sorted(math.inf if v is None else float(v) for v in values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    low, high = ordered[n // 2 - 1], ordered[n // 2]
    return math.inf if math.isinf(high) else (low + high) / 2


def censored_median(values: Sequence[float | None]) -> CensoredMedian:
    """:func:`median` as the summary record: how many values, how many censored, finite or not.

    >>> censored_median([1.0, None, 3.0]).value_s
    3.0
    """
    value = median(values)
    infinite = value is not None and math.isinf(value)
    return CensoredMedian(
        n=len(values),
        censored=sum(v is None or math.isinf(v) for v in values),
        value_s=None if infinite else value,
        infinite=infinite,
    )


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean; None for no values."""
    return sum(values) / len(values) if values else None


def geometric_mean(values: Sequence[float]) -> float | None:
    """The geometric mean (values clipped at 1e-12); +inf when one is infinite; None for no values."""
    if not values:
        return None
    if any(math.isinf(v) for v in values):
        return math.inf
    return math.exp(sum(math.log(max(v, _TINY)) for v in values) / len(values))


def ratio(value: float | None, base: float | None) -> float | None:
    """candidate / baseline; None when either is missing or the baseline is 0 or infinite."""
    if value is None or base is None or base == 0 or math.isinf(base):
        return None
    return value / base


# ------------------------------------------------------------------------------------ noise, severity


def excludes_one(interval: tuple[float, float] | None, side: Side) -> bool:
    """The interval of a ratio lies entirely below (or above) 1: "no change" is excluded on that side."""
    if interval is None:
        return False
    low, high = interval
    return high < 1 if side == "below" else low > 1


def beyond_noise(
    value: float | None,
    interval: tuple[float, float] | None,
    better: Better,
    *,
    worse: bool,
    tolerance: float,
) -> bool:
    """The ratio ``value`` is worse (or better) than the baseline beyond noise.

    With an interval: it excludes 1 on that side. Without one (a figure no gate compared): the ratio is
    beyond ``tolerance``.

    >>> beyond_noise(0.12, (0.11, 0.13), "higher", worse=True, tolerance=0.05)
    True
    """
    if value is None:
        return False
    up = (better == "lower") == worse  # a ratio above 1 is what ``worse`` (or better) means
    if interval is not None:
        return excludes_one(interval, "above" if up else "below")
    return value > 1 + tolerance if up else value < 1 - tolerance


def severity(value: float | None) -> float:
    """How far a ratio is from 1 on the log scale: 0 without a ratio, +inf for 0 or +inf."""
    if value is None:
        return 0.0
    if value <= 0 or math.isinf(value):
        return math.inf
    return abs(math.log(value))


#: On equal severity: output tokens/s first, then median TTFT, then prompt tokens/s, then the rest.
METRIC_PRIORITY = {"output_tps": 0, "ttft_p50": 1, "prompt_tps": 2}


def by_severity(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The comparisons, most severe first (severity to 2 decimals, then :data:`METRIC_PRIORITY`)."""
    last = len(METRIC_PRIORITY)
    return sorted(
        comparisons,
        key=lambda c: (round(severity(c.ratio), 2), -METRIC_PRIORITY.get(c.metric, last)),
        reverse=True,
    )


# ------------------------------------------------------------------------------------------- reversal


def find_reversal(
    candidate: str,
    figures: Sequence[KeyFigure],
    *,
    serial_profile: str,
    loaded_profiles: Sequence[str],
    min_gain: float,
    tolerance: float,
) -> Reversal | None:
    """Serial latency and the loaded figures rank the candidate on opposite sides of the baseline.

    The serial side: the serial e2e p50 is better (or worse) beyond noise. The loaded side: for some
    loaded profile, output tokens/s or median TTFT points the other way beyond noise. "Beyond noise" is
    :func:`beyond_noise` (the interval excludes 1; without an interval, ``min_gain`` for a faster
    serial latency and ``tolerance`` otherwise). The profile with the strongest opposite effect is
    named. This is the only definition: the judge writes it into ``verdicts.json``, the report shows it.
    """
    by_key = {(f.metric, f.profile): f for f in figures}
    serial = by_key.get(("serial_e2e_p50", serial_profile))
    if serial is None or serial.ratio is None or serial.value is None or serial.baseline is None:
        return None
    faster = beyond_noise(serial.ratio, serial.interval, serial.better, worse=False, tolerance=min_gain)
    slower = beyond_noise(serial.ratio, serial.interval, serial.better, worse=True, tolerance=tolerance)
    if not (faster or slower):
        return None
    best: tuple[float, str, KeyFigure | None, KeyFigure | None] | None = None
    for profile in loaded_profiles:
        out, ttft = by_key.get(("output_tps", profile)), by_key.get(("ttft_p50", profile))
        opposite = [
            f
            for f in (out, ttft)
            if f is not None
            and beyond_noise(f.ratio, f.interval, f.better, worse=faster, tolerance=tolerance)
        ]
        if not opposite:
            continue
        strength = max(severity(f.ratio) for f in opposite)  # the strongest opposite effect
        if best is None or strength > best[0]:
            best = (strength, profile, out, ttft)
    if best is None:
        return None
    _, profile, out, ttft = best
    return Reversal(
        candidate=candidate,
        direction="faster" if faster else "slower",
        serial_ratio=serial.ratio,
        loaded_profile=profile,
        output_ratio=out.ratio if out else None,
        ttft_ratio=ttft.ratio if ttft else None,
    )


# ----------------------------------------------------------------------------------------- formatting


def fmt_value(value: float | None, unit: str) -> str:
    """A figure in its unit: ``0.347 s``, ``22.45 s``, ``1,234 s``, ``10,039 tok/s``, ``55.2 tok/s``.

    >>> fmt_value(None, "s"), fmt_value(math.inf, "s"), fmt_value(4.1, "s"), fmt_value(3.0, "answers")
    ('n/a', 'inf (censored)', '4.10 s', '3 answers')
    """
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf (censored)" if unit == "s" else "inf"
    if unit == "tok/s":
        return f"{value:,.0f} tok/s" if value >= 100 else f"{value:,.1f} tok/s"
    if unit == "s":
        if value < 1:
            return f"{value:.3f} s"
        return f"{value:.2f} s" if value < 100 else f"{value:,.0f} s"
    return f"{value:g} {unit}" if unit else f"{value:g}"


def fmt_ratio(value: float | None) -> str:
    """A ratio candidate / baseline: ``0.119x``, ``1.000x``, ``8.39x``, ``64.7x``, ``0.0523x``, ``inf``."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf"
    if value >= 10:
        return f"{value:.1f}x"
    if value >= 0.1:
        return f"{value:.3f}x" if value < 1.2 else f"{value:.2f}x"
    return f"{value:.3g}x"


def fmt_bounds(interval: tuple[float, float] | None) -> str:
    """The interval of a ratio after it, compact: `` [0.114x-0.124x]``, `` [unbounded]`` or nothing."""
    if interval is None:
        return ""
    low, high = interval
    if low <= 0 or math.isinf(high):
        return " [unbounded]"
    return f" [{fmt_ratio(low)}-{fmt_ratio(high)}]"


def fmt_factor(value: float) -> str:
    """How many times more or less, in words: ``8.4`` (from 1.95 on), ``1.32``, ``inf``."""
    if math.isinf(value):
        return "inf"
    return f"{value:.1f}" if value >= 1.95 else f"{value:.2f}"


def fmt_repeats(values: Sequence[float], unit: str) -> str:
    """Per-repeat values, the unit once: ``0.894/0.632/0.539 s``."""
    if not values:
        return "n/a"
    text = "/".join(fmt_value(v, unit).removesuffix(f" {unit}") for v in values)
    return f"{text} {unit}" if unit else text


def fmt_capacity(capacity: float | None, high: float | None, unit: str, lowest: float | None = None) -> str:
    """A capacity as the search measured it, never beyond a level it ran: ``128 concurrent [128, 152)``
    (held at 128, failed at 152); ``≥ 16 concurrent`` where the SLO held at every level tried (16 the
    highest); ``< 2 concurrent`` where it held at none (``lowest``: the lowest level tried).

    >>> fmt_capacity(128, 152, "concurrent"), fmt_capacity(16, None, "concurrent")
    ('128 concurrent [128, 152)', '≥ 16 concurrent')
    >>> fmt_capacity(None, 2, "req/s", lowest=2), fmt_capacity(None, None, "req/s")
    ('< 2 req/s', 'held the SLO at no level tried')
    """
    if capacity is None:
        return "held the SLO at no level tried" if lowest is None else f"< {lowest:g} {unit}"
    if high is None:
        return f"≥ {capacity:g} {unit}"
    return f"{capacity:g} {unit} [{capacity:g}, {high:g})"


def fmt_estimate(values: Sequence[float] | None, *, at_least: bool = False) -> str:
    """A search's objective values: ``216, 0.42``; the first a floor where the capacity search held the SLO
    at every level it tried: ``≥ 16, 0.42`` (a ceiling is never printed as an estimate); ``-`` for none.

    >>> fmt_estimate([16.0, 0.4213], at_least=True), fmt_estimate(None)
    ('≥ 16, 0.4213', '-')
    """
    parts = [f"{v:.4g}" for v in values or []]
    if parts and at_least:
        parts[0] = f"≥ {parts[0]}"
    return ", ".join(parts) or "-"


def capacity_bound(cands: Sequence[CapacityResult], bases: Sequence[CapacityResult]) -> str:
    """How a capacity ratio from these searches (each side's launches) bounds the true one: ``""`` an
    estimate; ``"≥"`` a floor (a candidate's search held the SLO at every level it tried, or a
    baseline's at none); ``"≤"`` a ceiling (the reverse); ``"?"`` both: no bound either way."""
    floor = any(r.low is not None and r.high is None for r in cands) or any(r.low is None for r in bases)
    ceiling = any(r.low is None for r in cands) or any(r.low is not None and r.high is None for r in bases)
    return "?" if floor and ceiling else "≥" if floor else "≤" if ceiling else ""


#: The latencies an SLO bounds, with their field in :class:`contracts.schema.SloConfig` and their label.
SLO_FIELDS: dict[str, tuple[str, str]] = {
    "ttft": ("ttft_s", "TTFT"),
    "tpot": ("tpot_s", "TPOT"),
    "first_visible": ("first_visible_s", "first visible answer"),
    "e2e": ("e2e_s", "e2e"),
}


def slo_text(slo: SloConfig) -> str:
    """The SLO in words, as every report and log line says it.

    >>> slo_text(SloConfig(ttft_s=2.0, tpot_s=0.1))
    'TTFT p99 <= 2 s, TPOT p99 <= 100 ms'
    """
    parts = []
    for attr, label in SLO_FIELDS.values():
        value = getattr(slo, attr)
        if value is None:
            continue
        shown = f"{value * 1e3:g} ms" if attr == "tpot_s" or value < 1 else f"{value:g} s"
        parts.append(f"{label} p{slo.percentile:g} <= {shown}")
    return ", ".join(parts) if parts else "no threshold set"
