"""Truncated answers on the labelled profile: a finding, not a wrong answer the candidate gave.

Pipeline position: the ``answer_accuracy`` gate (:mod:`gates.answer_accuracy`) counts, per side, the
finished requests of its labelled profile that ended at ``max_tokens`` (``finish_reason == "length"``).
A truncated answer has no final line to score (a reasoning model cut in its reasoning has no visible
answer at all), so it reads as wrong; above ``gates.accuracy.max_truncated`` of a side's answers the
comparison measures the output budget, not the candidate, and the gate does not judge it: ``not_run``
(the verdict is INCOMPLETE), naming the profile and advising a larger ``max_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.sweepdir import Repeat
from contracts.verdicts import Evidence


@dataclass(frozen=True)
class Truncation:
    """One side's finished answers on the labelled profile and those cut at ``max_tokens``."""

    side: str  # candidate, baseline
    finished: int  # requests that finished (any finish_reason), every repeat
    truncated: int  # of them, finish_reason == "length"
    max_tokens: int | None  # the largest max_tokens a truncated request was sent with
    evidence: tuple[Evidence, ...] = ()  # the truncated requests, by records file

    @property
    def share(self) -> float:
        return self.truncated / self.finished if self.finished else 0.0

    def over(self, limit: float) -> bool:
        """More than ``limit`` of the finished answers truncated."""
        return self.truncated > 0 and self.share > limit


def count_truncated(side: str, repeats: Sequence[Repeat]) -> Truncation:
    """The finished requests of ``repeats`` and those that ended at ``max_tokens``."""
    finished = truncated = 0
    budget: int | None = None
    by_file: dict[str, list[int]] = {}
    for rep in repeats:
        for record in rep.records:
            if not record.ok:
                continue
            finished += 1
            if record.finish_reason == "length":
                truncated += 1
                budget = max(budget or 0, record.target_output_tokens)
                by_file.setdefault(rep.records_file, []).append(record.index)
    evidence = tuple(Evidence(file=f, requests=sorted(r)) for f, r in by_file.items())
    return Truncation(side, finished, truncated, budget, evidence)


def counts_words(sides: Sequence[Truncation]) -> str:
    """``answers cut at max_tokens (finish_reason length): candidate 0 of 300, baseline 2 of 600 (0.3%)``."""
    parts = [
        f"{t.side} {t.truncated} of {t.finished}" + (f" ({t.share:.1%})" if t.truncated else "")
        for t in sides
    ]
    return f"answers cut at max_tokens (finish_reason length): {', '.join(parts)}"


def truncation_finding(sides: Sequence[Truncation], profile: str, limit: float) -> str | None:
    """Why the comparison is incomplete when a side's truncated share is above ``limit``, with the advice;
    None when no side is."""
    over = [t for t in sides if t.over(limit)]
    if not over:
        return None
    said = "; ".join(
        f"the {t.side}'s answers on profile {profile!r}: {t.truncated} of {t.finished} ({t.share:.1%}) "
        f"cut at max_tokens {t.max_tokens}"
        for t in over
    )
    return (
        f"{said}, above gates.accuracy.max_truncated = {limit:g}: a truncated answer has no final line and "
        f"reads as wrong, so the comparison measures the output budget, not the candidate; raise the "
        f"profile's max_tokens (workloads.{profile}.output_tokens) so its answers fit, a reasoning model's "
        "reasoning included, or raise gates.accuracy.max_truncated"
    )
