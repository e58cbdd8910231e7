"""Harness faults: a client that stood still (paused), requests the client could not send, and how the
runner and the sweep treat them (never as evidence about the server)."""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.errors import ClientPaused, HarnessError
from contracts.files import read_jsonl, read_model
from contracts.results import CandidateRun, ProfileSummary, RequestRecord
from contracts.sweepdir import Repeat, load_results
from gates.evidence import Expected, evidence_gaps
from gates.stability import _profile_stability
from load.client import Exchange, RawStreamClient, failed_ending
from load.collect import outcome_steps
from load.harness import PAUSE_MIN_S, LoopWatch, Pause, harness_fault, paused
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, summary
from tests.unit.test_load_runner import FakeServer, run

S = 1_000_000_000  # ns per second
T0 = 100 * S  # the profile's t = 0 (monotonic ns)


def stream(
    sent: float,
    chunks: list[float],
    end: float | None = None,
    *,
    error: str | None = None,
    warmup: bool = False,
) -> RequestRecord:
    """A record sent at ``sent`` (seconds from t = 0) whose chunks arrived at the absolute times
    ``chunks``; it ended at ``end`` (default: its last chunk)."""
    last = end if end is not None else (chunks[-1] if chunks else None)
    return RequestRecord(
        index=0,
        warmup=warmup,
        target_prompt_tokens=10,
        target_output_tokens=10,
        scheduled_s=sent,
        sent_s=sent,
        ttft_s=chunks[0] - sent if chunks else None,
        first_visible_s=chunks[0] - sent if chunks else None,
        end_s=None if error in ("timeout", "cancelled") and last is None else (last - sent if last else None),
        chunk_offsets_s=[c - sent for c in chunks],
        finish_reason=None if error else "length",
        error=error,  # type: ignore[arg-type]
    )


def every(start: float, stop: float, step: float = 0.05) -> list[float]:
    """Chunk times from ``start`` to ``stop`` every ``step`` seconds."""
    n = round((stop - start) / step)
    return [round(start + k * step, 6) for k in range(n + 1)]


def stall(a: float, b: float) -> tuple[int, int]:
    """The loop stood still from ``a`` to ``b`` seconds after t = 0."""
    return T0 + round(a * S), T0 + round(b * S)


# Two streams that decode from t = 0 to t = 20, with the client paused from 5 to 12: nothing arrives in
# (5, 12); at 12 the buffered chunks are read at once.
PAUSED_STREAMS = [
    stream(0.0, [*every(0.1, 5.0), *[12.0] * 40, *every(12.05, 20.0)]),
    stream(0.2, [*every(0.3, 4.95), *[12.0] * 40, *every(12.05, 19.0)]),
]
# The same streams from a server that stood still from 5 to 12 while the client's loop ran.
STALLED_SERVER = [
    stream(0.0, [*every(0.1, 5.0), *every(12.0, 20.0)]),
    stream(0.2, [*every(0.3, 4.95), *every(12.0, 19.0)]),
]


@pytest.mark.parametrize(
    ("records", "stalls", "time_scale", "expected"),
    [
        # the client stood still 7 s with two streams in flight, both silent: paused
        (PAUSED_STREAMS, [stall(4.98, 12.0)], 1.0, Pause(start_s=5.0, end_s=12.0, streams=2)),
        # a stream sent in the last beat before the stop (after the loop's last wake) is in flight across it
        (
            [stream(5.01, [5.03, *[12.0] * 40, *every(12.05, 15.0)])],
            [stall(4.98, 12.0)],
            1.0,
            Pause(start_s=5.03, end_s=12.0, streams=1),
        ),
        # a server that stalls every stream for 7 s is the server's: the client's loop never stopped
        (STALLED_SERVER, [], 1.0, None),
        # a stall below the threshold (a busy 2-core machine, a slow step): not a pause
        (PAUSED_STREAMS, [stall(4.98, 4.98 + PAUSE_MIN_S - 0.5)], 1.0, None),
        # the loop stood still, but a stream this process sent kept receiving within it: the silence common
        # to every stream is too short (the stall and the records do not agree)
        (
            [*PAUSED_STREAMS, stream(0.0, every(0.1, 20.0))],
            [stall(4.98, 12.0)],
            1.0,
            None,
        ),
        # the loop stood still before the measured streams were sent (warmup, planning): no stream in flight
        ([stream(13.0, every(13.1, 15.0))], [stall(4.98, 12.0)], 1.0, None),
        # ... or only warmup streams were in flight
        ([stream(0.0, every(0.1, 20.0), warmup=True)], [stall(4.98, 12.0)], 1.0, None),
        # a stream waiting for its first byte when the time bound stopped it counts as in flight
        (
            [stream(1.0, [], None, error="timeout")],
            [stall(4.98, 12.0)],
            1.0,
            Pause(start_s=4.98, end_s=12.0, streams=1),
        ),
        # a pause longer than the request timeout: the stream's last read came before it, and the timeout
        # fired when the loop ran again
        (
            [stream(1.0, every(1.5, 5.0), 5.0, error="timeout")],
            [stall(4.98, 12.0)],
            1.0,
            Pause(start_s=5.0, end_s=12.0, streams=1),
        ),
        # the simulator counts host seconds (50 per wall second): 7 s of wall time is 350 host seconds
        (
            [stream(0.0, [*every(5.0, 250.0, 2.5), *[600.0] * 5, *every(602.5, 700.0, 2.5)])],
            [(T0 + round(5.05 * S), T0 + 12 * S)],
            50.0,
            Pause(start_s=252.5, end_s=600.0, streams=1),
        ),
        # ... and 3 s of wall time is not a pause there either
        (
            [stream(0.0, [*every(5.0, 250.0, 2.5), *[400.0] * 5, *every(402.5, 700.0, 2.5)])],
            [(T0 + round(5.05 * S), T0 + 8 * S)],
            50.0,
            None,
        ),
    ],
)
def test_a_pause_is_a_stall_of_the_client_and_a_silence_of_every_stream_in_flight(
    records: list[RequestRecord], stalls: list[tuple[int, int]], time_scale: float, expected: Pause | None
) -> None:
    assert paused(records, stalls, t0_ns=T0, time_scale=time_scale) == expected


class _Done(Exception):
    pass


@pytest.mark.parametrize(
    ("gaps_s", "expected"),
    [
        ([0.1] * 20, []),  # every wake on time
        ([0.1, 0.9, 0.1, 1.5, 0.1], []),  # a busy machine: late wakes, never seconds
        ([0.1, 0.1, 6.0, 0.1], [(0.2, 6.2)]),  # stopped for 6 s (SIGSTOP, a VM pause)
        ([5.0, 0.1, 0.1, 7.5], [(0.0, 5.0), (5.2, 12.7)]),
    ],
)
def test_the_heartbeat_records_the_windows_its_loop_did_not_run(
    gaps_s: list[float], expected: list[tuple[float, float]]
) -> None:
    now = [T0]
    gaps = iter(gaps_s)

    async def sleep(_: float) -> None:
        try:
            now[0] += round(next(gaps) * S)
        except StopIteration:
            raise _Done from None

    watch = LoopWatch(lambda: now[0], sleep=sleep)
    with pytest.raises(_Done):
        asyncio.run(watch.run())
    got = [((a - T0) / S, (b - T0) / S) for a, b in watch.stalls]
    assert [x for pair in got for x in pair] == pytest.approx([x for pair in expected for x in pair])


def test_a_pause_is_the_fault_before_requests_the_client_could_not_send() -> None:
    unsent = stream(0.0, [], None, error="client").model_copy(
        update={"error_detail": "OSError: [Errno 24] Too many open files", "end_s": None}
    )
    assert harness_fault(PAUSED_STREAMS, [[]], t0_ns=T0) is None
    fault = harness_fault([*PAUSED_STREAMS, unsent], [[stall(4.98, 12.0)]], t0_ns=T0)
    assert isinstance(fault, ClientPaused) and "paused for 7.0 s" in fault.message
    fault = harness_fault([*PAUSED_STREAMS, unsent], [[]], t0_ns=T0)
    assert type(fault) is HarnessError
    assert fault.message.startswith("the load client could not send 1 of 3 request(s) (OSError: [Errno 24]")
    # worker processes: each is judged on its own records and its own loop
    busy = [stream(0.0, every(0.1, 20.0))]  # a worker whose stream kept receiving
    split = [PAUSED_STREAMS, busy]
    both = [*PAUSED_STREAMS, *busy]
    assert harness_fault(both, [[], [stall(4.98, 12.0)]], t0_ns=T0, split=split) is None
    assert isinstance(harness_fault(both, [[stall(4.98, 12.0)], []], t0_ns=T0, split=split), ClientPaused)


# ------------------------------------------------------------------------- requests the client could not send


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("exc", "ending"),
    [
        (OSError(errno.EMFILE, "Too many open files"), "client"),
        (OSError(errno.ENFILE, "Too many open files in system"), "client"),
        (OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"), "client"),
        (OSError(errno.ENOBUFS, "No buffer space available"), "client"),
        (_chained(httpx.ConnectError("connect failed"), OSError(errno.EMFILE, "x")), "client"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connect"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "connect"),
        (OSError(errno.EHOSTUNREACH, "No route to host"), "connect"),
        (httpx.ConnectError("connect failed"), "connect"),
    ],
)
def test_a_connect_that_fails_on_the_clients_own_host_is_the_clients(exc: BaseException, ending: str) -> None:
    assert failed_ending(exc) == ending


class _NoDescriptors(RawStreamClient):
    """The raw client on a host out of file descriptors (what EMFILE looks like to it)."""

    def __init__(self, code: int) -> None:
        super().__init__("http://127.0.0.1:9")
        self.code = code

    async def _connect(self) -> Any:
        raise OSError(self.code, "simulated")


@pytest.mark.parametrize(("code", "error"), [(errno.EMFILE, "client"), (errno.ECONNREFUSED, "connect")])
def test_the_raw_client_records_a_clients_own_connect_failure_as_client(code: int, error: str) -> None:
    async def send() -> Exchange:
        return await _NoDescriptors(code).post_stream("/v1/chat/completions", b"{}", timeout_s=5)

    exchange = asyncio.run(send())
    assert exchange.ending == error
    steps = outcome_steps(exchange)
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
    assert done.value.value.error == error


class _OutOfFiles(FakeServer):
    """Requests 5 and 6 cannot be sent: the client's host is out of descriptors."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        chat = request.url.path == "/v1/chat/completions"
        if chat and json.loads(request.content)["cache_salt"].rsplit("-", 1)[1] in ("5", "6"):
            raise httpx.ConnectError("connect failed") from OSError(errno.EMFILE, "Too many open files")
        return super().__call__(request)


def test_requests_the_client_could_not_send_make_the_run_a_harness_fault(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as info:
        run(tmp_path, _OutOfFiles())
    assert not isinstance(info.value, ClientPaused)
    assert "the load client could not send 2 of 14 request(s)" in info.value.message
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert [r.index for r in records if r.error is not None] == [5, 6]
    assert {r.error for r in records if r.error is not None} == {"client"}
    summary = read_model(tmp_path / "summary.json", ProfileSummary)  # written: the evidence of what happened
    assert summary.errors == {"client": 2}
    assert any(
        n.startswith("harness fault, not the server: the load client could not send") for n in summary.notes
    )


# ------------------------------------------------------------------------------------------------ the sweep


def _sweep(tmp_path: Path, pauses: int) -> tuple[SweepContext, FakeLoad, list[str], CandidateRun]:
    """The baseline measured with fake seams; its first ``pauses`` runs of serial r1 find the client
    paused (after writing their files, as the runner does)."""
    cfg, _ = load(["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[serial]"])
    fake, said = FakeLoad(), list[str]()
    seen: list[int] = []

    def pause(candidate: str, profile: str, repeat: int) -> None:
        seen.append(repeat)
        if len(seen) <= pauses:
            raise ClientPaused("the load client was paused for 7.0 s (from t = 5.0 s)")

    fake.before = pause
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), fake, said))
    return ctx, fake, said, run_candidate(ctx, ctx.cfg.baseline, role="baseline")


def test_a_paused_run_is_discarded_and_measured_again_at_once(tmp_path: Path) -> None:
    ctx, fake, said, run = _sweep(tmp_path, pauses=1)
    assert fake.calls == [("baseline", "serial", 1), ("baseline", "serial", 1)]
    assert [e.kind for e in run.watch] == []  # the second run is the evidence; nothing is missing
    assert is_complete(ctx, "baseline")
    assert any("paused for 7.0 s" in m and "measuring it again" in m for m in said)


def test_a_run_paused_twice_is_a_harness_fault_measured_again_on_resume(tmp_path: Path) -> None:
    ctx, fake, _, run = _sweep(tmp_path, pauses=2)
    assert len(fake.calls) == 2
    assert [e.kind for e in run.watch] == ["harness"] and "paused for 7.0 s" in run.watch[0].detail
    assert not is_complete(ctx, "baseline")
    res = load_results(ctx.dir, "candidates/baseline", "baseline")
    gaps = evidence_gaps(res, res, Expected.from_config(ctx.cfg))
    assert [g.side for g in gaps if g.kind == "harness"] == ["candidate", "baseline"]  # judged against itself


@pytest.mark.parametrize(
    ("errors", "status", "fragment"),
    [
        ({"client": 3}, "pass", "0/8 failed"),  # the client could not send them: not the server's failures
        ({"client": 2, "http_5xx": 1}, "fail", "1/8 requests failed (http_5xx 1)"),
        ({"connect": 1}, "fail", "1/8 requests failed (connect 1)"),  # refused by the server's host: counted
    ],
)
def test_stability_never_counts_requests_the_client_could_not_send(
    errors: dict[str, int], status: str, fragment: str
) -> None:
    failed = sum(errors.values())
    lost = [
        stream(0.0, [], None, error=kind).model_copy(update={"index": i, "end_s": None})
        for i, kind in enumerate(k for k, n in errors.items() for _ in range(n))
    ]
    ran = summary("c", "serial", 1, "f", n=8).model_copy(
        update={"completed": 8 - failed, "failed": failed, "errors": errors}
    )
    rep = Repeat(summary=ran, records=lost, summary_file="s.json", records_file="r.jsonl")
    comparison, problems, _ = _profile_stability("serial", [rep], [])
    assert comparison.status == status
    assert fragment in "; ".join([comparison.message, *problems])


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (OSError(errno.EMFILE, "Too many open files"), "harness"),  # the client's process ran out
        (_chained(httpx.ConnectError("connect failed"), OSError(errno.EADDRNOTAVAIL, "x")), "harness"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "unhealthy"),  # the server's
    ],
)
def test_a_runner_that_fails_on_its_own_hosts_limits_is_a_harness_fault_not_an_unhealthy_server(
    tmp_path: Path, error: BaseException, kind: str
) -> None:
    cfg, _ = load(["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[serial]"])
    fake = FakeLoad()

    def fail(candidate: str, profile: str, repeat: int) -> None:
        raise error

    fake.before = fail
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), fake, []))
    run = run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    assert [e.kind for e in run.watch] == [kind]
