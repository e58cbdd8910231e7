"""Fault matrix, streams: each injected fault is one recorded request error of the right class, not a hang.

The simulator serves; :class:`tests.faults.proxy.FaultProxy` sits in front of it and breaks the third chat
completion in one way. The profile runs through the raw client (as in a sweep) and must complete with every
planned record written, exactly one of them carrying the fault's class, and the summary counting it (what
the stability gate reads). Rows of ``docs/reliability.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.conftest import profile, workload
from tests.faults.proxy import Fault, FaultProxy
from tests.integration.test_sim_server import Server

pytestmark = pytest.mark.integration

FAULTY = 2  # the third chat completion is the faulted one


@pytest.mark.parametrize(
    ("fault", "error", "detail"),
    [
        (Fault("stall", after_events=3), "timeout", "no end of stream within"),
        (Fault("silent"), "timeout", "no end of stream within"),
        (Fault("reset", after_events=3), "truncated", "connection closed mid-response"),
        (Fault("malformed", after_events=2), "malformed", "not valid JSON"),
        (Fault("status", status=429), "http_4xx", "HTTP 429"),
        (Fault("status", status=503), "http_5xx", "HTTP 503"),
        (Fault("big_chunk", after_events=2, size=1_200_000), None, None),
    ],
    ids=[
        "stall",
        "health-ok-never-streams",
        "reset-before-done",
        "malformed-json",
        "429",
        "503",
        "1.2MB-chunk",
    ],
)
def test_a_stream_fault_is_one_record_of_its_class(
    sim: Server, tmp_path: Path, fault: Fault, error: str | None, detail: str | None
) -> None:
    wl = workload(request_timeout_s=1.5)
    with FaultProxy(sim.base_url, plan=lambda n: fault if n == FAULTY else None) as proxy:
        started = time.monotonic()
        summary, records = profile(proxy.base_url, tmp_path, wl)
        elapsed = time.monotonic() - started
    assert len(proxy.log) == 1, "the fault was injected once"
    assert len(records) == wl.num_requests, "every planned request has its record"
    failed = [r for r in records if r.error is not None]
    if error is None:
        assert failed == [] and summary.completed == wl.num_requests
        return
    assert [r.error for r in failed] == [error]
    assert detail is not None and detail in (failed[0].error_detail or "")
    assert summary.errors == {error: 1} and summary.completed == wl.num_requests - 1
    assert not summary.interrupted
    assert elapsed < wl.request_timeout_s + 20, "the profile did not hang on the fault"


@pytest.mark.parametrize("kind", ["stall", "silent"])
def test_time_from_a_stall_to_the_request_error_is_within_its_timeout_plus_one_second(
    sim: Server, tmp_path: Path, kind: str
) -> None:
    wl = workload(request_timeout_s=1.0, num_requests=4, concurrency=2)
    fault = Fault("stall", after_events=4) if kind == "stall" else Fault("silent")
    with FaultProxy(sim.base_url, plan=lambda n: fault if n == 1 else None) as proxy:
        _, records = profile(proxy.base_url, tmp_path, wl)
        (entry,) = proxy.log
        gone = proxy.wait_client_gone(entry, timeout_s=10)
    assert gone is not None, "the client never dropped the stalled connection"
    detection_s = gone - entry.fault_s
    print(f"FIGURE stall-to-error {kind}: {detection_s:.3f} s (timeout {wl.request_timeout_s:g} s)")
    assert detection_s <= wl.request_timeout_s + 1.0
    assert sum(r.error == "timeout" for r in records) == 1


def test_the_simulators_own_500s_mid_profile_are_recorded_and_the_profile_completes(tmp_path: Path) -> None:
    """The simulator's --sim-error-rate (no proxy): a 5xx rate mid-profile is counted, nothing is lost."""
    from tests.faults.conftest import SIM_TIME_SCALE
    from tests.integration.test_sim_server import candidate_argv, start

    argv = candidate_argv("baseline", "--sim-time-scale", str(SIM_TIME_SCALE), "--sim-error-rate", "0.3")
    wl = workload(num_requests=12)
    with start(argv) as server:
        summary, records = profile(server.base_url, tmp_path, wl)
    assert len(records) == wl.num_requests
    errors = [r.error for r in records if r.error is not None]
    assert errors and set(errors) == {"http_5xx"}
    assert summary.errors == {"http_5xx": len(errors)}
