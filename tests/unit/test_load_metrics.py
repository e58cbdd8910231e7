"""/metrics scrapes: parse over engines, deltas, restarts and the client/server token cross-check."""

from __future__ import annotations

import pytest

from load.metrics import (
    GENERATION_TOKENS,
    KV_USAGE,
    PROMPT_TOKENS,
    WAITING,
    counter_delta,
    filter_scrape,
    parse_scrape,
    server_metrics,
)


def scrape_text(
    prompt: float,
    generation: float,
    *,
    waiting: float = 0,
    kv: tuple[float, float] = (0.1, 0.2),
    stop: float = 0,
) -> str:
    """A vLLM-like scrape of two data-parallel engines (each carries half of every counter)."""
    lines = ["# HELP vllm:num_requests_waiting Waiting.", "# TYPE vllm:num_requests_waiting gauge"]
    for engine in ("0", "1"):
        labels = f'engine="{engine}",model_name="m"'
        lines += [
            f"vllm:num_requests_waiting{{{labels}}} {waiting / 2}",
            f"vllm:num_requests_running{{{labels}}} 4.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} {kv[int(engine)]}",
            f"vllm:num_preemptions_total{{{labels}}} 0.0",
            f"vllm:prompt_tokens_total{{{labels}}} {prompt / 2}",
            f"vllm:generation_tokens_total{{{labels}}} {generation / 2}",
            f'vllm:request_success_total{{{labels},finished_reason="length"}} {stop / 2}',
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.1"}} 3.0',
        ]
    return "\n".join(lines) + "\n"


def test_parse_sums_engines_and_takes_the_fullest_kv_cache() -> None:
    scrape = parse_scrape(filter_scrape(scrape_text(100, 50, waiting=6, stop=2)), t_s=1.0, phase="during")
    assert scrape.counters[PROMPT_TOKENS] == 100
    assert scrape.counters[GENERATION_TOKENS] == 50
    assert scrape.gauges[WAITING] == 6
    assert scrape.gauges[KV_USAGE] == 0.2
    assert scrape.request_success == {"length": 2}


def test_filter_drops_histograms() -> None:
    text = filter_scrape(scrape_text(1, 1))
    assert "time_to_first_token" not in text and "prompt_tokens_total" in text


@pytest.mark.parametrize(
    ("series", "delta", "restarted"),
    [
        ([], 0.0, False),
        ([5.0], 0.0, False),
        ([1.0, 4.0, 10.0], 9.0, False),
        ([1.0, None, 10.0], 9.0, False),
        ([100.0, 150.0, 20.0, 30.0], 80.0, True),  # restart: the counter starts again from zero
    ],
)
def test_counter_delta(series: list[float | None], delta: float, restarted: bool) -> None:
    assert counter_delta(series) == (delta, restarted)


def scrapes(*rows: tuple[str, float, float, float]) -> list:  # type: ignore[type-arg]
    return [
        parse_scrape(filter_scrape(scrape_text(p, g, stop=s, waiting=2 * i)), t_s=float(i), phase=phase)
        for i, (phase, p, g, s) in enumerate(rows)
    ]


def test_server_metrics_deltas_from_after_warmup() -> None:
    rows = scrapes(
        ("before_warmup", 0, 0, 0), ("before", 100, 10, 1), ("during", 300, 50, 3), ("after", 500, 110, 5)
    )
    got = server_metrics(rows, client_prompt_tokens=400, client_output_tokens=100)
    assert got is not None
    assert (got.prompt_tokens, got.generation_tokens, got.request_success) == (400, 100, {"length": 4})
    assert (got.scrapes, got.peak_waiting, got.waiting_at_end, got.peak_running) == (3, 6, 6, 8)
    assert not got.restart_detected and not got.token_mismatch


def test_server_metrics_flags_restart_and_mismatch() -> None:
    rows = scrapes(("before", 1000, 100, 10), ("during", 20, 5, 0), ("after", 420, 105, 4))
    got = server_metrics(rows, client_prompt_tokens=100, client_output_tokens=100, client_failed=2)
    assert got is not None
    assert got.restart_detected
    assert got.prompt_tokens == 420  # 20 after the restart + 400 after that
    assert got.token_mismatch
    assert any("2 failed requests" in note for note in got.notes)
    assert any("restarted" in note for note in got.notes)


def test_no_scrapes_means_no_server_metrics() -> None:
    assert server_metrics([], client_prompt_tokens=1, client_output_tokens=1) is None


def test_prefix_cache_and_spec_decode_counters_become_rates() -> None:
    from load.metrics import filter_scrape, parse_scrape, server_metrics

    def text(queries: float, hits: float, drafts: float, draft_tokens: float, accepted: float) -> str:
        lines = []
        for engine in ("0", "1"):  # summed over DP engines
            lines += [
                "# HELP vllm:prefix_cache_queries_total Prefix cache queries.",
                "# TYPE vllm:prefix_cache_queries_total counter",
                f'vllm:prefix_cache_queries_total{{engine="{engine}",model_name="m"}} {queries / 2}',
                f'vllm:prefix_cache_hits_total{{engine="{engine}",model_name="m"}} {hits / 2}',
                f'vllm:spec_decode_num_drafts_total{{engine="{engine}",model_name="m"}} {drafts / 2}',
                f'vllm:spec_decode_num_draft_tokens_total{{engine="{engine}"}} {draft_tokens / 2}',
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="{engine}"}} {accepted / 2}',
            ]
        return filter_scrape("\n".join(lines) + "\n")

    parsed = [
        parse_scrape(text(100, 10, 5, 35, 10), t_s=0.0, phase="before"),
        parse_scrape(text(1100, 810, 105, 735, 360), t_s=1.0, phase="after"),
    ]
    server = server_metrics(parsed, client_prompt_tokens=0, client_output_tokens=0)
    assert server is not None
    assert (server.prefix_cache_queries, server.prefix_cache_hits) == (1000, 800)
    assert server.prefix_cache_hit_rate == pytest.approx(0.8)
    assert server.speculative is not None
    assert server.speculative.acceptance_rate == pytest.approx(350 / 700)
    assert server.speculative.mean_accepted_length == pytest.approx(1 + 350 / 100)
    assert not any("prefix" in n or "spec" in n for n in server.notes)  # optional: never a note
    bare = server_metrics(
        [parse_scrape("", t_s=0.0, phase="before")], client_prompt_tokens=0, client_output_tokens=0
    )
    assert bare is not None and bare.prefix_cache_hit_rate is None and bare.speculative is None
