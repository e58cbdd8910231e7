"""Significance across a family of comparisons, and rates compared: Bonferroni, Holm, Fisher's exact test.

Pipeline position: pure functions the gate modules call after :mod:`gates.stats` has estimated each
comparison. :func:`bonferroni` splits a family-wise confidence over the comparisons of a gate (latency
gain, drift), :func:`holm` tests a family of one-sided p-values step-down (the concurrency requirement;
the p-values come from :func:`gates.stats.one_sided_p`), and :func:`compare_rates` compares two rates of
successes (visible answers) by Fisher's exact test and the Beta-binomial posterior of their difference;
:func:`clopper_pearson` is a rate's exact interval and :func:`mcnemar` compares two rates on the same items
(a labelled set's accuracy) by McNemar's exact test on the discordant pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def bonferroni(confidence: float, comparisons: int) -> float:
    """Per-comparison confidence that keeps the family-wise level at ``confidence``."""
    return 1 - (1 - confidence) / max(comparisons, 1)


def holm(p_values: Sequence[float], alpha: float) -> list[tuple[bool, float]]:
    """Holm's step-down procedure: for each p-value, (rejected, the level it was tested at).

    The k-th smallest p-value (k from 0) is tested at ``alpha / (m - k)``; testing stops at the first
    one not rejected, and every later one is kept. The family-wise error rate is at most ``alpha``
    under any dependence between the tests.

    >>> [(r, round(a, 4)) for r, a in holm([0.001, 0.06, 0.012], 0.05)]
    [(True, 0.0167), (False, 0.05), (True, 0.025)]
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out: list[tuple[bool, float]] = [(False, alpha)] * m
    stopped = False
    for k, i in enumerate(order):
        level = alpha / (m - k)
        stopped = stopped or p_values[i] > level
        out[i] = (not stopped, level)
    return out


@dataclass(frozen=True)
class RateComparison:
    """A candidate's rate of successes (e.g. visible answers) against the baseline's, with its statistics."""

    candidate: tuple[int, int]  # (successes, trials)
    baseline: tuple[int, int]
    p_value: float  # Fisher's exact test, one-sided: the candidate's rate is lower
    posterior_lower: float  # P(candidate's rate < baseline's | data), uniform Beta(1, 1) priors
    difference: tuple[float, float]  # central credible interval of candidate rate - baseline rate
    confidence: float

    @property
    def lost(self) -> bool:
        """The candidate's observed rate is below the baseline's (a point statement, no noise)."""
        (c, n), (b, m) = self.candidate, self.baseline
        return c * m < b * n


def compare_rates(
    candidate: tuple[int, int],
    baseline: tuple[int, int],
    *,
    confidence: float,
    draws: int = 20_000,
    seed: int = 0,
) -> RateComparison:
    """Fisher's exact test (one-sided: fewer successes) and the Beta-binomial posterior of the difference.

    Each side's rate gets a uniform Beta(1, 1) prior, so its posterior is Beta(1 + k, 1 + n - k); the
    probability that the candidate's rate is lower and the credible interval of the difference are
    Monte Carlo estimates over ``draws`` seeded draws.

    >>> r = compare_rates((3, 5), (4, 5), confidence=0.95)
    >>> round(r.p_value, 2), r.lost, r.difference[0] < 0 < r.difference[1]
    (0.5, True, True)
    """
    from scipy.stats import fisher_exact  # noqa: PLC0415  (scipy on first use)

    (c, n), (b, m) = candidate, baseline
    if n <= 0 or m <= 0:
        raise ValueError("compare_rates needs at least one trial on each side")
    table = [[c, n - c], [b, m - b]]
    p_value = float(fisher_exact(table, alternative="less")[1])
    rng = np.random.default_rng(seed)
    pc = rng.beta(1 + c, 1 + n - c, draws)
    pb = rng.beta(1 + b, 1 + m - b, draws)
    diff = pc - pb
    alpha = 1 - confidence
    low, high = np.quantile(diff, [alpha / 2, 1 - alpha / 2])
    return RateComparison(
        candidate=candidate,
        baseline=baseline,
        p_value=min(1.0, p_value),
        posterior_lower=float((diff < 0).mean()),
        difference=(float(low), float(high)),
        confidence=confidence,
    )


def clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial rate.

    >>> [round(x, 3) for x in clopper_pearson(18, 20, 0.95)]
    [0.683, 0.988]
    """
    from scipy.stats import binomtest  # noqa: PLC0415  (scipy on first use)

    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(
            f"clopper_pearson needs 0 <= successes <= trials and trials >= 1: {successes}/{trials}"
        )
    ci = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class PairedRates:
    """Two rates on the same items (each right or wrong on each side), compared by McNemar's exact test."""

    items: int  # items scored on both sides
    baseline_only: int  # right for the baseline, wrong for the candidate (discordant, against the candidate)
    candidate_only: int  # right for the candidate, wrong for the baseline
    p_value: float  # McNemar's exact test, one-sided: the candidate is right less often
    #: The drop (baseline's rate - candidate's), with its interval at the confidence: exact conditional on
    #: the discordant pairs (Clopper-Pearson on the share of them against the candidate)
    drop: float
    drop_interval: tuple[float, float]
    confidence: float


def mcnemar(items: int, baseline_only: int, candidate_only: int, *, confidence: float) -> PairedRates:
    """McNemar's exact test on the discordant pairs (a binomial test of ``baseline_only`` of them at 1/2,
    one-sided) and the drop's interval: conditional on the ``m`` discordant pairs, the drop is
    ``m / items * (2 theta - 1)``, theta the share of them against the candidate, whose Clopper-Pearson
    interval gives the drop's. The drop's lower bound is above 0 exactly when the one-sided p-value is
    below ``(1 - confidence) / 2``.

    >>> r = mcnemar(40, 6, 0, confidence=0.95)
    >>> round(r.p_value, 4), round(r.drop, 3), r.drop_interval[0] > 0
    (0.0156, 0.15, True)
    """
    from scipy.stats import binomtest  # noqa: PLC0415  (scipy on first use)

    discordant = baseline_only + candidate_only
    if items <= 0 or baseline_only < 0 or candidate_only < 0 or discordant > items:
        raise ValueError(
            f"mcnemar needs 0 <= discordant pairs <= items >= 1: {baseline_only}+{candidate_only}/{items}"
        )
    if discordant == 0:
        return PairedRates(items, 0, 0, 1.0, 0.0, (0.0, 0.0), confidence)
    p_value = float(binomtest(baseline_only, discordant, 0.5, alternative="greater").pvalue)
    low, high = clopper_pearson(baseline_only, discordant, confidence)
    share = discordant / items
    return PairedRates(
        items=items,
        baseline_only=baseline_only,
        candidate_only=candidate_only,
        p_value=min(1.0, p_value),
        drop=(baseline_only - candidate_only) / items,
        drop_interval=(share * (2 * low - 1), share * (2 * high - 1)),
        confidence=confidence,
    )
