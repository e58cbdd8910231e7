"""The load runner at fleet scale, against the reference server (benchmarks/sse_server.py) on loopback.

Open-loop pacing reports its lateness; worker processes give the records one process gives; https with a
CA bundle and a client certificate; a 100K-token prompt and a 64K-token answer read in full. Nothing here
asserts a timing: only that figures exist, are consistent, and that counts are exact.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import LoadError
from contracts.files import read_jsonl
from contracts.results import RequestRecord
from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig
from tests.integration.ref_load import Server, run


def workload(**kw: Any) -> WorkloadConfig:
    base: dict[str, Any] = dict(
        name="fleet",
        concurrency=8,
        num_requests=40,
        warmup_requests=2,
        prompt_tokens=LengthConfig(kind="uniform", mean=64, min=16, max=128),
        output_tokens=LengthConfig(kind="uniform", mean=12, min=8, max=16),
        ignore_eos=True,
        seed=11,
        time_limit_s=120,
    )
    base.update(kw)
    return WorkloadConfig(**base)


def records(out: Path) -> list[RequestRecord]:
    return read_jsonl(out / "records.jsonl", RequestRecord)


def test_open_loop_reports_its_send_lateness(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "1")
    bound = 0.001
    summary = run(
        url,
        tmp_path,
        workload(mode="open", rate=400.0, concurrency=64, num_requests=200),
        load=LoadConfig(max_send_lateness_s=bound),
    )
    assert summary.completed == 200, summary.errors
    client = summary.client
    assert client.pacer == "timerfd"  # Linux
    assert client.lateness_bound_s == bound
    assert 0.0 <= client.dispatch_lag_p50_s <= client.dispatch_lag_p99_s <= client.dispatch_lag_max_s
    assert client.late is (client.dispatch_lag_p99_s > bound)
    assert any("exceeds the bound" in n for n in client.notes) is client.late
    measured = [r for r in records(tmp_path) if not r.warmup]
    # Every send left at or after its absolute time (the pacer never fires early), and the schedule is
    # the plan's arrivals: strictly increasing, about 1/rate apart on average.
    assert all(r.sent_s >= r.scheduled_s for r in measured)
    scheduled = [r.scheduled_s for r in measured]
    assert scheduled == sorted(scheduled)
    assert 0.1 < (scheduled[-1] - scheduled[0]) / (len(scheduled) - 1) * 400.0 < 10.0
    lags = sorted(r.sent_s - r.scheduled_s for r in measured)
    assert lags[-1] == pytest.approx(client.dispatch_lag_max_s)


def test_closed_loop_lateness_without_a_bound_is_never_late(ref_server: Server, tmp_path: Path) -> None:
    summary = run(
        ref_server("--interval-ms", "1"), tmp_path, workload(), load=LoadConfig(max_send_lateness_s=None)
    )
    assert summary.completed == 40
    assert summary.client.pacer is None and summary.client.late is False
    assert summary.client.lateness_bound_s is None
    assert summary.settings is not None and summary.settings.load == LoadConfig(max_send_lateness_s=None)


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_worker_processes_give_the_records_of_one_process(
    ref_server: Server, tmp_path: Path, mode: str
) -> None:
    url = ref_server("--interval-ms", "2")
    wl = workload(mode=mode, rate=200.0 if mode == "open" else None)
    one = run(url, tmp_path / "one", wl, load=LoadConfig(workers=1))
    two = run(url, tmp_path / "two", wl, load=LoadConfig(workers=2))
    first, second = records(tmp_path / "one"), records(tmp_path / "two")
    assert [r.index for r in first] == [r.index for r in second] == list(range(42))
    assert [r.warmup for r in first] == [r.warmup for r in second]
    for a, b in zip(first, second, strict=True):
        assert (a.target_prompt_tokens, a.target_output_tokens) == (
            b.target_prompt_tokens,
            b.target_output_tokens,
        )
        assert (a.prompt_tokens, a.completion_tokens, a.error) == (
            b.prompt_tokens,
            b.completion_tokens,
            b.error,
        )
        assert len(a.chunk_offsets_s) == len(b.chunk_offsets_s)
    assert one.completed == two.completed == 40
    assert (one.prompt_tokens, one.output_tokens) == (two.prompt_tokens, two.output_tokens)
    assert one.client.workers == 1 and one.client.worker_cpu_percent == []
    assert two.client.workers == 2 and len(two.client.worker_cpu_percent) == 2
    if mode == "open":
        # One clock origin: every worker's records count from the parent's t = 0, so the measured arrivals
        # keep the plan's spacing across processes.
        def offsets(rs: list[RequestRecord]) -> list[float]:
            measured = [r.scheduled_s for r in rs if not r.warmup]
            return [s - measured[0] for s in measured]

        assert offsets(second) == pytest.approx(offsets(first), abs=1e-6)
        assert all(r.sent_s >= r.scheduled_s for r in second if not r.warmup)
        assert two.client.pacer == "timerfd"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    if shutil.which("openssl") is None:
        if os.environ.get("GAUNTLET_REQUIRE_OPENSSL") == "1":  # CI installs it: a skip there hides TLS
            pytest.fail("GAUNTLET_REQUIRE_OPENSSL=1 but the openssl command is missing")
        pytest.skip("needs the openssl command")
    d = tmp_path / "pki"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "load-client")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)  # fmt: skip
        extra = ["-extfile", "san.ext"] if name == "server" else []
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "1", "-out", f"{name}.pem", *extra, cwd=d)  # fmt: skip
    return d


def test_https_round_trip_with_a_ca_bundle_and_a_client_certificate(
    ref_server: Server, tmp_path: Path, pki: Path
) -> None:
    url = ref_server(
        "--interval-ms", "2", "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
        "--tls-client-ca", str(pki / "ca.pem"),
    )  # fmt: skip
    assert url.startswith("https://")
    tls = LoadConfig(
        ca_bundle=str(pki / "ca.pem"), client_cert=str(pki / "client.pem"), client_key=str(pki / "client.key")
    )
    summary = run(url, tmp_path / "ok", workload(num_requests=12), load=tls)
    assert summary.completed == 12, summary.errors
    assert summary.prompt_mismatches == 0  # /tokenize went over TLS too
    assert summary.server is not None  # and /metrics
    two = run(
        url,
        tmp_path / "workers",
        workload(num_requests=12),
        load=LoadConfig(**{**tls.__dict__, "workers": 2}),
    )
    assert two.completed == 12 and two.client.workers == 2

    # Without the client certificate the server refuses every connection: recorded, not raised.
    no_cert = run(url, tmp_path / "no_cert", workload(num_requests=4, warmup_requests=0),
                  load=LoadConfig(ca_bundle=str(pki / "ca.pem")))  # fmt: skip
    assert no_cert.completed == 0 and set(no_cert.errors) <= {"connect", "truncated"}


def test_https_without_the_ca_fails_verification(ref_server: Server, tmp_path: Path, pki: Path) -> None:
    url = ref_server(
        "--interval-ms", "2", "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")
    )
    summary = run(url, tmp_path, workload(num_requests=4, warmup_requests=0), load=LoadConfig())
    assert summary.completed == 0 and summary.errors == {"connect": 4}
    details = [r.error_detail or "" for r in records(tmp_path)]
    assert all("CERTIFICATE_VERIFY_FAILED" in d for d in details), details


def test_a_bad_ca_bundle_is_a_load_error_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "nope.pem"
    with pytest.raises(LoadError, match=r"load\.ca_bundle = .*nope\.pem"):
        run("https://127.0.0.1:9", tmp_path / "out", workload(), load=LoadConfig(ca_bundle=str(bad)))


def test_100k_token_prompt_and_64k_token_streamed_answer(ref_server: Server, tmp_path: Path) -> None:
    url = ref_server("--interval-ms", "0.02", "--max-model-len", "200000", "--no-role-chunk")
    wl = workload(
        concurrency=1,
        num_requests=1,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=100_000),
        output_tokens=LengthConfig(kind="fixed", mean=65_536),
        time_limit_s=300,
        request_timeout_s=300,
    )
    summary = run(url, tmp_path, wl)
    assert summary.completed == 1, (summary.errors, summary.notes)
    (record,) = records(tmp_path)
    assert record.completion_tokens == 65_536
    assert len(record.chunk_offsets_s) == 65_536  # every chunk read and timed, none merged or lost
    assert record.chunk_offsets_s == sorted(record.chunk_offsets_s)
    assert record.prompt_tokens is not None and abs(record.prompt_tokens - 100_000) <= 2_000
    assert summary.prompt_mismatches == 0
    assert record.finish_reason == "length"
