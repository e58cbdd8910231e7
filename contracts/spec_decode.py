"""Speculative decoding as the server counted it over a run: the record and its acceptance arithmetic.

Pipeline position: a shared contract, pure. The load runner reduces ``/metrics`` scrapes to a
:class:`SpecDecodeMetrics` (deltas of vLLM 0.32's ``vllm:spec_decode_*`` counters over the measured
window, ``load.metrics``); it travels inside :class:`contracts.results.ServerMetrics` in each run's
summary; the report shows it beside the speculative candidates and the ``spec_acceptance`` gate compares
the candidate's acceptance with the baseline's::

    spec_decode_metrics(100.0, 300.0, 210.0, per_position=[90.0, 70.0, 50.0]).acceptance_per_position
    # [0.9, 0.7, 0.5]: accepted at draft position k over the drafts (vLLM's own per-position rate)
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict


class SpecDecodeMetrics(BaseModel):
    """Speculative decoding as the server counted it over the profile (deltas of vllm:spec_decode_*)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    drafts: float  # vllm:spec_decode_num_drafts_total
    draft_tokens: float  # vllm:spec_decode_num_draft_tokens_total
    accepted_tokens: float  # vllm:spec_decode_num_accepted_tokens_total
    acceptance_rate: float | None  # accepted / draft tokens (0-1); None without drafts
    mean_accepted_length: float | None  # 1 + accepted / drafts: tokens per target step; None without drafts
    # vllm:spec_decode_num_accepted_tokens_per_pos_total by its ``position`` label (0, 1, ...), summed over
    # engines; None where the server does not export it (and in older files).
    accepted_per_position: list[float] | None = None
    # Accepted at position k over the drafts (0-1): how far into a draft the target agrees; None as above.
    acceptance_per_position: list[float] | None = None


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def spec_decode_metrics(
    drafts: float | None,
    draft_tokens: float | None,
    accepted: float | None,
    *,
    per_position: Sequence[float] | None = None,
) -> SpecDecodeMetrics | None:
    """Acceptance rate (accepted / draft tokens), mean accepted length (1 + accepted / drafts, the tokens
    one target step yields, as vLLM's own log line counts it) and, where exported, each draft position's
    acceptance (accepted there / drafts, as vLLM's ``SpecDecodingLogging`` computes it); None when the
    three counters are not exported."""
    if drafts is None or draft_tokens is None or accepted is None:
        return None
    positions = list(per_position) if per_position else None
    per_pos_rate = (
        [r if (r := _share(a, drafts)) is not None else 0.0 for a in positions]
        if positions is not None and drafts > 0
        else None
    )
    return SpecDecodeMetrics(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        acceptance_rate=_share(accepted, draft_tokens),
        mean_accepted_length=1 + accepted / drafts if drafts > 0 else None,
        accepted_per_position=positions,
        acceptance_per_position=per_pos_rate,
    )
