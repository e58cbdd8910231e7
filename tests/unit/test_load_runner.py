"""run_profile end to end over httpx.MockTransport: requests sent, results written, errors classed."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.files import read_jsonl, read_model
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from load import run_profile

OVERHEAD = 3


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def delta(**fields: Any) -> dict[str, Any]:
    finish = fields.pop("finish", None)
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


class FakeServer:
    """An OpenAI-style server in a MockTransport handler; ``faults`` maps request index -> fault."""

    def __init__(
        self, faults: dict[int, str] | None = None, *, metrics: bool = True, tokenize: bool = True
    ) -> None:
        self.faults = faults or {}
        self.metrics = metrics
        self.tokenize = tokenize
        self.bodies: list[dict[str, Any]] = []
        self.prompt_total = 0
        self.generation_total = 0
        self.never = asyncio.Event()  # a stalled stream waits on this forever

    def count(self, payload: dict[str, Any]) -> int:
        return len(" ".join(m["content"] for m in payload["messages"]).split()) + OVERHEAD

    async def stalled(self) -> AsyncIterator[bytes]:
        yield sse(delta(content="x"))
        await self.never.wait()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/tokenize":
            if not self.tokenize:
                return httpx.Response(404)
            return httpx.Response(
                200, json={"count": self.count(json.loads(request.content)), "tokens": [1, 2]}
            )
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 4096}]})
        if path == "/metrics":
            if not self.metrics:
                return httpx.Response(404)
            text = (
                f'vllm:prompt_tokens_total{{engine="0"}} {self.prompt_total}\n'
                f'vllm:generation_tokens_total{{engine="0"}} {self.generation_total}\n'
                'vllm:num_requests_waiting{engine="0"} 0\n'
            )
            return httpx.Response(200, text=text)
        payload = json.loads(request.content)
        self.bodies.append(payload)
        index = int(payload["cache_salt"].rsplit("-", 1)[1])
        fault = self.faults.get(index)
        if fault == "interrupt":
            raise KeyboardInterrupt
        if fault == "http500":
            return httpx.Response(500, json={"error": {"message": "boom"}})
        if fault == "stall":
            return httpx.Response(200, content=self.stalled())
        prompt, output = self.count(payload), payload["max_tokens"]
        self.prompt_total += prompt
        self.generation_total += output
        events = [delta(role="assistant", content=""), delta(reasoning="think"), delta(reasoning="more")]
        events += [delta(content="answer"), delta(content="!", finish="length")]
        if fault == "censored":
            events = [delta(reasoning="think", finish="length")]
        body = b"".join(sse(e) for e in events)
        body += sse({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": output}})
        if fault != "truncated":
            body += sse(b"[DONE]")
        return httpx.Response(200, content=body)


def profile(**kw: Any) -> WorkloadConfig:
    base: dict[str, Any] = dict(
        name="unit",
        concurrency=4,
        num_requests=12,
        warmup_requests=2,
        prompt_tokens=LengthConfig(kind="uniform", mean=100, min=50, max=150),
        output_tokens=LengthConfig(kind="fixed", mean=32),
        ignore_eos=True,
        seed=1,
        time_limit_s=30,
    )
    base.update(kw)
    return WorkloadConfig(**base)


def run(tmp_path: Path, server: Callable[[httpx.Request], httpx.Response], **kw: Any) -> ProfileSummary:
    workload = kw.pop("workload", profile())
    return run_profile(
        "http://fake",
        "m",
        workload,
        candidate="base",
        fingerprint="f" * 8,
        repeat=0,
        out_dir=tmp_path,
        backend="sim",
        host="unit",
        progress=kw.pop("progress", False),
        transport=httpx.MockTransport(server),
        salt="run1",
        **kw,
    )


def test_profile_writes_validated_results(tmp_path: Path) -> None:
    server = FakeServer({2: "http500", 3: "truncated", 4: "censored"})
    summary = run(tmp_path, server)
    assert read_model(tmp_path / "summary.json", ProfileSummary) == summary
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert [r.index for r in records] == list(range(14))
    assert [r.warmup for r in records[:3]] == [True, True, False]
    assert (summary.num_requests, summary.completed, summary.failed) == (12, 10, 2)
    assert summary.errors == {"http_5xx": 1, "truncated": 1}
    # the 500 and the reasoning-only answer; the truncated stream had shown content before it broke
    assert summary.first_visible_censored.censored == 2
    ok = [r for r in records if r.ok and r.first_visible_s is not None]
    assert all(r.ttft_s is not None and r.ttft_s <= r.first_visible_s for r in ok)
    assert summary.output_tokens == 32 * 11  # usage of every measured request that reported it
    assert summary.server is not None and not summary.server.token_mismatch
    assert (tmp_path / "metrics.json").exists()
    assert summary.prompt_mismatches == 0


def test_every_request_is_a_streaming_request_with_its_own_salt(tmp_path: Path) -> None:
    server = FakeServer()
    run(tmp_path, server)
    salts = [b["cache_salt"] for b in server.bodies]
    assert len(set(salts)) == len(salts) == 14 and all(s.startswith("run1-") for s in salts)
    for body in server.bodies:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["min_tokens"] == body["max_tokens"] == 32 and body["ignore_eos"] is True


def test_prompts_are_calibrated_to_the_servers_count(tmp_path: Path) -> None:
    server = FakeServer()
    run(tmp_path, server)
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert all(
        abs((r.prompt_tokens or 0) - r.target_prompt_tokens) <= 0.02 * r.target_prompt_tokens for r in records
    )


def test_scale_shrinks_the_profile(tmp_path: Path) -> None:
    summary = run(tmp_path, FakeServer(), scale=0.25)
    assert summary.num_requests == 3
    assert len(read_jsonl(tmp_path / "records.jsonl", RequestRecord)) == 3  # warmup: round(2 * 0.25) = 0


def test_stop_event_interrupts_and_keeps_files(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    summary = run(tmp_path, FakeServer(), stop=stop)
    assert summary.interrupted
    assert (tmp_path / "records.jsonl").exists() and (tmp_path / "summary.json").exists()


class HangingTokenize(FakeServer):
    """A server that stopped answering (SIGSTOP) while the run calibrates its prompts on /tokenize."""

    def __init__(self) -> None:
        super().__init__()
        self.calling = threading.Event()  # the run is inside its /tokenize call
        self.abandoned = threading.Event()  # ... and the call was cancelled, not answered

    async def hang(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tokenize":
            self.calling.set()
            try:
                await self.never.wait()
            except asyncio.CancelledError:
                self.abandoned.set()
                raise
        return FakeServer.__call__(self, request)


def test_a_stop_while_planning_abandons_the_hung_call_at_once_not_at_its_timeout(tmp_path: Path) -> None:
    """The watcher found the server hung: the run ends now, not after /tokenize's 30 s timeout.

    The mock transport has no timeout at all: the run can end only by abandoning the call at the stop,
    which is set once the call is in flight (no timer, no bound on elapsed time)."""
    stop = threading.Event()
    server = HangingTokenize()
    out: list[ProfileSummary] = []

    def measure() -> None:
        summary = run_profile(
            "http://fake", "m", profile(), candidate="base", fingerprint="f" * 8, repeat=0, out_dir=tmp_path,
            backend="sim", host="unit", progress=False, transport=httpx.MockTransport(server.hang),
            salt="run1", stop=stop,
        )  # fmt: skip
        out.append(summary)

    worker = threading.Thread(target=measure, daemon=True)
    worker.start()
    assert server.calling.wait(60), "the run never called /tokenize"
    stop.set()
    worker.join(60)
    assert not worker.is_alive(), "the run did not end at the stop: the hung call was not abandoned"
    assert server.abandoned.is_set(), "the hung /tokenize call was not cancelled"
    (summary,) = out
    assert summary.interrupted and summary.completed == 0 and server.bodies == []
    assert not summary.time_bound  # stopped from outside (the watcher), not by the profile's time bound
    assert (tmp_path / "summary.json").exists()


class StallThenLate(FakeServer):
    """Stalls its streams; the clock it gives the runner jumps a minute ahead once one stalled stream is
    in flight, so the time bound passes with stalled streams to stop whatever the machine's load (with a
    real 1 s bound, a client starved of CPU at load 23 reached it before sending one)."""

    def __init__(self, faults: dict[int, str]) -> None:
        super().__init__(faults)
        self.stalls = 0

    async def stalled(self) -> AsyncIterator[bytes]:
        self.stalls += 1
        async for chunk in super().stalled():
            yield chunk

    def clock(self) -> int:
        return time.monotonic_ns() + (60 * 10**9 if self.stalls else 0)


def test_time_bound_stops_stalled_streams(tmp_path: Path) -> None:
    server = StallThenLate({i: "stall" for i in range(2, 14)})
    summary = run(tmp_path, server, workload=profile(time_limit_s=30.0), clock=server.clock)
    assert summary.interrupted and summary.time_bound  # a finding about the server, not a stop
    assert summary.completed == 0 and summary.errors.get("timeout", 0) >= 1
    assert any("time bound" in note for note in summary.notes)


def test_keyboard_interrupt_keeps_finished_records(tmp_path: Path) -> None:
    server = FakeServer({9: "interrupt"})
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, server, workload=profile(concurrency=1))
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert [r.index for r in records if r.ok] == list(range(9))
    summary = read_model(tmp_path / "summary.json", ProfileSummary)
    assert summary.interrupted and not summary.time_bound


def test_sigterm_cancels_the_run_and_raises_after_the_loop(tmp_path: Path) -> None:
    """The sweep's SIGTERM handler raises KeyboardInterrupt; during a run the signal cancels the run and
    that handler runs after the loop, then is put back. (Inside a uvloop transport callback, where a raise
    was swallowed: tests/integration/test_load_ref_server.py.)"""
    import os
    import signal

    def raising(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    class Signalling(FakeServer):
        """Sends the SIGTERM once both slots hold a stalled stream (requests 0-3 done, 4 and 5 in flight):
        a condition, not a delay, so a loaded machine cannot send it before request 3 has finished."""

        stalls = 0

        async def stalled(self) -> AsyncIterator[bytes]:
            self.stalls += 1
            if self.stalls == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            async for chunk in super().stalled():
                yield chunk

    server = Signalling({i: "stall" for i in range(4, 14)})
    previous = signal.signal(signal.SIGTERM, raising)
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            run(tmp_path, server, workload=profile(concurrency=2))
        assert signal.getsignal(signal.SIGTERM) is raising  # the sweep's handler is back
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary = read_model(tmp_path / "summary.json", ProfileSummary)
    assert summary.interrupted and summary.completed == 2  # the finished requests are kept
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert [r.index for r in records if r.ok] == [0, 1, 2, 3]


def test_server_without_metrics_or_tokenize(tmp_path: Path) -> None:
    summary = run(tmp_path, FakeServer(metrics=False, tokenize=False))
    assert summary.server is None
    assert summary.completed == 12
    assert any("/tokenize" in note for note in summary.notes)
    assert any("/metrics unavailable" in note for note in summary.notes)


def test_fixed_prompts_of_the_answer_gate(tmp_path: Path) -> None:
    server = FakeServer()
    workload = profile(
        num_requests=5,
        warmup_requests=0,
        prompts_file="answer_gate_prompts.json",
        output_tokens=LengthConfig(kind="fixed", mean=32768),
        ignore_eos=False,
    )
    summary = run(tmp_path, server, workload=workload)
    assert summary.completed == 5
    assert all(b["max_tokens"] < 4096 and "min_tokens" not in b for b in server.bodies)
    assert any("clipped to fit max_model_len 4096" in note for note in summary.notes)
    assert server.bodies[0]["messages"][0]["content"].startswith("Think as long as you need.")


async def slow_stream(chunks: int) -> AsyncIterator[bytes]:
    """One token chunk every 40 ms, then usage and [DONE]: a stream that takes over a second."""
    for _ in range(chunks):
        await asyncio.sleep(0.04)
        yield sse(delta(content="x"))
    yield sse(delta(finish="length"))
    yield sse({"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": chunks}}) + sse(b"[DONE]")


def slow_server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/v1/chat/completions":
        return httpx.Response(200, content=slow_stream(json.loads(request.content)["max_tokens"]))
    return httpx.Response(404)


def test_the_live_line_shows_output_tokens_per_second_while_streams_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = profile(
        concurrency=4,
        num_requests=4,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=8),
        output_tokens=LengthConfig(kind="fixed", mean=30),
    )
    summary = run(tmp_path, slow_server, workload=workload, progress=True)
    lines = capsys.readouterr().err.splitlines()
    # the first plain line comes half a second in, long before any stream ends (each takes ~1.2 s)
    live = re.fullmatch(r"base/unit \[measure\]: 0/4 done, 4 in flight, ([\d,]+) tok/s, 0 errors", lines[0])
    assert live is not None, lines
    assert 20 <= int(live.group(1).replace(",", "")) <= 150  # 4 streams x 25 chunks/s, one token each
    final = re.fullmatch(r"base/unit \[done\]: 4/4 done, 0 in flight, ([\d,]+) tok/s, 0 errors", lines[-1])
    assert final is not None, lines
    assert int(final.group(1).replace(",", "")) == pytest.approx(summary.output_tps, rel=0.25)


def test_on_window_brackets_the_measured_requests_only(tmp_path: Path) -> None:
    """The sweep's energy window: called at the measured window's start and end, warmup outside it."""
    server = FakeServer()
    seen: list[tuple[str, int]] = []
    run(tmp_path, server, on_window=lambda edge: seen.append((edge, len(server.bodies))))
    warmup, total = 2, 14
    assert seen == [("start", warmup), ("end", total)]
