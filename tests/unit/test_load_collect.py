"""The pure collector: exchanges to outcomes and records, running counts, and the run's summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.results import ErrorClass
from load.client import Ending, Exchange
from load.collect import Collector, RunInfo, outcome_steps, stopped_outcome, summarize_run
from load.plan import Request
from load.sse import Read, StreamOutcome
from tests.unit.load_fixtures import record

MS = 1_000_000


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def token(text: str, finish: str | None = None) -> bytes:
    return sse({"choices": [{"delta": {"content": text}, "finish_reason": finish}]})


def usage(prompt: int, completion: int) -> bytes:
    return sse({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})


GOOD = [(11 * MS, token("a")), (12 * MS, token("b", "length") + usage(100, 2) + sse(b"[DONE]"))]
HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def framed(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def exchange(
    *,
    status: int | None = 200,
    body: list[Read] | None = None,
    complete: bool = True,
    ending: Ending = "complete",
    detail: str | None = None,
) -> Exchange:
    return Exchange(
        sent_ns=10 * MS,
        status=status,
        body=list(GOOD if body is None else body),
        complete=complete,
        ending=ending,
        detail=detail,
        reads=len(GOOD if body is None else body),
    )


def outcome_of(ex: Exchange) -> StreamOutcome:
    steps = outcome_steps(ex)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: StreamOutcome = done.value
            return result


@pytest.mark.parametrize(
    ("ex", "error", "detail"),
    [
        (exchange(), None, None),
        (exchange(status=None, body=[], ending="closed", detail=None), "connect", "no HTTP status line"),
        (exchange(status=None, body=[(1, b"junk")], detail="bad"), "malformed", "bad"),
        (exchange(status=503, body=[(1, b'{"error": {"message": "busy"}}')]), "http_5xx", "HTTP 503: busy"),
        (exchange(ending="timeout", detail="no end of stream within 5 s"), "timeout", "no end of stream"),
        (exchange(status=None, body=[], ending="connect", detail="refused"), "connect", "refused"),
        (
            exchange(body=GOOD[:1], complete=False, ending="closed", detail="connection closed mid-response"),
            "truncated",
            "connection closed mid-response",
        ),
        (exchange(body=GOOD[:1], complete=True), "truncated", "without [DONE]"),
    ],
)
def test_outcome_of_an_exchange(ex: Exchange, error: ErrorClass | None, detail: str | None) -> None:
    out = outcome_of(ex)
    assert out.error == error
    assert (detail is None and out.error_detail is None) or detail in (out.error_detail or "")


def test_a_raw_exchange_is_decoded_then_parsed() -> None:
    raw = HEAD + framed(token("a"), token("b", "stop") + usage(5, 2), sse(b"[DONE]"))
    ex = Exchange(sent_ns=0, ending="complete", raw=[(3 * MS, raw[:40]), (4 * MS, raw[40:])], reads=2)
    out = outcome_of(ex)
    assert (out.error, out.finish_reason, out.completion_tokens) == (None, "stop", 2)
    assert out.token_chunk_ns == [4 * MS, 4 * MS] and ex.status == 200 and ex.raw is None


@pytest.mark.parametrize(
    ("reason", "detail"),
    [("timeout", "stopped by the profile's time bound"), ("cancelled", "the run was interrupted")],
)
def test_stopped_outcome(reason: ErrorClass, detail: str) -> None:
    assert (stopped_outcome(reason).error, stopped_outcome(reason).error_detail) == (reason, detail)


def request(index: int, *, warmup: bool = False) -> Request:
    return Request(
        index=index,
        warmup=warmup,
        target_prompt_tokens=100,
        max_tokens=2,
        arrival_s=None,
        cache_salt=f"s-{index}",
        body=b"{}",
    )


def collect(collector: Collector, req: Request, ex: Exchange) -> None:
    for _ in collector.steps(req, 10 * MS, ex):
        pass


def test_collector_counts_measured_requests_only() -> None:
    collector = Collector(t0_ns=0, time_scale=2.0)
    assert collector.tokens_per_read is None
    collect(collector, request(0, warmup=True), exchange())
    collect(collector, request(1), exchange())
    collect(collector, request(2), exchange(status=500, body=[(1, b"{}")]))
    collector.stopped(request(3), 10 * MS, 15 * MS, "cancelled")
    assert (collector.completed, collector.errors, collector.output_tokens) == (1, 2, 2)
    assert collector.tokens_per_read == pytest.approx(2 / 2)  # 2 usage tokens over 2 reads
    assert [r.index for r in collector.records] == [0, 1, 2, 3]
    first = collector.records[1]
    assert (first.sent_s, first.ttft_s, first.end_s) == pytest.approx((0.02, 0.002, 0.004))  # host seconds
    assert collector.records[3].error == "cancelled" and collector.records[3].sent_s == pytest.approx(0.03)
    assert sorted(collector.chunks_per_read) == [1, 1]  # measured token chunks per read


INFO = RunInfo(
    candidate="c",
    profile="p",
    repeat=1,
    fingerprint="f",
    backend="sim",
    host="h",
    time_scale=1.0,
    started_at="2024-01-01T00:00:00+00:00",
    base_url="http://x",
)


SCRAPE = 'vllm:generation_tokens_total{{engine="0"}} {}\nvllm:prompt_tokens_total{{engine="0"}} {}\n'


def summarize(**kw: Any) -> Any:
    args: dict[str, Any] = dict(
        t0_ns=1_000 * MS,
        planned=3,
        chunks_per_read=[1, 1],
        cpu_seconds=0.1,
        window_ns=(1_000 * MS, 3_000 * MS),
        scrapes=[],
        scrape_errors=[],
        notes=["plan note"],
        interrupted=False,
    )
    args.update(kw)
    return summarize_run(INFO, [record(2), record(0, warmup=True), record(1)], **args)


def test_summary_identity_order_and_notes() -> None:
    result = summarize(planned=3)
    assert [r.index for r in result.records] == [0, 1, 2]
    s = result.summary
    assert (s.candidate, s.profile, s.repeat, s.fingerprint, s.backend, s.host) == (
        "c",
        "p",
        1,
        "f",
        "sim",
        "h",
    )
    assert (s.num_requests, s.completed, s.output_tokens, s.interrupted) == (3, 2, 20, False)
    assert s.notes == ["plan note", "2 of 3 planned requests were sent"]
    assert s.client.client_cpu_percent == pytest.approx(5.0)  # 0.1 s of CPU over a 2 s window
    assert s.server is None and result.metrics.t0_monotonic_ns == 1_000 * MS


@pytest.mark.parametrize(
    ("planned", "errors", "want_requests", "want_notes"),
    [
        (0, [], 2, ["plan note"]),  # plan unknown (stopped while planning): the records count
        (2, ["before: HTTP 500"], 2, ["plan note", "/metrics unavailable: before: HTTP 500"]),
    ],
)
def test_summary_planned_and_metrics_notes(
    planned: int, errors: list[str], want_requests: int, want_notes: list[str]
) -> None:
    s = summarize(planned=planned, scrape_errors=errors).summary
    assert (s.num_requests, s.notes) == (want_requests, want_notes)


def test_scrapes_become_server_deltas_and_the_metrics_log() -> None:
    scrapes = [
        (1_000 * MS, "before_warmup", SCRAPE.format(0, 0)),
        (1_500 * MS, "before", SCRAPE.format(2, 10)),
        (3_000 * MS, "after", SCRAPE.format(22, 210)),
    ]
    result = summarize(scrapes=scrapes)
    assert result.summary.server is not None
    assert (result.summary.server.generation_tokens, result.summary.server.prompt_tokens) == (20, 200)
    assert not result.summary.server.token_mismatch
    assert [(s.t_s, s.phase) for s in result.metrics.scrapes] == [
        (0.0, "before_warmup"),
        (0.5, "before"),
        (2.0, "after"),
    ]
