"""The load runner against a real streaming server process on loopback (benchmarks/sse_server.py).

The raw asyncio client, chunked decoding, keep-alive, /tokenize calibration, /metrics deltas, fault
classes and the stop event, all over real sockets.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from contracts.files import read_jsonl
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from load.metrics import parse_scrape
from tests.integration.ref_load import Server, run


def workload(**kw: Any) -> WorkloadConfig:
    base: dict[str, Any] = dict(
        name="itest",
        concurrency=8,
        num_requests=24,
        warmup_requests=2,
        prompt_tokens=LengthConfig(kind="lognormal", mean=400, std=300, min=32, max=2000),
        output_tokens=LengthConfig(kind="uniform", mean=24, min=16, max=32),
        ignore_eos=True,
        seed=7,
        time_limit_s=60,
    )
    base.update(kw)
    return WorkloadConfig(**base)


def test_profile_over_real_sockets(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "2", "--reasoning", "3", "--tokens-per-chunk", "2")
    summary = run(url, tmp_path, workload())
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    measured = [r for r in records if not r.warmup]
    assert (summary.completed, summary.failed, summary.errors) == (24, 0, {})
    for r in measured:
        assert r.ttft_s is not None and r.first_visible_s is not None and r.ttft_s < r.first_visible_s
        assert len(r.chunk_offsets_s) == -(-r.target_output_tokens // 2)  # two tokens per chunk
        assert r.completion_tokens == 2 * len(r.chunk_offsets_s)  # from usage, not from chunks
        assert r.prompt_tokens is not None
        assert abs(r.prompt_tokens - r.target_prompt_tokens) <= 0.02 * r.target_prompt_tokens
    assert summary.server is not None
    assert summary.server.prompt_tokens == summary.prompt_tokens  # warmup excluded on both sides
    assert summary.server.generation_tokens == summary.output_tokens
    assert not summary.server.token_mismatch and not summary.server.restart_detected
    assert summary.itl.p50 is not None and summary.itl.p50 > 0
    assert summary.prompt_mismatches == 0


def test_ten_thousand_token_prompts_and_large_chunks(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "1", "--tokens-per-chunk", "1")
    wl = workload(
        concurrency=4,
        num_requests=4,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=10_000),
    )
    summary = run(url, tmp_path, wl)
    assert summary.completed == 4
    assert summary.prompt_tokens == pytest.approx(40_000, rel=0.02)


FAULTS = {
    "FAULT:http500 go": ("http_5xx", "internal error"),
    "FAULT:http400 go": ("http_4xx", "maximum context length"),
    "FAULT:truncate go": ("truncated", "closed"),
    "FAULT:malformed go": ("malformed", "not valid JSON"),
    "FAULT:stream_error go": ("stream_error", "engine died"),
    "FAULT:nodone go": ("truncated", "[DONE]"),
    "plain prompt": (None, None),
    "REASONING:100 only thinking": (None, None),
}


def test_faults_are_classified_and_never_crash(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "2")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "faults.json").write_text(json.dumps(list(FAULTS)))
    wl = workload(concurrency=8, num_requests=len(FAULTS), warmup_requests=0, prompts_file="faults.json")
    summary = run(url, tmp_path / "out", wl, prompts_dir=prompts)
    records = read_jsonl(tmp_path / "out" / "records.jsonl", RequestRecord)
    for record, (error, detail) in zip(records, FAULTS.values(), strict=True):
        assert record.error == error, record
        if detail is not None:
            assert detail in (record.error_detail or ""), record
    thinking = records[-1]
    assert thinking.ok and thinking.censored and thinking.ttft_s is not None
    assert summary.failed == 6 and summary.first_visible_censored.censored >= 1


def test_stop_event_stops_promptly_and_keeps_finished_records(ref_server: Server, tmp_path: Path) -> None:
    """The server is frozen (SIGSTOP) once it has finished four requests, then the stop is set: nothing
    can finish any more, so the run ends on the stop alone, with the finished records kept and at most
    the one request in flight cancelled (concurrency 1). No bound on elapsed time: it holds on any load."""
    url = ref_server("--interval-ms", "20")
    (server,) = [p for p in psutil.Process().children() if any("sse_server.py" in a for a in p.cmdline())]
    stop = threading.Event()

    def freeze_after_four_finished() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
                scrape = parse_scrape(response.read().decode(), t_s=0.0, phase="poll")
            if sum(scrape.request_success.values()) >= 4:
                server.suspend()
                break
        stop.set()

    out: list[ProfileSummary] = []
    wl = workload(
        concurrency=1, num_requests=200, warmup_requests=0, output_tokens=LengthConfig(kind="fixed", mean=5)
    )
    measure = threading.Thread(target=lambda: out.append(run(url, tmp_path, wl, stop=stop)), daemon=True)
    watcher = threading.Thread(target=freeze_after_four_finished)
    try:
        measure.start()
        watcher.start()
        watcher.join()
        measure.join(120)
        assert not measure.is_alive(), "the run did not end on the stop (the server was frozen)"
    finally:
        server.resume()
    (summary,) = out
    assert summary.interrupted
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert sum(r.ok for r in records) >= 3  # four finished: all but at most the last one read
    assert all(r.ok or r.error == "cancelled" for r in records)
    assert sum(r.error == "cancelled" for r in records) <= 1  # only the request in flight
    assert len(records) < 200


def test_server_without_metrics(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "1", "--no-metrics")
    summary = run(url, tmp_path, workload(num_requests=4, warmup_requests=0))
    assert summary.server is None and summary.completed == 4


@pytest.mark.parametrize(
    ("name", "raised"),
    [
        ("SIGTERM", KeyboardInterrupt("signal SIGTERM")),  # the sweep's handler
        ("SIGUSR2", SystemExit(144)),  # submitit's preemption: checkpoint, requeue, exit
    ],
)
def test_a_signal_inside_a_transport_callback_interrupts_the_run(
    ref_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, raised: BaseException
) -> None:
    """A handler that raises, delivered while uvloop runs a stream's ``data_received`` (here: sent from
    inside the first one, so the handler runs there): a raise in that callback is taken by uvloop as a
    transport error and the run would go on to the end (a CI run: a preempted job measured on and was
    never requeued). The runner cancels the run instead and calls the handler once the loop has unwound
    (load.signals.run_cancelling_on_signals)."""
    import os
    import signal

    from load.client import _Conn

    sig = signal.Signals[name]
    calls: list[int] = []

    def raising(signum: int, frame: object) -> None:
        calls.append(signum)
        raise raised

    original = _Conn.data_received
    sent: list[int] = []

    def data_received(self: _Conn, data: bytes) -> None:
        if not sent and self.mode == "chunked":  # a stream's body, inside uvloop's read callback
            sent.append(os.getpid())
            os.kill(os.getpid(), sig)
        original(self, data)

    monkeypatch.setattr(_Conn, "data_received", data_received)
    url = ref_server("--interval-ms", "20")
    previous = signal.signal(sig, raising)
    try:
        with pytest.raises(type(raised)) as caught:
            run(url, tmp_path, workload(num_requests=40, concurrency=4))
        assert caught.value is raised and calls == [sig]
        assert signal.getsignal(sig) is raising
    finally:
        signal.signal(sig, previous)
    assert sent
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] and summary["completed"] < 40


def test_a_closed_loops_opening_wave_leaves_in_one_pass_and_each_later_request_in_its_slot(
    ref_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opening wave (decode_heavy: 128 requests at once) is written by the phase itself, one request
    after another without yielding (RawStreamClient.begin), not by a task of its own each, whose turns
    made the 128th leave about 3 ms late (1.8 ms at the median; 36 ms of a 0.32 s TTFT at 20x). Each
    later request of a slot is sent by its own task when the slot's previous one ended, as before."""
    import asyncio

    from load.client import RawStreamClient, _Conn

    tasks: list[asyncio.Task[Any] | None] = []  # held: a finished task's id is not reused meanwhile
    original = RawStreamClient._write

    def write(self: RawStreamClient, conn: _Conn, payload: bytes) -> int:
        if payload.startswith(b"POST"):
            tasks.append(asyncio.current_task())
        return original(self, conn, payload)

    monkeypatch.setattr(RawStreamClient, "_write", write)
    url = ref_server("--interval-ms", "2")
    summary = run(url, tmp_path, workload(num_requests=40, concurrency=16, warmup_requests=0))
    assert summary.completed == 40
    writers = [id(task) for task in tasks]
    assert len(writers) == 40
    opening, later = writers[:16], writers[16:]
    assert len(set(opening)) == 1  # one task wrote the whole wave: the phase's
    assert len(set(later)) == 24 and opening[0] not in later  # a request task each
    records = [r for r in read_jsonl(tmp_path / "records.jsonl", RequestRecord) if not r.warmup]
    first_wave = sorted(records, key=lambda r: r.sent_s)[:16]
    assert all(r.scheduled_s == first_wave[0].scheduled_s for r in first_wave)  # all due at t = 0


def test_a_connection_lets_go_of_its_finished_response(ref_server: Server) -> None:
    """The exchange keeps a finished response's reads; its connection, back in the pool, keeps none. The
    reads were dropped by the next send's reset instead: freeing a decode_heavy stream's thousands of reads
    there took 77 µs a request on the hot path and left a 128 wave 6 ms late (benchmarks/lag_effect.py)."""
    import asyncio

    from load.client import RawStreamClient

    url = ref_server("--interval-ms", "1", "--tokens-per-chunk", "1")
    message = {"role": "user", "content": "hi"}
    request = {"model": "ref-model", "messages": [message], "max_tokens": 32, "stream": True}
    body = json.dumps(request).encode()

    async def one() -> tuple[Any, Any]:
        client = RawStreamClient(url)
        try:
            exchange = await client.post_stream("/v1/chat/completions", body, timeout_s=30)
            (idle,) = client._idle
            return exchange, idle
        finally:
            await client.aclose()

    exchange, idle = asyncio.run(one())
    assert exchange.ending == "complete" and exchange.raw is not None and exchange.reads > 8
    assert idle.reads == [] and idle.response is not exchange.decoder  # nothing of it left to free
    assert len(exchange.decode().body) > 8  # and the exchange still decodes whole
