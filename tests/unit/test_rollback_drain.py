"""``rollback`` waits for the jobs it cancelled to leave SLURM's queue and their ports to be free before it
restores (orchestrator/recovery/drain.py; issue 45 item 6: a restore started 0.3 s after ``scancel`` found
the old head still on the port, exit 4)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import RollbackError
from orchestrator.ledger.events import JobStarted, Started
from orchestrator.ledger.journal import Journal, RemoteJob
from orchestrator.ledger.nodes import Place
from orchestrator.recovery.drain import DRAIN_WAIT_S, wait_released
from orchestrator.recovery.rollback import rollback
from orchestrator.recovery.stop import stop
from tests.unit.fakes import FakeSupervisor
from tests.unit.test_session import _config_yaml, restored_sweep

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def sleep(self, s: float) -> None:
        self.t += s


@pytest.mark.parametrize(
    ("job_until", "port_until", "took", "said"),
    [
        (0.0, 0.0, 0.0, []),  # nothing holds on: no wait, nothing said
        (2.0, 3.0, 3.0, [
            "waiting for job(s) 61 still listed by squeue and port(s) 8000 still taken (0 s of at most "
            "120 s)",
            "the cancelled job(s) ended and the port(s) are free after 3.0 s; restoring",
        ]),
        (0.0, 12.0, 12.0, [
            "waiting for port(s) 8000 still taken (0 s of at most 120 s)",
            "waiting for port(s) 8000 still taken (5 s of at most 120 s)",
            "waiting for port(s) 8000 still taken (10 s of at most 120 s)",
            "the cancelled job(s) ended and the port(s) are free after 12.0 s; restoring",
        ]),
    ],
)  # fmt: skip
def test_the_restore_waits_until_the_jobs_are_gone_and_the_ports_free(
    job_until: float, port_until: float, took: float, said: list[str]
) -> None:
    clock, messages = Clock(), []
    waited = wait_released(
        ["61"], [8000], queued=lambda jobs: list(jobs) if clock.t < job_until else [],
        port_taken=lambda port: clock.t < port_until, say=messages.append, sweep_dir="S",
        clock=lambda: clock.t, sleep=clock.sleep,
    )  # fmt: skip
    assert (waited, messages) == (took, said)


def test_past_its_bound_the_wait_refuses_naming_what_holds_on_and_never_hints_at_rollback() -> None:
    clock, messages = Clock(), []
    with pytest.raises(RollbackError) as caught:
        wait_released(
            ["61"], [8000, 29550], queued=lambda jobs: ["61"], port_taken=lambda port: port == 8000,
            say=messages.append, sweep_dir="sweeps/s", clock=lambda: clock.t, sleep=clock.sleep,
        )  # fmt: skip
    error = caught.value
    assert error.message == (
        "the restore was not started: job(s) 61 still listed by squeue and port(s) 8000 still taken "
        f"{DRAIN_WAIT_S:g} s after the sweep's jobs were cancelled"
    )
    assert error.hint is not None and "status sweeps/s" in error.hint and "rollback" not in error.hint
    assert clock.t == pytest.approx(DRAIN_WAIT_S, abs=1.0)
    assert len(messages) == int(DRAIN_WAIT_S / 5)  # progress every 5 s: at 0, 5, ..., 115 s


class Recording(FakeSupervisor):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def start(self, spec, log_path):  # type: ignore[no-untyped-def]
        self.events.append("start")
        return super().start(spec, log_path)


def test_rollback_restores_only_after_the_cancelled_job_left_the_queue_and_its_port_is_free(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    sup = Recording(events)
    ctx = restored_sweep(tmp_path, sup)
    stop(ctx.dir, ctx.seams, out=io.StringIO())
    (ctx.dir / "config.yaml").write_text(_config_yaml(ctx))
    job = Journal.of_sweep(ctx.dir, Place("n1", "61_0", "slurm"))  # a job whose gauntlet was killed
    job.append(JobStarted(candidate="tp16", executor="slurm"))
    job.append(Started(candidate="tp16", fingerprint="sha256:t", port=ctx.cfg.service.port, pid=99, pgid=99,
                       create_time=1.0))  # fmt: skip
    looks = iter([["61_0"], ["61_0"], []])

    def queued(jobs: Sequence[str]) -> list[str]:
        now = next(looks, [])
        events.append(f"queued {now}")
        return now

    def cancel(remote: RemoteJob, sweep_dir: Path) -> str:
        events.append(f"cancel {remote.job}")
        return f"job {remote.job} on {remote.node}: cancelled (scancel)"

    messages: list[str] = []
    seams = replace(ctx.seams, jobs_queued=queued, port_taken=lambda port: False, cancel_job=cancel,
                    say=messages.append)  # fmt: skip
    events.clear()
    result = rollback(ctx.dir, seams, out=io.StringIO(), wait_s=5.0)
    assert result.ok, result.reason
    assert events == ["cancel 61_0", "queued ['61_0']", "queued ['61_0']", "queued []", "start"]
    assert any(m.startswith("waiting for job(s) 61_0 still listed by squeue") for m in messages), messages
