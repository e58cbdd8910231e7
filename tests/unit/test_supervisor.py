"""The supervisor against a fake process table, a fake clock and httpx.MockTransport: nothing starts."""

from __future__ import annotations

import os
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.errors import LaunchError, PortInUseError, StartupFailure, TeardownError
from contracts.results import GpuMemory
from launch.command import INHERITED_ENV, child_env, resolve_argv
from launch.nodecheck import NodeChecker, NodeResult
from launch.nodes import NodeLauncher
from launch.process import ProcInfo, Spawner
from launch.spec import LaunchSpec
from launch.supervisor import Server, Supervisor

ROOT_PID = 100


def make_spec(**changes: object) -> LaunchSpec:
    spec = LaunchSpec(
        candidate="cand", host="local", host_kind="cpu",
        argv=("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"),
        env={"VLLM_CPU_KVCACHE_SPACE": "1"}, pass_env=("HF_TOKEN",), config_yaml="", bind_host="127.0.0.1",
        port=8123, served_model_name="tiny", max_model_len=128, startup_timeout_s=300.0,
        shutdown_grace_s=20.0, gpu_release_timeout_s=30.0, time_scale=1.0,
    )  # fmt: skip
    return replace(spec, **changes)  # type: ignore[arg-type]


class FakeClock:
    """Monotonic time that moves only when the code under test sleeps; sleeping runs the fake OS."""

    def __init__(self, system: FakeSystem) -> None:
        self.t = 1000.0
        self.system = system
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        self.system.tick(self.t)


@dataclass
class FakeProc:
    pid: int
    parent: int
    pgid: int
    name: str
    create_time: float
    on_term: str = "die"  # die | ignore | die-alone (the root dies but leaves its children orphaned)
    on_kill: str = "die"  # die | ignore (uninterruptible sleep) | exits-after-N (the kernel takes N s)
    alive: bool = True
    exit_code: int | None = None
    dies_at: float | None = None


@dataclass
class Scenario:
    """What the fake server does after it is spawned (times relative to the spawn)."""

    ready_after: float | None = 3.0  # /health 200 and the model listed from then on
    exits_after: float | None = None
    exit_code: int = 1
    log: Sequence[str] = ()
    listed_model: str = "tiny"
    children: Sequence[tuple[str, str, str]] = (("EngineCore", "die", "die"), ("Worker", "die", "die"))
    root_on_term: str = "die"
    root_on_kill: str = "die"


@dataclass
class FakeChild:
    pid: int
    system: FakeSystem

    def poll(self) -> int | None:
        proc = self.system.procs[self.pid]
        return None if proc.alive else proc.exit_code


@dataclass
class FakeSystem:
    """A process table, a port table, a /health endpoint and a spawner, all driven by the fake clock."""

    scenario: Scenario = field(default_factory=Scenario)
    procs: dict[int, FakeProc] = field(default_factory=dict)
    signals: list[tuple[str, int, str]] = field(default_factory=list)
    spawned: list[dict[str, object]] = field(default_factory=list)
    #: The wall clock at boot as the process table derives it; a clock step (NTP, a resumed VM) moves it.
    boot_epoch: float = 1_780_000_000.0
    foreign_listener: ProcInfo | None = None  # another program holding the port
    restarted: bool = False  # the foreign listener is a restarted server answering /health
    health_override: int | None = None
    health_silent: bool = False  # /health never answers (a SIGSTOPped or wedged server): a read timeout
    now: float = 1000.0
    spawn_time: float = 0.0
    next_pid: int = ROOT_PID

    # ---- Spawner
    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        autogroup_nice: int | None = None,
    ) -> FakeChild:
        self.spawned.append(
            {"argv": list(argv), "env": dict(env), "cwd": cwd, "log_path": log_path, "nice": autogroup_nice}
        )
        self.spawn_time = self.now
        root = self._new(0, "api_server", self.scenario.root_on_term, self.scenario.root_on_kill)
        parent = root.pid
        for name, on_term, on_kill in self.scenario.children:
            parent = self._new(parent, name, on_term, on_kill, pgid=root.pid).pid
        if self.scenario.exits_after is not None:
            root.dies_at = self.now + self.scenario.exits_after
        with log_path.open("a") as log:
            log.writelines(line + "\n" for line in self.scenario.log)
        return FakeChild(root.pid, self)

    def _new(self, parent: int, name: str, on_term: str, on_kill: str, pgid: int | None = None) -> FakeProc:
        pid = self.next_pid
        self.next_pid += 1
        proc = FakeProc(pid, parent, pgid or pid, name, 5000.0 + pid, on_term, on_kill)
        self.procs[pid] = proc
        return proc

    def tick(self, now: float) -> None:
        self.now = now
        for proc in self.procs.values():
            if proc.alive and proc.dies_at is not None and now >= proc.dies_at:
                self._die(proc, self.scenario.exit_code)

    def _die(self, proc: FakeProc, code: int) -> None:
        proc.alive = False
        proc.exit_code = code
        for other in self.procs.values():
            if other.parent == proc.pid:
                other.parent = 1  # orphans are re-parented, but keep their process group

    # ---- Processes
    def info(self, pid: int) -> ProcInfo | None:
        proc = self.procs.get(pid)
        if proc is None or not proc.alive:
            return None
        state = "disk-sleep" if proc.on_kill != "die" else "sleeping"
        return ProcInfo(
            pid, proc.create_time, (proc.name,), wall_start=self.boot_epoch + proc.create_time, state=state
        )

    def pgid(self, pid: int) -> int | None:
        proc = self.procs.get(pid)
        return proc.pgid if proc is not None and proc.alive else None

    def descendants(self, pid: int) -> list[ProcInfo]:
        out: list[ProcInfo] = []
        frontier = [pid]
        while frontier:
            parent = frontier.pop()
            for proc in self.procs.values():
                if proc.parent == parent and proc.alive:
                    out.append(ProcInfo(proc.pid, proc.create_time, (proc.name,)))
                    frontier.append(proc.pid)
        return out

    def group_members(self, pgid: int) -> list[ProcInfo]:
        return [
            ProcInfo(p.pid, p.create_time, (p.name,))
            for p in self.procs.values()
            if p.alive and p.pgid == pgid
        ]

    def signal_group(self, pgid: int, sig: signal.Signals) -> bool:
        members = [p for p in self.procs.values() if p.alive and p.pgid == pgid]
        self.signals.append(("group", pgid, sig.name))
        for proc in members:
            self._deliver(proc, sig)
        return bool(members)

    def signal(self, pid: int, sig: signal.Signals) -> bool:
        proc = self.procs.get(pid)
        self.signals.append(("pid", pid, sig.name))
        if proc is None or not proc.alive:
            return False
        self._deliver(proc, sig)
        return True

    def _deliver(self, proc: FakeProc, sig: signal.Signals) -> None:
        if sig == signal.SIGKILL:
            if proc.on_kill == "die":
                self._die(proc, -9)
            elif proc.on_kill.startswith("exits-after-") and proc.dies_at is None:
                proc.dies_at = self.now + float(proc.on_kill.removeprefix("exits-after-"))
            return
        if proc.on_term == "ignore":
            return
        if proc.on_term == "die" and proc.pid == ROOT_PID:
            for child in self.descendants(proc.pid):  # vLLM's API server takes its children down on SIGTERM
                if self.procs[child.pid].on_term != "ignore":
                    self._die(self.procs[child.pid], -15)
        self._die(proc, -15)

    def port_in_use(self, host: str, port: int) -> bool:
        root = self.procs.get(ROOT_PID)
        return self.foreign_listener is not None or (root is not None and root.alive)

    def port_holders(self, port: int) -> list[ProcInfo]:
        if self.foreign_listener is not None:
            return [self.foreign_listener]
        info = self.info(ROOT_PID)
        return [info] if info is not None else []

    # ---- HTTP
    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.restarted:
            return httpx.Response(200)
        root = self.procs.get(ROOT_PID)
        ready_after = self.scenario.ready_after
        if root is None or not root.alive or ready_after is None or self.now < self.spawn_time + ready_after:
            raise httpx.ConnectError("connection refused", request=request)
        if self.health_silent and request.url.path == "/health":
            raise httpx.ReadTimeout("timed out", request=request)
        if self.health_override is not None and request.url.path == "/health":
            return httpx.Response(self.health_override)
        if request.url.path == "/health":
            return httpx.Response(200)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": self.scenario.listed_model}]})
        return httpx.Response(404)


@dataclass
class FakeGpu:
    """GPU snapshots in sequence; the last one repeats."""

    readings: list[list[GpuMemory] | None]
    reason: str | None = None
    calls: int = 0

    def snapshot(self) -> list[GpuMemory] | None:
        reading = self.readings[min(self.calls, len(self.readings) - 1)]
        self.calls += 1
        return reading


def gpu(used: float) -> list[GpuMemory]:
    return [GpuMemory(index=0, name="H100", total_gib=80.0, used_gib=used, free_gib=80.0 - used)]


NO_DRIVER = FakeGpu([None], reason="no NVIDIA driver (NVML Shared Library Not Found)")


class NoNodesLeft:
    """The per-node check of a fake host: every node clean, no SLURM step (launch.nodecheck)."""

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
        return []

    def steps_left(self, port: int, nodes: int) -> list[str]:
        return []

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        return []


def make(
    scenario: Scenario | None = None,
    *,
    gpu_probe: FakeGpu | None = None,
    environ: dict[str, str] | None = None,
    system: FakeSystem | None = None,
    spawner: Spawner | None = None,
    rpc_root: Path | None = None,
    node_checker: Callable[[Sequence[tuple[int, str, str]]], NodeChecker] | None = None,
    nodes: NodeLauncher | None = None,
    ray_stop: Callable[[LaunchSpec, Sequence[tuple[int, str, str]]], list[str]] | None = None,
) -> tuple[Supervisor, FakeSystem, FakeClock]:
    system = system or FakeSystem(scenario or Scenario())
    clock = FakeClock(system)
    clock.t = system.now
    sup = Supervisor(
        spawner=spawner or system,
        processes=system,
        clock=clock,
        sleep=clock.sleep,
        wall_clock=lambda: 1_700_000_000.0 + clock.t,
        now=lambda: datetime(2026, 12, 2, tzinfo=UTC),
        transport=httpx.MockTransport(system.handle),
        gpu=gpu_probe or FakeGpu([None], reason="no NVIDIA driver (test)"),
        project_root=Path("/srv/gauntlet"),
        environ=environ
        if environ is not None
        else {"PATH": "/usr/bin", "HOME": "/root", "HF_TOKEN": "s3cret"},
        rpc_root=rpc_root,  # None: no IPC socket directory (the tests below that set one use tmp_path)
        node_checker=node_checker or (lambda nodes: NoNodesLeft()),
        nodes=nodes,
        ray_stop=ray_stop or (lambda spec, nodes: []),
    )
    return sup, system, clock


# ------------------------------------------------------------------------------------------------ start


def test_start_spawns_in_the_project_root_with_a_minimal_environment(tmp_path: Path) -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "HF_TOKEN": "s3cret",
        "AWS_SECRET": "x",
        "PYTHONPATH": "y",
    }
    sup, system, _ = make(environ=environ)
    server = sup.start(make_spec(), tmp_path / "server.log")
    assert (server.pid, server.pgid, server.create_time) == (ROOT_PID, ROOT_PID, 5000.0 + ROOT_PID)
    spawned = system.spawned[0]
    assert spawned["argv"] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    assert spawned["cwd"] == Path("/srv/gauntlet")
    assert spawned["env"] == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_TOKEN": "s3cret",
        "GAUNTLET_SERVER_PORT": "8123",  # the tag each node's check finds the server's processes by
    }
    log = (tmp_path / "server.log").read_text()
    assert "starting cand:" in log and "s3cret" not in log


def test_child_env_precedence_and_missing_pass_env() -> None:
    spec = make_spec(env={"PATH": "/opt/bin", "A": "1"}, pass_env=("HF_TOKEN", "MISSING"))
    env = child_env(spec, {"PATH": "/usr/bin", "HF_TOKEN": "t", "LANG": "C.UTF-8", "RANDOM": "r"})
    assert env == {"PATH": "/opt/bin", "LANG": "C.UTF-8", "A": "1", "HF_TOKEN": "t"}
    assert "PATH" in INHERITED_ENV and "PYTHONPATH" not in INHERITED_ENV


def test_port_in_use_is_refused_naming_the_holder(tmp_path: Path) -> None:
    sup, system, _ = make()
    system.foreign_listener = ProcInfo(4242, 1.0, ("nginx", "-g", "daemon off;"))
    with pytest.raises(PortInUseError) as info:
        sup.start(make_spec(), tmp_path / "server.log")
    assert "pid 4242 (nginx -g daemon off;)" in str(info.value)
    assert "8123" in str(info.value)
    assert system.spawned == []


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("python", sys.executable),
        (sys.executable, sys.executable),  # absolute paths are kept
        ("tests/unit/test_supervisor.py", str(Path(__file__).resolve())),  # relative to the project root
    ],
)
def test_resolve_argv(argv0: str, expected: str) -> None:
    root = Path(__file__).resolve().parents[2]
    assert resolve_argv([argv0, "--x"], root) == [expected, "--x"]


def test_resolve_argv_keeps_venv_symlinks_and_refuses_missing_programs(tmp_path: Path) -> None:
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    assert resolve_argv(["venv/bin/python"], tmp_path) == [str(tmp_path / "venv" / "bin" / "python")]
    with pytest.raises(LaunchError, match="make vllm-cpu"):
        resolve_argv([".venv-vllm/bin/python"], tmp_path)
    with pytest.raises(LaunchError, match="not on PATH"):
        resolve_argv(["no-such-program-gauntlet"], tmp_path)


# ------------------------------------------------------------------------------------------------ ready


# (the server is ready after, seen ready by): at most 5% or 50 ms late, asked every 0.5 s at most. With
# the fixed 0.5 s polls before, a 0.3 s start was seen at 0.5 s, a 1.2 s one at 1.5 s, a 2.2 s one at 2.5 s.
@pytest.mark.parametrize(
    ("ready_after", "seen_by"),
    [(0.3, 0.35), (1.2, 1.25), (2.2, 2.32), (3.0, 3.15), (12.0, 12.5), (60.0, 60.5)],
)
def test_ready_when_health_and_model_answer_reports_the_time(
    tmp_path: Path, ready_after: float, seen_by: float
) -> None:
    sup, _, clock = make(Scenario(ready_after=ready_after))
    server = sup.start(make_spec(), tmp_path / "server.log")
    ready_s = sup.wait_ready(server)
    assert ready_after <= ready_s <= seen_by
    assert min(clock.slept) >= 0.05 and max(clock.slept) <= 0.5
    assert len(clock.slept) <= 2 * ready_after + 70  # a minute's start: 170 polls, not one per 50 ms


def test_launch_returns_a_success_record(tmp_path: Path) -> None:
    sup, _, _ = make(Scenario(ready_after=1.0))
    server, record = sup.launch(make_spec(), tmp_path / "server.log")
    assert server is not None and record.ok and record.time_to_ready_s == pytest.approx(1.0, abs=0.5)


@pytest.mark.parametrize(
    ("log", "exit_code", "kind", "quoted"),
    [
        (["usage: api_server.py [-h]", "api_server.py: error: unrecognized arguments: --bogus"], 2,
         "bad-args", "api_server.py: error: unrecognized arguments: --bogus"),
        (["RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs.",
          "RuntimeError: Engine core initialization failed. See root cause above."], 1, "incompatible",
         "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs."),
        (["Killed"], -9, "crashed", None),
    ],
)  # fmt: skip
def test_exit_before_ready_is_classified_at_once_not_at_the_deadline(
    tmp_path: Path, log: list[str], exit_code: int, kind: str, quoted: str | None
) -> None:
    sup, system, clock = make(Scenario(ready_after=None, exits_after=2.0, exit_code=exit_code, log=log))
    start = clock.t
    server, record = sup.launch(make_spec(), tmp_path / "server.log")
    assert server is None
    assert (record.ok, record.kind, record.exit_code, record.matched_line) == (False, kind, exit_code, quoted)
    assert record.evidence[-1] == log[-1]
    assert clock.t - start < 3.0  # 2 s to exit + one poll, not the 300 s deadline
    assert not any(p.alive for p in system.procs.values())  # the orphaned children were torn down too


def test_wait_ready_raises_startup_failure_with_evidence(tmp_path: Path) -> None:
    log = ["(EngineCore pid=7) ERROR 12-02 16:27:44 [core.py:1510] ValueError: No available memory for the "
           "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."]  # fmt: skip
    sup, _, _ = make(Scenario(ready_after=None, exits_after=5.0, log=log))
    server = sup.start(make_spec(), tmp_path / "server.log")
    with pytest.raises(StartupFailure) as info:
        sup.wait_ready(server)
    failure = info.value
    assert failure.kind == "out-of-memory"
    assert failure.matched_line is not None and failure.matched_line.startswith(
        "ValueError: No available memory"
    )
    assert failure.elapsed_s == pytest.approx(5.0, abs=0.6)
    assert "out-of-memory" in str(failure) and "server.log" in str(failure)
    assert failure.hint


@pytest.mark.parametrize(
    "scenario",
    [
        Scenario(ready_after=None),  # never answers
        Scenario(ready_after=1.0, listed_model="another-model"),  # answers, but serves something else
    ],
)
def test_never_ready_is_a_timeout_and_the_server_is_torn_down(tmp_path: Path, scenario: Scenario) -> None:
    sup, system, clock = make(scenario)
    start = clock.t
    server, record = sup.launch(make_spec(startup_timeout_s=60.0), tmp_path / "server.log")
    assert server is None and record.kind == "timeout" and record.exit_code is None
    assert 60.0 <= clock.t - start < 61.0 + 20.0
    assert ("group", ROOT_PID, "SIGTERM") in system.signals
    assert not any(p.alive for p in system.procs.values())
    assert sup.last_teardown is not None and sup.last_teardown.signal_sequence == ["SIGTERM"]


def test_an_explicit_timeout_overrides_the_spec(tmp_path: Path) -> None:
    sup, _, clock = make(Scenario(ready_after=None))
    server = sup.start(make_spec(), tmp_path / "server.log")
    start = clock.t
    with pytest.raises(StartupFailure, match="did not become ready within 10 s"):
        sup.wait_ready(server, timeout_s=10.0)
    assert clock.t - start < 11.0


# ------------------------------------------------------------------------------------------------ watch


def test_check_reports_transitions_once_with_utc_times(tmp_path: Path) -> None:
    sup, system, clock = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    assert sup.check(server) == []
    system.health_override = 503
    events = sup.check(server)
    assert [(e.kind, e.at) for e in events] == [("unhealthy", "2026-12-02T00:00:00.000+00:00")]
    assert "503" in events[0].detail
    assert sup.check(server) == []  # still unhealthy: nothing new
    system.health_override = None
    assert [e.kind for e in sup.check(server)] == ["recovered"]
    system.procs[ROOT_PID].dies_at = clock.t
    clock.sleep(0.1)
    died = sup.check(server)
    assert [e.kind for e in died] == ["died"] and "code 1" in died[0].detail
    assert sup.check(server) == []


def test_a_death_under_load_names_the_workers_signal_from_the_log(tmp_path: Path) -> None:
    """vLLM's API server exited 0 after its worker died with SIGILL: "exited with code 0" alone misleads."""
    line = "ERROR [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: -4), x"
    sup, system, clock = make(Scenario(ready_after=0.0, exit_code=0, log=[line]))
    server = sup.start(make_spec(), tmp_path / "server.log")
    assert sup.check(server) == []
    system.procs[ROOT_PID].dies_at = clock.t
    clock.sleep(0.1)
    (died,) = sup.check(server)
    assert died.detail.startswith(
        f"server pid {ROOT_PID} exited with code 0; its log: VllmWorker-0 died by SIGILL"
    )


def test_a_live_server_whose_health_goes_unanswered_for_hung_after_s_is_hung_and_killed_without_grace(
    tmp_path: Path,
) -> None:
    sup, system, clock = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(shutdown_grace_s=20.0), tmp_path / "server.log")
    assert sup.check(server) == []
    system.health_silent = True  # SIGSTOP: the kernel still accepts, nobody answers
    first = sup.check(server)
    assert [e.kind for e in first] == ["unhealthy"] and "ReadTimeout" in first[0].detail
    clock.sleep(6.0)  # one watch interval + one probe timeout later: still under hung_after_s
    assert sup.check(server) == []
    clock.sleep(6.0)
    hung = sup.check(server)
    assert [e.kind for e in hung] == ["hung"]
    assert f"pid {server.pid} is alive" in hung[0].detail and "not answered for 12.0 s" in hung[0].detail
    assert sup.is_hung(server)
    assert sup.check(server) == []  # nothing more is asked of a hung server
    system.signals.clear()
    record = sup.teardown(server)
    assert record.signal_sequence == ["SIGKILL"]  # a stopped process cannot act on SIGTERM: no grace
    assert not [s for s in system.signals if s[2] == "SIGTERM"]
    assert 20.0 not in clock.slept and record.survivors == []
    assert any("no grace period" in note for note in record.notes)


@pytest.mark.parametrize(
    ("answers", "kinds"),
    [
        ([503] * 8, ["unhealthy"]),  # an answer, however bad, is not a hang
        (["silent", "silent", 200, "silent", "silent"], ["unhealthy", "recovered", "unhealthy"]),
        (["silent"] * 3, ["unhealthy", "hung"]),
    ],
    ids=["503-for-a-minute", "silence-broken-by-an-answer", "silence"],
)
def test_only_unbroken_silence_for_hung_after_s_is_a_hang(
    tmp_path: Path, answers: list[int | str], kinds: list[str]
) -> None:
    sup, system, clock = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    seen: list[str] = []
    for answer in answers:
        system.health_silent = answer == "silent"
        system.health_override = answer if isinstance(answer, int) and answer != 200 else None
        seen += [e.kind for e in sup.check(server)]
        clock.sleep(6.0)
    assert seen == kinds


def test_check_reports_a_restart_when_another_server_answers_on_the_port(tmp_path: Path) -> None:
    sup, system, _ = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    system.procs[ROOT_PID].alive = False  # gone, yet the port answers: someone restarted it
    system.procs[ROOT_PID].exit_code = -9
    system.foreign_listener = ProcInfo(777, 2.0, ("vllm", "serve"))
    system.restarted = True
    events = sup.check(server)
    assert [e.kind for e in events] == ["died", "restarted"]
    assert "pid 777 (vllm serve)" in events[1].detail


def test_a_reused_pid_counts_as_dead(tmp_path: Path) -> None:
    sup, _, _ = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    stale = replace(server, create_time=server.create_time - 100.0)  # the journal's process, not this one
    # the pid now belongs to another process, and whatever answers on the port is a restart
    assert [e.kind for e in sup.check(stale)] == ["died", "restarted"]
    assert sup.check(server) == []


# ------------------------------------------------------------------------------------------------ teardown


def test_teardown_cooperative_server_needs_only_sigterm(tmp_path: Path) -> None:
    sup, system, _ = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    record = sup.teardown(server)
    assert record.signal_sequence == ["SIGTERM"]
    assert record.survivors == [] and record.port_free
    assert record.gpu_released is None  # no driver: recorded, not checked
    assert record.duration_s < 1.0
    assert not any(p.alive for p in system.procs.values())
    assert sup.notes == ["GPU checks skipped: no NVIDIA driver (test)"]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path: a Unix socket's path is at most 107 bytes, and pytest-xdist's
    tmp_path with the IPC directory's name below it is longer."""
    with tempfile.TemporaryDirectory(prefix="g") as tmp:
        yield Path(tmp)


def _sockets(directory: Path, count: int) -> list[socket.socket]:
    """Bind ``count`` Unix sockets in ``directory``, as vLLM's ZMQ IPC does (the files stay after close)."""
    bound = []
    for k in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(directory / f"s{k}"))
        bound.append(sock)
    return bound


def test_each_server_gets_its_own_ipc_directory_emptied_at_teardown(tmp_path: Path, short_tmp: Path) -> None:
    """vLLM leaves its ZMQ IPC sockets ($VLLM_RPC_BASE_PATH/<uuid>) behind: 18 hours of tests left 2,950 in
    /tmp. The server gets a directory of its own; teardown removes the sockets and the directory."""
    sup, system, _ = make(Scenario(ready_after=0.0), rpc_root=short_tmp / "tmp")
    server = sup.start(make_spec(), tmp_path / "server.log")
    rpc = short_tmp / "tmp" / f"gauntlet-rpc-{os.getuid()}-8123"
    assert system.spawned[0]["env"]["VLLM_RPC_BASE_PATH"] == str(rpc)
    assert rpc.is_dir() and stat.S_IMODE(rpc.stat().st_mode) == 0o700
    assert f"VLLM_RPC_BASE_PATH={rpc}" in (tmp_path / "server.log").read_text()
    for sock in _sockets(rpc, 2):
        sock.close()
    record = sup.teardown(server)
    assert record.survivors == [] and not rpc.exists()
    assert f"removed 2 IPC socket(s) the server left in {rpc}" in record.notes


def test_sockets_an_earlier_server_left_on_the_port_are_removed_before_the_start(
    tmp_path: Path, short_tmp: Path
) -> None:
    """A server on this port that something else stopped (kill, reboot) left its sockets: the port is free,
    so they are stale; the new server starts with an empty directory and the run record says so."""
    rpc = short_tmp / f"gauntlet-rpc-{os.getuid()}-8123"
    rpc.mkdir()
    for sock in _sockets(rpc, 3):
        sock.close()
    sup, _, _ = make(Scenario(ready_after=0.0), rpc_root=short_tmp)
    sup.start(make_spec(), tmp_path / "server.log")
    assert rpc.is_dir() and list(rpc.iterdir()) == []
    assert f"removed 3 IPC socket(s) an earlier server on port 8123 left in {rpc}" in sup.notes


def test_an_ipc_directory_with_other_files_is_kept_and_said(tmp_path: Path, short_tmp: Path) -> None:
    sup, _, _ = make(Scenario(ready_after=0.0), rpc_root=short_tmp)
    server = sup.start(make_spec(), tmp_path / "server.log")
    rpc = short_tmp / f"gauntlet-rpc-{os.getuid()}-8123"
    (rpc / "notes.txt").write_text("not a socket")
    _sockets(rpc, 1)[0].close()
    record = sup.teardown(server)
    assert [p.name for p in rpc.iterdir()] == ["notes.txt"]  # only the socket went
    assert record.notes[-1].startswith(f"{rpc} kept:") and record.survivors == []


def test_what_the_start_could_not_clear_from_the_ipc_directory_is_said_once(
    tmp_path: Path, short_tmp: Path
) -> None:
    rpc = short_tmp / f"gauntlet-rpc-{os.getuid()}-8123"
    rpc.mkdir()
    (rpc / "notes.txt").write_text("not a socket")
    sup, system, _ = make(Scenario(ready_after=0.0), rpc_root=short_tmp)
    for _ in range(2):
        sup.teardown(sup.start(make_spec(), tmp_path / "server.log"))
    assert system.spawned[1]["env"]["VLLM_RPC_BASE_PATH"] == str(rpc)  # used all the same
    said = [n for n in sup.notes if n.startswith("before starting on port 8123:")]
    assert said == [f"before starting on port 8123: {rpc} kept: Directory not empty"]


def test_a_server_that_cannot_be_spawned_leaves_no_ipc_directory(tmp_path: Path, short_tmp: Path) -> None:
    def spawner(argv: Sequence[str], **kw: Any) -> FakeChild:
        raise PermissionError(13, "Permission denied")

    sup, _, _ = make(Scenario(ready_after=0.0), spawner=spawner, rpc_root=short_tmp)
    with pytest.raises(LaunchError, match=r"could not start .*Permission denied"):
        sup.start(make_spec(), tmp_path / "server.log")
    assert list(short_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "where", [{"env": {"VLLM_RPC_BASE_PATH": "/srv/ipc"}}, {"pass_env": ("VLLM_RPC_BASE_PATH",)}]
)
def test_a_users_own_ipc_directory_is_neither_replaced_nor_emptied(
    tmp_path: Path, where: dict[str, object]
) -> None:
    environ = {"PATH": "/usr/bin", "VLLM_RPC_BASE_PATH": "/srv/ipc"}
    sup, system, _ = make(Scenario(ready_after=0.0), rpc_root=tmp_path, environ=environ)
    server = sup.start(make_spec(**where), tmp_path / "server.log")
    assert system.spawned[0]["env"]["VLLM_RPC_BASE_PATH"] == "/srv/ipc"
    assert list(tmp_path.glob("gauntlet-rpc-*")) == []
    assert not any("IPC" in n for n in sup.teardown(server).notes)


def test_an_ipc_directory_that_cannot_be_created_leaves_vllms_default_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    sup, system, _ = make(Scenario(ready_after=0.0), rpc_root=tmp_path / "file")  # not a directory
    record = sup.teardown(sup.start(make_spec(), tmp_path / "server.log"))
    assert "VLLM_RPC_BASE_PATH" not in system.spawned[0]["env"] and record.notes == []
    assert any(n.startswith("VLLM_RPC_BASE_PATH left to vLLM: could not create") for n in sup.notes)


@pytest.mark.parametrize(
    ("root", "children"),
    [
        # everything ignores SIGTERM
        ("ignore", (("EngineCore", "ignore", "die"), ("Worker", "ignore", "die"))),
        # the API server exits, but its EngineCore and worker ignore SIGTERM and are orphaned (re-parented)
        ("die-alone", (("EngineCore", "ignore", "die"), ("Worker", "ignore", "die"))),
    ],
)
def test_teardown_escalates_to_sigkill_of_every_descendant_after_the_grace(
    tmp_path: Path, root: str, children: tuple[tuple[str, str, str], ...]
) -> None:
    sup, system, clock = make(Scenario(ready_after=0.0, root_on_term=root, children=children))
    server = sup.start(make_spec(shutdown_grace_s=20.0), tmp_path / "server.log")
    start = clock.t
    record = sup.teardown(server)
    assert record.signal_sequence == ["SIGTERM", "SIGKILL"]
    assert record.survivors == [] and record.port_free
    assert 20.0 <= clock.t - start <= 21.0  # waited the grace period by the injected clock, not longer
    killed = {pid for kind, pid, sig in system.signals if kind == "pid" and sig == "SIGKILL"}
    assert killed >= {ROOT_PID + 1, ROOT_PID + 2}  # every descendant by pid, even re-parented ones
    assert ("group", ROOT_PID, "SIGKILL") in system.signals
    assert not any(p.alive for p in system.procs.values())
    assert any("outlived SIGTERM" in note for note in record.notes)


def test_teardown_raises_with_the_record_when_a_process_survives_sigkill(tmp_path: Path) -> None:
    children = (("EngineCore", "ignore", "ignore"),)  # uninterruptible (D state)
    sup, _, _ = make(Scenario(ready_after=0.0, children=children))
    server = sup.start(make_spec(shutdown_grace_s=2.0), tmp_path / "server.log")
    with pytest.raises(TeardownError) as info:
        sup.teardown(server)
    assert info.value.record.survivors == [ROOT_PID + 1]
    assert info.value.record.signal_sequence == ["SIGTERM", "SIGKILL"]
    assert "pid 101 (EngineCore), disk-sleep 60 s after SIGKILL" in str(info.value)


def test_a_killed_worker_the_kernel_takes_seconds_to_free_is_waited_for_not_reported_as_a_survivor(
    tmp_path: Path,
) -> None:
    """CI saw a vLLM CPU worker still in the process table 10 s after SIGKILL on a loaded host (its memory
    being freed); a GPU process's device memory goes back through the driver just as slowly."""
    children = (("EngineCore", "ignore", "exits-after-25"), ("VLLM::Worker" + " " * 40, "ignore", "die"))
    sup, _, clock = make(Scenario(ready_after=0.0, children=children))
    server = sup.start(make_spec(shutdown_grace_s=2.0), tmp_path / "server.log")
    start = clock.t
    record = sup.teardown(server)
    assert record.survivors == [] and record.signal_sequence == ["SIGTERM", "SIGKILL"]
    assert 27.0 <= clock.t - start <= 28.0  # the grace, then until the kernel removed it: not the full minute
    assert any(n.startswith("the tree took 25.") and "to go after SIGKILL" in n for n in record.notes)


def test_a_survivors_command_line_is_shown_without_setproctitles_padding() -> None:
    assert ProcInfo(7, 1.0, ("VLLM::Worker" + " " * 100,)).describe() == "pid 7 (VLLM::Worker)"


def test_teardown_raises_when_the_port_stays_taken(tmp_path: Path) -> None:
    sup, system, _ = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    system.foreign_listener = ProcInfo(4242, 1.0, ("squatter",))
    with pytest.raises(TeardownError, match="port 8123 still taken by pid 4242") as info:
        sup.teardown(server)
    assert info.value.record.port_free is False and info.value.record.survivors == []


def test_teardown_of_an_already_dead_server_sends_nothing(tmp_path: Path) -> None:
    sup, system, clock = make(Scenario(ready_after=None, exits_after=1.0, children=()))
    server = sup.start(make_spec(), tmp_path / "server.log")
    clock.sleep(2.0)
    record = sup.teardown(server)
    assert record.signal_sequence == [] and record.survivors == []
    assert system.signals == []


@pytest.mark.parametrize(
    ("readings", "released", "note"),
    [
        ([gpu(0.5), gpu(40.0), gpu(20.0), gpu(0.6)], True, None),  # back within tolerance after two polls
        ([gpu(0.5), gpu(40.0)], False, "GPU 0: 40.00 GiB used, 0.50 before"),  # never released
    ],
)
def test_teardown_polls_gpu_memory_back_to_the_pre_launch_level(
    tmp_path: Path, readings: list[list[GpuMemory] | None], released: bool, note: str | None
) -> None:
    probe = FakeGpu(list(readings))
    sup, _, clock = make(Scenario(ready_after=0.0), gpu_probe=probe)
    server = sup.start(make_spec(gpu_release_timeout_s=30.0), tmp_path / "server.log")
    start = clock.t
    record = sup.teardown(server)
    assert record.gpu_released is released
    assert record.gpu_after == readings[-1]
    if note is None:
        assert clock.t - start < 10.0
    else:
        assert any(note in n for n in record.notes)
        assert 30.0 <= clock.t - start < 32.0  # bounded by gpu_release_timeout_s


def test_adopt_checks_create_time_and_teardown_works_without_a_child_handle(tmp_path: Path) -> None:
    first, system, _ = make(Scenario(ready_after=0.0))
    server = first.start(make_spec(), tmp_path / "server.log")
    later, _, _ = make(system=system)  # a fresh supervisor (a later gauntlet run), same process table
    assert (
        later.adopt(server.pid, server.pgid, server.create_time + 3.0, server.spec, server.log_path) is None
    )
    assert later.adopt(999, 999, 1.0, server.spec, server.log_path) is None
    adopted = later.adopt(server.pid, server.pgid, server.create_time, server.spec, server.log_path)
    assert isinstance(adopted, Server) and adopted.pid == server.pid
    record = later.teardown(adopted)
    assert record.signal_sequence == ["SIGTERM"] and record.survivors == []
    assert not any(p.alive for p in system.procs.values())


def test_a_wall_clock_step_does_not_make_a_running_server_look_gone(tmp_path: Path) -> None:
    """psutil's create_time moves with the wall clock; the identity (start after boot) does not."""
    sup, system, _ = make(Scenario(ready_after=0.0))
    server = sup.start(make_spec(), tmp_path / "server.log")
    sup.wait_ready(server)
    system.boot_epoch += 3 * 3600.0  # the host's clock jumped three hours
    assert sup.is_alive(server)
    assert sup.check(server) == []
    later, _, _ = make(system=system)
    assert later.adopt(server.pid, server.pgid, server.create_time, server.spec, server.log_path) is not None


@pytest.mark.parametrize(("offset_s", "same"), [(0.0, True), (0.6, True), (-0.6, True), (2.0, False)])
def test_a_journal_from_before_boot_relative_starts_still_matches_to_the_second(
    tmp_path: Path, offset_s: float, same: bool
) -> None:
    """Journals written before 2026-12-03 recorded psutil's epoch create_time; adopt still matches those."""
    first, system, _ = make(Scenario(ready_after=0.0))
    server = first.start(make_spec(), tmp_path / "server.log")
    recorded = system.boot_epoch + server.create_time + offset_s  # what an older gauntlet wrote down
    later, _, _ = make(system=system)
    adopted = later.adopt(server.pid, server.pgid, recorded, server.spec, server.log_path)
    assert (adopted is not None) is same


@dataclass
class LeaderZombieChild(FakeChild):
    """A server whose main thread exited first: the process table shows it gone, waitpid has no code yet."""

    polls_without_code: int = 3

    def poll(self) -> int | None:
        code = super().poll()
        if code is not None and self.polls_without_code > 0:
            self.polls_without_code -= 1
            return None
        return code


def test_exit_code_of_a_server_seen_gone_before_it_is_reaped_is_awaited(tmp_path: Path) -> None:
    log = ["RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs."]
    system = FakeSystem(Scenario(ready_after=None, exits_after=2.0, exit_code=1, log=log))
    spawn = system.__call__

    def spawner(argv: Sequence[str], **kw: Any) -> FakeChild:  # the spawner's keywords, handed on
        child = spawn(argv, **kw)
        return LeaderZombieChild(child.pid, system)

    sup, _, clock = make(system=system, spawner=spawner)
    start = clock.t
    server, record = sup.launch(make_spec(), tmp_path / "server.log")
    assert server is None
    assert (record.kind, record.exit_code) == ("incompatible", 1)
    assert clock.t - start < 3.5  # a few short polls, not the 5 s bound
