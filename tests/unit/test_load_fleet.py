"""The pure parts of fleet-scale load: pacing, the lateness flag, splitting over workers, TLS settings."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from contracts.errors import ConfigError, LoadError
from contracts.results import RequestRecord
from load.client import RawStreamClient
from load.pacing import SpinPacer, make_pacer
from load.plan import Request
from load.summary import client_health
from load.tls import tls_context
from load.workers import WorkerResult, merge, rss_per_stream, split
from tests.unit.composed import load as compose


def request(i: int) -> Request:
    return Request(
        index=i,
        warmup=False,
        target_prompt_tokens=1,
        max_tokens=1,
        arrival_s=None,
        cache_salt=f"s-{i}",
        body=b"{}",
    )


def record(i: int, lag: float = 0.0) -> RequestRecord:
    return RequestRecord(
        index=i,
        warmup=False,
        target_prompt_tokens=1,
        target_output_tokens=1,
        scheduled_s=1.0,
        sent_s=1.0 + lag,
        ttft_s=0.01,
        first_visible_s=0.01,
        end_s=0.02,
        finish_reason="length",
    )


@pytest.mark.parametrize(
    ("requests", "concurrency", "workers", "expected"),
    [
        # request i goes to worker i % n; concurrency shared out, the first workers get one more
        (6, 4, 2, [(2, [0, 2, 4]), (2, [1, 3, 5])]),
        (7, 5, 2, [(3, [0, 2, 4, 6]), (2, [1, 3, 5])]),
        (5, 9, 3, [(3, [0, 3]), (3, [1, 4]), (3, [2])]),
        # never more workers than slots or requests: each has a slot and something to send
        (6, 2, 4, [(1, [0, 2, 4]), (1, [1, 3, 5])]),
        (2, 8, 4, [(4, [0]), (4, [1])]),
        (3, 3, 1, [(3, [0, 1, 2])]),
    ],
)
def test_split_over_workers(
    requests: int, concurrency: int, workers: int, expected: list[tuple[int, list[int]]]
) -> None:
    got = split([request(i) for i in range(requests)], concurrency, workers)
    assert [(share, [r.index for r in part]) for share, part in got] == expected
    assert sum(share for share, _ in got) == max(concurrency, len(got))


def test_merge_orders_records_as_one_process_writes_them() -> None:
    results = [
        WorkerResult(index=0, records=[record(0), record(2)], chunks_per_read=[1, 1], stop_reason=None),
        WorkerResult(index=1, records=[record(1), record(3)], chunks_per_read=[2], stop_reason="timeout"),
    ]
    records, per_read, reason = merge(results)
    assert [r.index for r in records] == [0, 1, 2, 3]
    assert per_read == [1, 1, 2] and reason == "timeout"


def test_memory_per_stream_is_the_workers_growth_over_the_streams() -> None:
    results = [
        WorkerResult(index=0, rss_base_bytes=100, rss_peak_bytes=1100),
        WorkerResult(index=1, rss_base_bytes=100, rss_peak_bytes=2100),
    ]
    assert rss_per_stream(results, 100) == 30.0
    assert rss_per_stream(results, 0) is None


@pytest.mark.parametrize(
    ("lags", "bound", "late", "note"),
    [
        ([0.0, 0.0005], 0.001, False, None),
        ([0.0, 0.002], 0.001, True, "exceeds the bound of 1.00 ms"),
        ([0.0, 0.002], None, False, None),  # no bound configured: never late
        ([0.0, 0.004], 0.005, False, None),
    ],
)
def test_send_lateness_over_the_bound_flags_the_run(
    lags: list[float], bound: float | None, late: bool, note: str | None
) -> None:
    records = [record(i, lag) for i, lag in enumerate(lags)]
    got = client_health(
        records,
        chunks_per_read=[1],
        cpu_seconds=0.1,
        wall_seconds=1.0,
        time_scale=1.0,
        lateness_bound_s=bound,
    )
    assert got.late is late and got.lateness_bound_s == bound and got.saturated is False
    assert (note is None and not got.notes) or any(note in n for n in got.notes if note)
    assert got.dispatch_lag_max_s == pytest.approx(max(lags))


def test_a_busy_single_process_suggests_workers_and_workers_are_judged_one_by_one() -> None:
    records = [record(i) for i in range(4)]
    one = client_health(records, chunks_per_read=[1], cpu_seconds=0.95, wall_seconds=1.0, time_scale=1.0)
    assert one.saturated and any("load.workers=2" in n for n in one.notes)
    # Two workers at 60% each: 120% in all, but neither process is saturated, and no hint.
    two = client_health(
        records,
        chunks_per_read=[1],
        cpu_seconds=1.2,
        wall_seconds=1.0,
        time_scale=1.0,
        worker_cpu_seconds=[0.6, 0.6],
    )
    assert two.workers == 2 and two.worker_cpu_percent == [60.0, 60.0]
    assert two.client_cpu_percent == pytest.approx(120.0) and not two.saturated
    busy = client_health(
        records,
        chunks_per_read=[1],
        cpu_seconds=1.5,
        wall_seconds=1.0,
        time_scale=1.0,
        worker_cpu_seconds=[0.9, 0.6],
    )
    assert busy.saturated and any("busiest of 2" in n for n in busy.notes)
    assert not any("load.workers=" in n for n in busy.notes)


def test_spin_pacer_waits_for_its_clock_and_returns_early_on_interrupt() -> None:
    now = [0]

    def clock() -> int:
        now[0] += 100_000  # every read of the clock: 0.1 ms later
        return now[0]

    async def main() -> tuple[int, bool]:
        pacer = SpinPacer(clock, spin_ns=10_000_000)  # the whole wait is the yielding spin
        await pacer.until(5_000_000)
        reached = now[0]
        stopper = SpinPacer(lambda: 0, spin_ns=0)  # a clock that never moves: only an interrupt ends it
        waiting = asyncio.ensure_future(stopper.until(1_000_000_000))
        await asyncio.sleep(0.01)
        stopper.interrupt()
        await asyncio.wait_for(waiting, 5.0)
        return reached, waiting.done()

    reached, stopped = asyncio.run(main())
    assert reached >= 5_000_000 and stopped


def test_timerfd_pacer_never_fires_early_and_is_interruptible() -> None:
    async def main() -> list[int]:
        pacer = make_pacer()
        assert pacer.name == "timerfd"  # Linux: the precise timer
        early = []
        try:
            for k in range(20):
                when = time.monotonic_ns() + 200_000 * (k % 3)
                await pacer.until(when)
                early.append(when - time.monotonic_ns())
            waiting = asyncio.ensure_future(pacer.until(time.monotonic_ns() + 60_000_000_000))
            await asyncio.sleep(0)
            pacer.interrupt()
            await asyncio.wait_for(waiting, 5.0)
        finally:
            pacer.close()
        return early

    assert all(e <= 0 for e in asyncio.run(main()))
    assert make_pacer(lambda: 0).name == "sleep-spin"  # a test's clock: never a real timer


def test_tls_settings_name_the_field_of_a_bad_file(tmp_path: Path) -> None:
    from contracts.schema import LoadConfig

    (tmp_path / "junk.pem").write_text("not a certificate\n")
    with pytest.raises(LoadError, match=r"load\.ca_bundle = .*junk\.pem"):
        tls_context(LoadConfig(ca_bundle=str(tmp_path / "junk.pem")))
    with pytest.raises(LoadError, match=r"load\.client_cert = .*junk\.pem"):
        tls_context(LoadConfig(client_cert=str(tmp_path / "junk.pem")))
    assert tls_context(None).check_hostname  # the system trust store, verifying


def test_https_urls_default_to_port_443_and_other_schemes_are_refused() -> None:
    client = RawStreamClient("https://gateway.example/prefix")
    assert (client.host, client.port, client.prefix, client.tls is not None) == (
        "gateway.example",
        443,
        "/prefix",
        True,
    )
    assert RawStreamClient("http://h:8000").tls is None
    with pytest.raises(LoadError, match="http://host:port and https://host:port only"):
        RawStreamClient("ftp://h:21")


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["load.workers=0"], ["load.workers = 0", "an integer from 1 to 256"]),
        (["load.max_send_lateness_s=0"], ["load.max_send_lateness_s = 0", "seconds > 0, or null"]),
        (["load.ca_bundle=/no/such/ca.pem"], ["load.ca_bundle = '/no/such/ca.pem'", "a readable PEM file"]),
        (["load.client_key=/etc/hostname"], ["load.client_key = '/etc/hostname'", "unless load.client_cert"]),
    ],
)
def test_bad_load_settings_are_named(overrides: list[str], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_load_settings_compose_with_their_defaults() -> None:
    cfg, _ = compose(["load.workers=4", "load.max_send_lateness_s=0.0005"])
    assert (cfg.load.workers, cfg.load.max_send_lateness_s, cfg.load.ca_bundle) == (4, 0.0005, None)


def test_a_worker_message_that_arrives_in_pieces_is_read_whole() -> None:
    """The loop's watch of a pipe leaves it non-blocking (uvloop); ``recv`` must still wait for all of it."""
    import multiprocessing
    import struct
    import threading

    import uvloop

    from load.workers import _readable

    reader, writer = multiprocessing.Pipe(duplex=False)
    payload = b"x" * 300_000
    half = threading.Event()

    def write() -> None:
        fd = writer.fileno()
        os.write(fd, struct.pack("!i", len(payload)) + payload[:1000])
        half.wait(5.0)  # the rest comes only once the reader has started on the first piece,
        time.sleep(0.2)  # and late: a worker still writing (a slow writer, injected; no timing asserted)
        view = memoryview(payload)[1000:]
        while view:
            view = view[os.write(fd, view) :]

    async def main() -> bytes:
        await _readable(reader)
        half.set()
        return reader.recv_bytes()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        got = uvloop.run(main())
    finally:
        thread.join(10.0)
        reader.close()
        writer.close()
    assert got == payload


def test_constant_arrivals_are_one_interval_apart_and_poisson_is_unchanged() -> None:
    from contracts.schema import LengthConfig, WorkloadConfig
    from load.workload import plan_requests

    def wl(**kw: object) -> WorkloadConfig:
        base: dict[str, object] = dict(
            name="w", mode="open", rate=4.0, num_requests=5, warmup_requests=2,
            prompt_tokens=LengthConfig(mean=8), output_tokens=LengthConfig(mean=4),
        )  # fmt: skip
        base.update(kw)
        return WorkloadConfig(**base)  # type: ignore[arg-type]

    constant = [p.arrival_s for p in plan_requests(wl(arrivals="constant"))]
    assert constant == pytest.approx([0.25, 0.5, 0.25, 0.5, 0.75, 1.0, 1.25])  # each phase from its own 0
    poisson = plan_requests(wl())
    measured = [p.arrival_s or 0.0 for p in poisson if not p.warmup]
    gaps = [b - a for a, b in zip([0.0, *measured], measured, strict=False)]
    assert len(set(round(g, 9) for g in gaps)) > 1  # exponential gaps, not one interval
    with pytest.raises(LoadError, match="arrivals 'uniform'"):
        plan_requests(wl(arrivals="uniform"))


def test_a_bad_arrival_process_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        compose(["workloads.short.arrivals=burst"])
    assert "workloads.short.arrivals = 'burst'" in str(info.value) and "one of poisson, constant" in str(
        info.value
    )


def test_the_open_files_limit_is_raised_for_thousands_of_streams() -> None:
    import resource

    from load.client import raise_fd_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        raise_fd_limit(4096 + 256)
        got = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert got == (4096 + 256 if hard == resource.RLIM_INFINITY else min(4096 + 256, hard))
        raise_fd_limit(10)  # never lowered
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == got
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_late_sends_at_a_low_cpu_share_are_blamed_on_the_machine() -> None:
    records = [record(i, lag) for i, lag in enumerate([0.0, 0.03])]
    starved = client_health(records, chunks_per_read=[1], cpu_seconds=0.15, wall_seconds=1.0, time_scale=1.0)
    assert starved.saturated and any("waiting for the CPU" in n for n in starved.notes)
    busy = client_health(records, chunks_per_read=[1], cpu_seconds=0.7, wall_seconds=1.0, time_scale=1.0)
    assert not any("waiting for the CPU" in n for n in busy.notes)
