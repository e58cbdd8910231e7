"""Fakes for the orchestrator's seams: a supervisor with no processes and a load runner that writes files."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from contracts.errors import StartupFailure
from contracts.files import write_jsonl, write_model
from contracts.layout import RECORDS_FILE, SUMMARY_FILE
from contracts.results import (
    CensoredMedian,
    ClientHealth,
    HostProbe,
    ProfileSummary,
    RequestRecord,
    ServerMetrics,
    Stats,
    TeardownRecord,
    WatchEvent,
)
from contracts.schema import WorkloadConfig
from launch.preflight import Probes
from launch.spec import LaunchSpec
from launch.supervisor import Server
from launch.tracking import NodeProcess
from orchestrator.servers.seams import RunProfile, Seams, SupervisorLike


@dataclass
class FakeSupervisor:
    """Keeps 'processes' in a dict; fails startups by candidate name; can kill a server on demand."""

    failures: dict[str, StartupFailure] = field(default_factory=dict)
    alive: dict[int, Server] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    next_pid: int = 1000
    dead: set[int] = field(default_factory=set)

    def start(self, spec: LaunchSpec, log_path: Path) -> Server:
        self.next_pid += 1
        server = Server(spec, self.next_pid, self.next_pid, float(self.next_pid), log_path, started_at=0.0)
        self.alive[server.pid] = server
        self.started.append(spec.candidate)
        return server

    def wait_ready(self, server: Server, timeout_s: float | None = None) -> float:
        failure = self.failures.get(server.spec.candidate)
        if failure is not None:
            self.alive.pop(server.pid, None)
            raise failure
        return 0.25

    def locate(self, server: Server) -> Server:
        return server

    def check(self, server: Server) -> list[WatchEvent]:
        if server.pid in self.dead:
            self.dead.discard(server.pid)
            return [WatchEvent(at="2026-12-02T00:00:00Z", kind="died", detail="exit code -9")]
        return []

    def health(self, server: Server) -> int | str:
        return 200 if server.pid in self.alive and server.pid not in self.dead else "ConnectError"

    def teardown(self, server: Server) -> TeardownRecord:
        self.alive.pop(server.pid, None)
        return TeardownRecord(
            signal_sequence=["SIGTERM"], duration_s=0.1, survivors=[], port_free=True, gpu_released=None
        )

    def adopt(
        self,
        pid: int,
        pgid: int,
        create_time: float,
        spec: LaunchSpec,
        log_path: Path,
        *,
        followers: Sequence[NodeProcess] = (),
    ) -> Server | None:
        server = self.alive.get(pid)
        return server if server is not None and server.create_time == create_time else None


def summary(
    candidate: str,
    profile: str,
    repeat: int,
    fingerprint: str,
    *,
    n: int = 4,
    interrupted: bool = False,
    output_tps: float = 1000.0,
) -> ProfileSummary:
    stats = Stats(n=n, mean=0.5, p50=0.5, p90=0.6, p99=0.7)
    return ProfileSummary(
        candidate=candidate,
        profile=profile,
        repeat=repeat,
        fingerprint=fingerprint,
        backend="sim",
        host="sim",
        time_scale=1.0,
        started_at="2026-12-02T00:00:00Z",
        duration_s=1.0,
        num_requests=n,
        completed=n,
        failed=0,
        errors={},
        prompt_tokens=100 * n,
        output_tokens=int(output_tps),
        prompt_tps=100.0 * n,
        output_tps=output_tps,
        ttft=stats,
        first_visible=stats,
        first_visible_censored=CensoredMedian(n=n, censored=0, value_s=0.5, infinite=False),
        itl=stats,
        e2e=stats,
        client=ClientHealth(
            dispatch_lag_p50_s=0.0,
            dispatch_lag_p99_s=0.0,
            dispatch_lag_max_s=0.0,
            chunks_per_read_p99=1.0,
            client_cpu_percent=5.0,
            saturated=False,
        ),
        server=ServerMetrics(
            scrapes=3,
            preemptions=0,
            prompt_tokens=100 * n,
            generation_tokens=output_tps,
            request_success={"length": n},
            peak_waiting=0,
            peak_running=n,
            peak_kv_cache_usage=0.2,
            waiting_at_end=0,
            running_at_end=0,
            restart_detected=False,
            token_mismatch=False,
        ),
        interrupted=interrupted,
    )


def records(n: int, *, ttft_s: float = 0.5, end_s: float = 1.0) -> list[RequestRecord]:
    """``n`` measured requests that each took ``ttft_s`` to the first (visible) token and ``end_s`` in all."""
    return [
        RequestRecord(
            index=i,
            warmup=False,
            target_prompt_tokens=100,
            target_output_tokens=250,
            scheduled_s=0.0,
            sent_s=0.0,
            ttft_s=ttft_s,
            first_visible_s=ttft_s,
            end_s=end_s,
            prompt_tokens=100,
            completion_tokens=250,
            finish_reason="length",
            http_status=200,
        )
        for i in range(n)
    ]


@dataclass
class FakeLoad:
    """Writes a summary for every call; optional hooks run before writing (to kill or interrupt)."""

    calls: list[tuple[str, str, int]] = field(default_factory=list)
    before: Callable[[str, str, int], None] | None = None
    #: A candidate's speed against the baseline's (2.0: half the latency, twice the output tok/s).
    speed: dict[str, float] = field(default_factory=dict)

    def __call__(
        self,
        base_url: str,
        served_model: str,
        workload: WorkloadConfig,
        *,
        candidate: str,
        fingerprint: str,
        repeat: int,
        out_dir: Path,
        **kw: Any,
    ) -> ProfileSummary:
        key = (candidate, workload.name, repeat)
        self.calls.append(key)
        if self.before is not None:
            self.before(*key)
        on_window = kw.get("on_window")  # the measured window's edges, as the load runner calls them
        if on_window is not None:
            on_window("start")
        factor = self.speed.get(candidate, 1.0)
        result = summary(candidate, workload.name, repeat, fingerprint, output_tps=1000.0 * factor)
        if on_window is not None:
            on_window("end")
        write_model(out_dir / SUMMARY_FILE, result)
        # The summary's requests, each as its median says (the gates' latency comparisons read them).
        write_jsonl(
            out_dir / RECORDS_FILE, records(result.num_requests, ttft_s=0.5 / factor, end_s=1 / factor)
        )
        return result


def _satisfies_the_seams() -> tuple[SupervisorLike, RunProfile]:
    """The fakes type-check against the seams' Protocols (``mypy tests/unit/fakes.py``)."""
    return FakeSupervisor(), FakeLoad()


def server_transport(
    max_model_len: int = 131072, gmu: str = "0.81", dtype: str = "fp8"
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(
                200, json={"data": [{"id": "deepseek-v4-flash", "max_model_len": max_model_len}]}
            )
        if request.url.path == "/metrics":
            text = (
                "# TYPE vllm:cache_config_info gauge\n"
                f'vllm:cache_config_info{{cache_dtype="{dtype}",gpu_memory_utilization="{gmu}"}} 1.0\n'
            )
            return httpx.Response(200, text=text)
        if request.url.path == "/health":
            return httpx.Response(200)
        return httpx.Response(404)

    return httpx.MockTransport(handler)


def fake_seams(supervisor: FakeSupervisor, load: FakeLoad, messages: list[str] | None = None) -> Seams:
    log = messages if messages is not None else []
    return Seams(
        supervisor=supervisor,
        run_profile=load,
        gpu_memory=lambda spec: None,
        host_probe=lambda kind: HostProbe(driver=False, reason="test", simulated=True),
        say=log.append,
        transport=server_transport(),
        watch_interval_s=0.01,
        stop=threading.Event(),
        processes=lambda: [],
    )


def sim_probes() -> Probes:
    """doctor's probes of a simulated host: the simulator's parser, a free port, nothing else to find."""
    from launch.sim.cli import build_parser

    return Probes(
        host=lambda: HostProbe(driver=False, reason="simulated", simulated=True),
        resolve=list,
        version=lambda program: None,
        help_text=lambda program, version: "",
        sim_help=lambda: build_parser().format_help(),
        read_file=lambda path: None,
        hf_snapshot=lambda model: None,
        port_in_use=lambda host, port: False,
        environ={},
    )
