"""The supervisor against real processes: a tiny vLLM-shaped server (tiny_server.py) started with python."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.errors import PortInUseError
from contracts.results import StartupRecord
from launch.process import started_since_boot
from launch.spec import LaunchSpec
from launch.supervisor import Server, Supervisor
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "tests/integration/tiny_server.py"


def spec_for(port: int, *flags: str, grace: float = 5.0, timeout: float = 30.0) -> LaunchSpec:
    return LaunchSpec(
        candidate="tiny", host="local", host_kind="cpu",
        argv=("python", SCRIPT, "--port", str(port), "--model", "tiny", *flags),
        env={}, pass_env=(), config_yaml="", bind_host="127.0.0.1", port=port, served_model_name="tiny",
        max_model_len=128, startup_timeout_s=timeout, shutdown_grace_s=grace, gpu_release_timeout_s=0.0,
        time_scale=1.0,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def alive(pids: list[tuple[int, float]]) -> list[int]:
    out = []
    for pid, created in pids:
        try:
            proc = psutil.Process(pid)
            if abs(started_since_boot(proc) - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            continue
    return out


def tree_of(server: Server) -> list[tuple[int, float]]:
    root = psutil.Process(server.pid)
    return [(p.pid, started_since_boot(p)) for p in [root, *root.children(recursive=True)]]


@pytest.fixture
def sup() -> Iterator[Supervisor]:
    supervisor = Supervisor(project_root=ROOT, poll_interval_s=0.05)
    yield supervisor


@pytest.fixture
def cleanup(sup: Supervisor) -> Iterator[list[Server]]:
    """Servers a test started; anything left at the end is torn down so a failing test leaks nothing."""
    servers: list[Server] = []
    yield servers
    for server in servers:
        with contextlib.suppress(Exception):
            sup.teardown(server)  # tracks descendants that left the group, unlike killpg
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pgid, signal.SIGKILL)


def test_cooperative_server_is_ready_then_torn_down_with_sigterm(
    sup: Supervisor, cleanup: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    server, record = sup.launch(spec_for(port, "--children", "2", "--ready-after", "0.3"), tmp_path / "s.log")
    assert server is not None, record
    cleanup.append(server)
    assert record.ok and record.time_to_ready_s is not None and record.time_to_ready_s >= 0.3
    assert wait_for(lambda: len(tree_of(server)) == 3)
    tree = tree_of(server)
    assert sorted(p for p, _ in tree) == sup.pids_of(server)
    assert sup.check(server) == []
    down = sup.teardown(server)
    assert down.signal_sequence == ["SIGTERM"]
    assert down.survivors == [] and down.port_free and down.gpu_released is None
    assert alive(tree) == []
    assert port_is_free(port)


def test_sigterm_ignored_escalates_to_sigkill_of_every_descendant(
    sup: Supervisor, cleanup: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    flags = ("--ignore-sigterm", "--children", "2", "--children-ignore-sigterm", "--child-setsid")
    server, record = sup.launch(spec_for(port, *flags, grace=1.0), tmp_path / "s.log")
    assert server is not None, record
    cleanup.append(server)

    def escaped() -> list[int]:
        return [pid for pid, _ in tree_of(server) if os.getpgid(pid) != server.pgid]

    # the grandchild leaves the process group: only descendant tracking finds it
    assert wait_for(lambda: len(tree_of(server)) == 3 and len(escaped()) == 1)
    tree = tree_of(server)
    down = sup.teardown(server)
    assert down.signal_sequence == ["SIGTERM", "SIGKILL"]
    assert down.survivors == [] and down.port_free
    assert down.duration_s >= 1.0
    assert alive(tree) == []
    assert port_is_free(port)


def test_port_in_use_names_the_holder(sup: Supervisor, cleanup: list[Server], tmp_path: Path) -> None:
    port = free_port()
    first, _ = sup.launch(spec_for(port), tmp_path / "a.log")
    assert first is not None
    cleanup.append(first)
    with pytest.raises(PortInUseError) as info:
        sup.start(spec_for(port), tmp_path / "b.log")
    assert f"pid {first.pid}" in str(info.value)
    assert "tiny_server.py" in str(info.value)
    assert not (tmp_path / "b.log").exists()
    sup.teardown(first)


def test_exit_with_argparse_error_is_bad_args_at_once(tmp_path: Path) -> None:
    """The start fails when the server exits, classified, not at its 120 s deadline: the supervisor's
    clock is frozen, so the deadline never comes and returning at all proves it read the exit (no bound
    on elapsed time, which depends on the machine's load)."""
    sup = Supervisor(project_root=ROOT, poll_interval_s=0.05, clock=lambda: 0.0)
    port = free_port()
    message = "api_server.py: error: unrecognized arguments: --bogus"
    spec = spec_for(port, "--exit-after", "0.2", "--exit-code", "2", "--message", message, timeout=120.0)
    launched: list[tuple[Server | None, StartupRecord]] = []
    worker = threading.Thread(
        target=lambda: launched.append(sup.launch(spec, tmp_path / "s.log")), daemon=True
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the start did not end on the server's exit"
    ((server, record),) = launched
    assert server is None
    assert (record.kind, record.exit_code, record.matched_line) == ("bad-args", 2, message)
    assert message in record.evidence


def test_a_killed_server_is_reported_dead_and_its_orphans_are_removed(
    sup: Supervisor, cleanup: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    server, _ = sup.launch(spec_for(port, "--children", "1"), tmp_path / "s.log")
    assert server is not None
    cleanup.append(server)
    assert wait_for(lambda: len(tree_of(server)) == 2)
    tree = tree_of(server)
    os.kill(server.pid, signal.SIGKILL)  # like SIGKILL of vLLM's API server: its children live on
    events: list[str] = []
    assert wait_for(lambda: bool(events.extend(e.kind for e in sup.check(server))) or "died" in events)
    # a check between the kill and the exit may see the refused connection first
    assert events in (["died"], ["unhealthy", "died"])
    assert alive(tree[1:]) != []  # the orphan is still there
    down = sup.teardown(server)
    assert down.survivors == [] and alive(tree) == [] and port_is_free(port)


def test_health_503_is_unhealthy_then_recovered(
    sup: Supervisor, cleanup: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    server, _ = sup.launch(spec_for(port), tmp_path / "s.log")
    assert server is not None
    cleanup.append(server)
    httpx.post(f"{server.base_url}/admin/health/503", trust_env=False)
    unhealthy = sup.check(server)
    assert [e.kind for e in unhealthy] == ["unhealthy"] and "503" in unhealthy[0].detail
    httpx.post(f"{server.base_url}/admin/health/200", trust_env=False)
    assert [e.kind for e in sup.check(server)] == ["recovered"]
    sup.teardown(server)


def test_server_outlives_the_process_that_started_it_and_is_adopted(
    sup: Supervisor, cleanup: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    code = (
        "import json, sys; from pathlib import Path; from launch.supervisor import Supervisor;"
        "from tests.integration.test_supervisor_processes import spec_for;"
        f"s = Supervisor(); server = s.start(spec_for({port}), Path({str(tmp_path / 's.log')!r}));"
        "s.wait_ready(server);"
        "print(json.dumps([server.pid, server.pgid, server.create_time]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    pid, pgid, create_time = json.loads(out.stdout.strip().splitlines()[-1])
    spec = spec_for(port)
    assert sup.adopt(pid, pgid, create_time + 5.0, spec, tmp_path / "s.log") is None  # not that process
    server = sup.adopt(pid, pgid, create_time, spec, tmp_path / "s.log")
    assert server is not None, "the server died with the process that started it"
    cleanup.append(server)
    assert sup.check(server) == []
    down = sup.teardown(server)
    assert down.survivors == [] and down.port_free
    assert alive([(pid, create_time)]) == []
