"""A refused sweep never orphans the live service (issue 42, item 14), on fake servers in this process.

Sweep A leaves its validated retained server live; sweep B, configured with another baseline, is refused
at its opening (exit 4) and must leave ``latest``, A's journal and the copy beside the port's lock as they
were; ``status``, ``rollback`` and the next sweep C find the live service from the port's ledger whatever
``latest`` says (an older gauntlet moved it to B's empty directory), and no hint tells the user to run the
command that just failed. The same replay on the simulator: tests/integration/test_refused_opening.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from contracts.errors import PortInUseError
from contracts.layout import OffsitePaths, journal_file, latest_link, offsite_dir
from orchestrator.app import entry
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.lock import lock_dir
from orchestrator.recovery.rollback import main_rollback, rollback
from orchestrator.recovery.status import main_status
from orchestrator.recovery.stop import main_stop
from orchestrator.servers.seams import Seams
from tests.older_gauntlet import as_an_older_gauntlet_left_it
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

SMALL = ["run.repeats=1", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]
_FAKES: list[tuple[FakeSupervisor, FakeLoad, list[str]]] = []
_SWEEP_NUMBER = itertools.count(1)
SEAMS = f"hydra.sweeper.seams={__name__}.current_seams"
#: Another baseline than the shipped one (conf/candidate/baseline.yaml): TP4 x DP2.
OTHER_BASELINE = "candidate@baseline=tp4_dp2"


def current_seams() -> Seams:
    sup, load, messages = _FAKES[-1]
    return fake_seams(sup, load, messages)


def sweep(sup: FakeSupervisor, *overrides: str) -> tuple[int, list[str]]:
    """A sweep in this process (Hydra, gauntlet's sweeper) on fake servers, under ./sweeps, in a directory
    of its own: the default name has one-second resolution, and a sweep refused at its opening takes
    well under a second, so the next one would resume its directory (a run at -n 2 did)."""
    messages: list[str] = []
    _FAKES.append((sup, FakeLoad(), messages))
    where = f"hydra.sweep.dir=sweeps/{next(_SWEEP_NUMBER):03d}"
    try:
        code = entry.main(["-m", "run.sweeps_dir=sweeps", where, SEAMS, *SMALL, *overrides])
    finally:
        _FAKES.pop()
    return code, messages


def latest() -> Path:
    return latest_link(Path("sweeps")).resolve()


def ledger_names() -> str:
    """The sweep the copy beside port 8000's lock names."""
    record = OffsitePaths(offsite_dir(lock_dir(), 8000)).record
    return str(json.loads(record.read_text())["sweep_dir"])


@pytest.mark.parametrize(
    "latest_after_b",
    [
        "as B's opening left it",
        "moved to B, as an older gauntlet did",  # and the copy beside the lock too
        "B named on the command line",
    ],
)
def test_a_refused_sweep_leaves_the_live_service_found_by_status_rollback_and_the_next_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], latest_after_b: str
) -> None:
    monkeypatch.chdir(tmp_path)
    sup = FakeSupervisor()

    code, _ = sweep(sup, "candidate=tp4_dp2")
    assert code == 0
    a = latest()
    (live_pid,) = sup.alive
    a_journal_before = journal_file(a).read_bytes()
    capsys.readouterr()

    code, said = sweep(sup, "candidate=eplb", OTHER_BASELINE)
    err = capsys.readouterr().err
    assert code == 4, err
    (b,) = [d.resolve() for d in Path("sweeps").iterdir() if not d.is_symlink() and d.resolve() != a]
    # B's refused opening left everything as it was: latest, A's journal, the copy, the live service.
    assert latest() == a
    assert journal_file(a).read_bytes() == a_journal_before
    assert not journal_file(b).exists()
    assert ledger_names() == str(a)
    assert list(sup.alive) == [live_pid]
    # The refusal names the baseline file the user selected, and the sweep that answers for the service.
    assert "make conf/candidate/tp4_dp2.yaml describe the live service" in err, err
    assert f"`python -m orchestrator stop {a}`" in err
    assert said[-1].endswith(f"runs as it was (`python -m orchestrator status {a}`)"), said[-1]

    if latest_after_b == "moved to B, as an older gauntlet did":  # latest, the port's copy, B's journal
        as_an_older_gauntlet_left_it(Path("sweeps"), b, 8000)
        assert latest() == b and ledger_names() == str(b)
    target = [str(b)] if latest_after_b == "B named on the command line" else []

    def seams() -> Seams:
        return fake_seams(sup, FakeLoad(), [])

    assert main_status(target, seams) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert f"sweep: {a}" in out and "state: the retained configuration is the one healthy server" in out

    assert main_rollback(list(target), seams) == 0, (
        capsys.readouterr()
    )  # rollback OK (its stdout: bound early)
    assert list(sup.alive) == [live_pid]  # validated where it runs: no downtime
    assert latest() == a and ledger_names() == str(a)  # put back where an older gauntlet had moved them

    code, _ = sweep(sup, "candidate=eplb")  # C: the baseline that describes the live service
    assert code == 0
    c = latest()
    assert c not in (a, b)
    (retained,) = Journal(journal_file(c)).replay().retained_live
    assert list(sup.alive) == [retained.pid] and retained.pid != live_pid  # taken over, restored once


def test_rollback_of_an_older_sweep_is_refused_naming_the_live_service_not_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Z's retained server was stopped (run.retained_after_sweep=stop); A's is live on the port. Rolling Z
    back would launch onto A's healthy server: refused before anything is touched, and the hint names A
    (status, rollback of A, or stop A first), never `rollback Z` again."""
    monkeypatch.chdir(tmp_path)
    sup = FakeSupervisor()
    assert sweep(sup, "candidate=eplb", OTHER_BASELINE, "run.retained_after_sweep=stop")[0] == 0
    z = latest()
    assert sweep(sup, "candidate=tp4_dp2")[0] == 0
    a = latest()
    (live_pid,) = sup.alive
    started = list(sup.started)
    z_journal = journal_file(z).read_bytes()
    with pytest.raises(PortInUseError) as info:
        rollback(z, fake_seams(sup, FakeLoad(), []))
    error = info.value
    assert list(sup.alive) == [live_pid] and sup.started == started
    assert journal_file(z).read_bytes() == z_journal  # refused before a line is written
    assert (
        f"service port 8000 is held by gauntlet's live service, baseline (pid {live_pid}, retained) of {a}"
        in (error.message)
    )
    assert error.hint is not None
    assert f"rollback {z}" not in error.hint and "orchestrator rollback`" not in error.hint
    assert f"`python -m orchestrator stop {a}`" in error.hint
    capsys.readouterr()
    assert main_stop([str(z)], lambda: fake_seams(sup, FakeLoad(), [])) == 0  # Z has nothing: a no-op
    assert list(sup.alive) == [live_pid]


def test_the_port_in_use_hint_does_not_send_the_user_back_to_rollback(tmp_path: Path) -> None:
    """The supervisor's refusal of a taken port is also what a rollback meets: "run rollback" was a loop."""
    from launch.process import ProcInfo
    from tests.unit.test_supervisor import make, make_spec

    sup, system, _ = make()
    system.foreign_listener = ProcInfo(4242, 1.0, ("python", "-m", "launch.sim"))
    with pytest.raises(PortInUseError) as info:
        sup.start(make_spec(), tmp_path / "server.log")
    assert info.value.hint is not None and "rollback" not in info.value.hint
    assert "`python -m orchestrator status` names the sweep" in info.value.hint
