"""``rollback`` and ``promote`` interrupted by SIGTERM: they unwind as after Ctrl-C and say what they left.

SIGTERM's default ended the command where it stood, saying nothing: a rollback killed while its restored
server started left that server running unannounced (the journal named it, so ``stop`` found it). Now
SIGTERM raises KeyboardInterrupt during both commands: a server still starting is torn down, a restored
retained server stays up unvalidated, a promotion restores the previous configuration; the command says
what runs now and exits 130, and the next ``rollback`` leaves one healthy retained server, validated.
Each row sends a real SIGTERM to this process from inside the command (the fakes' hooks).
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.errors import EXIT_INTERRUPTED
from orchestrator.ledger.journal import Journal
from orchestrator.recovery.promote import main_promote
from orchestrator.recovery.rollback import main_rollback, rollback
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import Seams
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams
from tests.unit.test_promote import kept_sweep, said_status


def sigterm() -> None:
    """SIGTERM to this process, as `kill PID` sends it; refused where it would end the test run."""
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        raise AssertionError("SIGTERM would end the process here, saying nothing of what it left")
    os.kill(os.getpid(), signal.SIGTERM)


def while_starting(sup: FakeSupervisor, candidate: str) -> FakeLoad:
    ready = sup.wait_ready

    def wait_ready(server: object, timeout_s: float | None = None) -> float:
        if server.spec.candidate == candidate:  # type: ignore[attr-defined]
            sigterm()
        return ready(server, timeout_s)  # type: ignore[arg-type]

    sup.wait_ready = wait_ready  # type: ignore[method-assign]
    return FakeLoad()


def while_validating(sup: FakeSupervisor, candidate: str) -> FakeLoad:
    def hook(name: str, profile: str, repeat: int) -> None:
        if name == candidate and profile == "decode_heavy":
            sigterm()

    return FakeLoad(before=hook)


Command = Callable[[list[str], Callable[[], Seams]], int]


@dataclass(frozen=True)
class Row:
    command: Command
    candidate: str  # whose start or validation the SIGTERM arrives in
    when: Callable[[FakeSupervisor, str], FakeLoad]
    live: list[str]  # what runs after the interrupt
    said: str  # in what the command says


ROWS = {
    # The restored server was still starting: torn down (the session's rule), nothing of it runs.
    "rollback-starting": Row(
        main_rollback, "baseline", while_starting, [], "nothing gauntlet started for this sweep is running"
    ),
    # Restored and ready, its validation under way: it stays up (the live service), not validated.
    "rollback-validating": Row(
        main_rollback, "baseline", while_validating, ["baseline"], "retained server live"
    ),
    # A promotion: the candidate torn down, the previous retained configuration restored, validated.
    "promote-starting": Row(main_promote, "tp4_dp2", while_starting, ["baseline"], "configuration baseline"),
    "promote-validating": Row(
        main_promote, "tp4_dp2", while_validating, ["baseline"], "configuration baseline"
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_sigterm_unwinds_rollback_and_promote_and_they_say_what_they_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: Row
) -> None:
    command, candidate, when, live, said = row.command, row.candidate, row.when, row.live, row.said
    sup = FakeSupervisor()
    ctx: SweepContext = kept_sweep(tmp_path, sup)
    if command is main_rollback:
        sup.alive.clear()  # the live server died: rollback restores it
    seams = fake_seams(sup, when(sup, candidate))
    args = [str(ctx.dir)] if command is main_rollback else [str(ctx.dir), candidate]
    before = signal.getsignal(signal.SIGTERM)
    assert command(args, lambda: seams) == EXIT_INTERRUPTED
    assert signal.getsignal(signal.SIGTERM) == before  # put back
    err = capsys.readouterr().err
    name = "rollback" if command is main_rollback else "promote"
    assert f"gauntlet {name}: interrupted (signal SIGTERM) before it finished; what runs now:" in err, err
    assert said in err, err
    assert [s.spec.candidate for s in sup.alive.values()] == live
    state = Journal.of_sweep(ctx.dir).replay()
    assert state.retained_candidate == "baseline" and state.promoting is None
    assert [s.candidate for s in state.live.values()] == live  # the journal names what runs, no more
    sup.wait_ready = FakeSupervisor.wait_ready.__get__(sup)  # type: ignore[method-assign]
    assert rollback(ctx.dir, ctx.seams, out=io.StringIO()).ok
    assert [s.spec.candidate for s in sup.alive.values()] == ["baseline"]
    code, text = said_status(ctx)
    assert code == 0 and "state: the retained configuration is the one healthy server, validated" in text
