"""Records to figures, and the client's judgement of itself, as tables."""

from __future__ import annotations

import pytest

from load.sse import StreamOutcome
from load.summary import client_health, make_record, summarize
from tests.unit.load_fixtures import record


def test_make_record_scales_wall_to_host_seconds() -> None:
    outcome = StreamOutcome(
        first_token_ns=1_500_000_000,
        first_visible_ns=2_000_000_000,
        token_chunk_ns=[1_500_000_000, 2_000_000_000],
        last_byte_ns=2_500_000_000,
        finish_reason="stop",
    )
    got = make_record(
        index=0,
        warmup=False,
        target_prompt_tokens=1,
        target_output_tokens=1,
        t0_ns=0,
        scheduled_ns=500_000_000,
        sent_ns=1_000_000_000,
        outcome=outcome,
        http_status=200,
        time_scale=10.0,
    )
    assert (got.scheduled_s, got.sent_s, got.ttft_s, got.first_visible_s, got.end_s) == (
        5.0,
        10.0,
        5.0,
        10.0,
        15.0,
    )
    assert got.chunk_offsets_s == [5.0, 10.0]


def test_summarize_counts_rates_and_percentiles() -> None:
    records = [
        record(0, warmup=True, completion_tokens=999),
        record(1),
        record(2),
        record(3, first_visible_s=None, finish_reason="length"),
        record(
            4,
            error="http_5xx",
            ttft_s=None,
            first_visible_s=None,
            end_s=None,
            chunk_offsets_s=[],
            prompt_tokens=None,
            completion_tokens=None,
            finish_reason=None,
        ),
    ]
    got = summarize(records, planned=4)
    assert (got.num_requests, got.completed, got.failed, got.errors) == (4, 3, 1, {"http_5xx": 1})
    assert (got.prompt_tokens, got.output_tokens) == (300, 30)
    assert got.duration_s == pytest.approx(3.0)  # first send at 1 s, last end at 3 + 1 s
    assert got.output_tps == pytest.approx(10.0)
    assert got.itl.n == 9 and got.itl.p50 == pytest.approx(0.2)
    assert got.first_visible.n == 2
    assert (got.first_visible_censored.censored, got.first_visible_censored.infinite) == (2, True)


def test_summarize_notes_unsent_requests_and_prompt_misses() -> None:
    got = summarize([record(1, prompt_tokens=120)], planned=3)
    assert got.prompt_mismatches == 1
    assert any("1 of 3 planned" in n for n in got.notes)
    assert any("aimed at 100, the server counted 120" in n for n in got.notes)


@pytest.mark.parametrize(
    ("lags", "per_read", "cpu", "saturated", "note"),
    [
        ([0.0, 0.001], [1, 1], 10.0, False, None),
        ([0.0, 0.001], [1, 1], 95.0, True, "of a core"),
        ([0.0, 0.1], [1, 1], 10.0, True, "late"),
        ([0.0, 0.008], [1, 1], 10.0, False, "late"),
        ([0.0, 0.001], [1, 3, 3], 70.0, True, "under-reported"),
        ([0.0, 0.001], [1, 3, 3], 10.0, False, "server batching"),
    ],
)
def test_client_health(
    lags: list[float], per_read: list[int], cpu: float, saturated: bool, note: str | None
) -> None:
    records = [record(i, scheduled_s=0.0, sent_s=lag) for i, lag in enumerate(lags)]
    got = client_health(
        records, chunks_per_read=per_read, cpu_seconds=cpu / 100, wall_seconds=1.0, time_scale=1.0
    )
    assert got.saturated is saturated
    assert (note is None and not got.notes) or any(note in n for n in got.notes if note)
