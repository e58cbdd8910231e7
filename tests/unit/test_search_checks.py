"""A search's checks are one function (orchestrator.search.checks) that plan, doctor and the sweep
all call: what the sweep refuses, plan and doctor refuse first, in the same words; an unreachable
``search.storage`` is found by doctor and at the sweep's opening, before the live service is stopped, and
SQLAlchemy's errors are said as gauntlet's, the password masked (issue 42, item 12)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from contracts.errors import GauntletError
from orchestrator import plan as plan_command
from orchestrator.app import entry
from orchestrator.doctor import doctor, format_report
from orchestrator.search.storage import (
    StorageFault,
    masked_url,
    storage_fault,
    storage_faults,
    storage_problem,
)
from orchestrator.servers.seams import Seams
from tests.ports import free_port
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, sim_probes

SMALL = ["run.repeats=1", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]
_FAKES: list[tuple[FakeSupervisor, FakeLoad, list[str]]] = []
SEAMS = f"hydra.sweeper.seams={__name__}.current_seams"
PASSWORD = "s3cret-pw"


def current_seams() -> Seams:
    sup, load, messages = _FAKES[-1]
    return fake_seams(sup, load, messages)


def sweep(tmp_path: Path, sup: FakeSupervisor, *overrides: str) -> tuple[int, list[str]]:
    """The sweep in this process (Hydra, gauntlet's sweeper) on fake servers; its exit code and lines."""
    messages: list[str] = []
    _FAKES.append((sup, FakeLoad(), messages))
    try:
        code = entry.main(["-m", f"run.sweeps_dir={tmp_path / 'sweeps'}", SEAMS, *SMALL, *overrides])
    finally:
        _FAKES.pop()
    return code, messages


def run_plan(tmp_path: Path, overrides: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = plan_command.main(overrides, out=io.StringIO())
    return code, capsys.readouterr().err


def run_doctor(tmp_path: Path, overrides: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    report = doctor(
        [f"run.sweeps_dir={tmp_path / 'sweeps'}", *overrides],
        probes=sim_probes(),
        alive=lambda pid, t: False,
        storage=lambda url: None,
    )
    return (4 if report.problems else 0), format_report(report)


def run_sweep(tmp_path: Path, overrides: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    sup = FakeSupervisor()
    code, _ = sweep(tmp_path, sup, *overrides)
    assert sup.started == []  # refused before the first launch
    assert not (tmp_path / "sweeps" / "latest").exists()  # and before the sweep's first file
    return code, capsys.readouterr().err


COMMANDS: dict[str, tuple[Callable[..., tuple[int, str]], int]] = {
    "plan": (run_plan, 2),
    "doctor": (run_doctor, 4),
    "sweep": (run_sweep, 2),
}
NO_PROFILE = (
    "conf/search/demo.yaml: capacity.profile = None: a workload: a search screens and measures capacity on it"
)
NO_BUDGET = (
    "command-line override 'search.max_launches=0' (the search: conf/search/demo.yaml): search.max_launches "
    "= 0: >= 1: one trial's launch (the confirmations, search.confirm_top = 2 at 2 launch(es) each"
)
#: A budget that starts no trial where each trial runs on a node of its own (gauntlet_local's simulated
#: nodes): before, plan and the sweep let it through, and the sweep launched nothing.
NODE_BUDGET = (
    "command-line override 'search.max_launches=7' (the search: conf/search/demo.yaml): search.max_launches "
    "= 7: >= 8: the smallest budget that fits one trial and the confirmations: the trial's launch and its "
    "node's baseline (2; each trial runs on a node of its own, and none holds a recent baseline when the "
    "sweep opens), and search.confirm_top = 2 confirmation(s) at 3 launches each (its finalist's launch, "
    "the baseline's interleaved block after it, its node's baseline), kept before the trials: 2 + 2 x 3"
)
ON_NODES = ["hydra/launcher=gauntlet_local", "run.simulated_nodes=2"]
BAD_SAMPLER = "conf/search/demo.yaml: search.sampler = 'grid': one of ('tpe', 'random')"
#: A search field over a vLLM flag the installed server (here the simulator's parser) does not know.
UNKNOWN_FLAG = (
    "search.space.extra_args.blok_size = 16: a flag and value it accepts: --blok-size: not a flag of the "
    "installed server"
)


@pytest.mark.parametrize(
    ("command", "overrides", "problem"),
    [
        (command, overrides, problem)
        for command in COMMANDS
        for overrides, problem in (
            (["search=demo"], NO_PROFILE),
            (["search=demo", "capacity.profile=decode_heavy", "search.max_launches=0"], NO_BUDGET),
            (
                ["search=demo", "capacity.profile=decode_heavy", *ON_NODES, "search.max_launches=7"],
                NODE_BUDGET,
            ),
            (["search=demo", "capacity.profile=decode_heavy", "search.sampler=grid"], BAD_SAMPLER),
            # a field over an extra flag the installed vLLM does not know: refused before a launch finds it
            # (doctor did not ask its own flag table of the space before)
            (
                [
                    "search=demo",
                    "capacity.profile=decode_heavy",
                    "+search.space.extra_args.blok_size='choice(16, 32)'",
                ],
                UNKNOWN_FLAG,
            ),
        )
    ],
)
def test_plan_doctor_and_the_sweep_refuse_a_search_with_the_same_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, overrides: list[str], problem: str
) -> None:
    run, exit_code = COMMANDS[command]
    code, said = run(tmp_path, ["candidate=baseline", *overrides], capsys)
    assert code == exit_code, said
    assert problem in said, said


@pytest.mark.parametrize(
    "extra",
    [
        [],
        # the smallest budget whose first trial starts on nodes of their own (NODE_BUDGET's row is 7)
        [*ON_NODES, "search.max_launches=8"],
    ],
)
def test_a_search_the_sweep_accepts_is_planned(extra: list[str]) -> None:
    """The counter-row: with its capacity profile, plan shows the search (the checks refuse only what the
    sweep refuses)."""
    out = io.StringIO()
    overrides = ["search=demo", "capacity.profile=decode_heavy", "candidate=baseline", *extra]
    assert plan_command.main(overrides, out=out) == 0
    assert "search demo" in out.getvalue()


# ---------------------------------------------------------------- the study's storage


def _operational(message: str) -> OperationalError:
    return OperationalError("connect", {}, Exception(message))


@pytest.mark.parametrize(
    ("url", "exc", "what", "check"),
    [
        (
            f"postgresql+psycopg://me:{PASSWORD}@db.example:6543/gauntlet",
            _operational(
                'connection failed: connection to server at "10.0.0.5", port 6543 failed: '
                "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"
            ),
            "cannot connect to the study's database (connection failed: connection to server at "
            '"10.0.0.5", port 6543 failed: Connection refused Is the server running on that host and '
            "accepting TCP/IP connections?)",
            "that a database server runs at db.example:6543",
        ),
        (  # a driver that quotes the password back is masked all the same
            f"postgresql+psycopg://me:{PASSWORD}@db/gauntlet",
            _operational(f'password authentication failed for user "me" (password {PASSWORD})'),
            'cannot connect to the study\'s database (password authentication failed for user "me" '
            "(password ***))",
            "PGPASSWORD or ~/.pgpass",
        ),
        (
            f"postgresql+psycopg2://me:{PASSWORD}@db/gauntlet",
            ModuleNotFoundError("No module named 'psycopg2'"),
            "its database driver is not installed (No module named 'psycopg2')",
            "pip install -e '.[postgres]'",
        ),
        (
            "cockroach://me@db/gauntlet",
            NoSuchModuleError("Can't load plugin: sqlalchemy.dialects:cockroach"),
            "its database driver is not installed (Can't load plugin: sqlalchemy.dialects:cockroach)",
            "its SQLAlchemy driver",
        ),
        (
            f"mysql+pymysql://me:{PASSWORD}@db/gauntlet",
            ArgumentError("bad argument"),
            "the study's database refused the search (ArgumentError: bad argument)",
            "the database's own log",
        ),
    ],
)
def test_a_storage_error_says_the_masked_url_what_failed_and_what_to_check(
    url: str, exc: BaseException, what: str, check: str
) -> None:
    fault = storage_fault(exc, url)
    assert fault.url == masked_url(url) and PASSWORD not in fault.url
    assert fault.what == what
    assert check in fault.check
    raised = exc if isinstance(exc, OperationalError | ArgumentError) else OperationalError("c", {}, exc)
    with pytest.raises(GauntletError) as info, storage_faults(url):  # around the search: gauntlet's words
        raise raised
    assert PASSWORD not in str(info.value) and masked_url(url) in info.value.message
    assert "bug in gauntlet" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        (None, None),
        ("sqlite:///{tmp}/study.db", None),
        (
            "sqlite:///{tmp}/missing/study.db",
            "the SQLite file's folder {tmp}/missing does not exist or is not writable",
        ),
        ("sqlite://", "an in-memory SQLite database is gone when the sweep ends (a resume finds no trials)"),
        ("postgresql+psycopg://me:pw@db/gauntlet", None),  # the connect seam answers
        (
            f"not a url:{PASSWORD}@x",
            "not a database URL (Could not parse SQLAlchemy URL from given URL string)",
        ),
    ],
)
def test_storage_problem_checks_without_creating_anything(
    tmp_path: Path, url: str | None, fault: str | None
) -> None:
    connected: list[str] = []
    url = url.format(tmp=tmp_path) if url else url
    found = storage_problem(url, connect=connected.append)
    assert (found.what if found else None) == (fault.format(tmp=tmp_path) if fault else None)
    assert list(tmp_path.iterdir()) == []  # a SQLite file is not created by asking
    assert connected == ([url] if url and url.startswith("postgresql") else [])


def test_the_real_connect_to_a_closed_port_is_a_fault_naming_it() -> None:
    port = free_port()
    found = storage_problem(f"postgresql+psycopg://me:{PASSWORD}@127.0.0.1:{port}/gauntlet")
    assert isinstance(found, StorageFault)
    assert found.url == f"postgresql+psycopg://me:***@127.0.0.1:{port}/gauntlet"
    assert PASSWORD not in f"{found.what} {found.check}"


@pytest.mark.parametrize("command", ["doctor", "sweep"])
def test_an_unreachable_storage_is_found_before_the_live_service_is_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """A new user's wrong PostgreSQL port: doctor names it, and the sweep refuses at its opening (exit 4)
    with the live service an earlier sweep left still serving and no baseline measured; before, the
    baseline was measured and the sweep ended in "unexpected sqlalchemy.exc.OperationalError ... This is a
    bug in gauntlet". The URL comes through a variable, as a password must (a command line's is refused):
    the sweep moves its password into its own environment and the check puts it back to connect."""
    url = f"postgresql+psycopg://me:{PASSWORD}@127.0.0.1:{free_port()}/gauntlet"
    monkeypatch.setenv("GAUNTLET_TEST_STORAGE_URL", url)
    searching = [
        "search=demo",
        "capacity.profile=decode_heavy",
        "search.storage=${oc.env:GAUNTLET_TEST_STORAGE_URL}",
        "candidate=baseline",
    ]
    if command == "doctor":
        report = doctor(
            [f"run.sweeps_dir={tmp_path / 'sweeps'}", *searching],
            probes=sim_probes(),
            alive=lambda p, t: False,
        )
        said = format_report(report)
        assert [p.check for p in report.problems] == ["search"], said
    else:
        sup = FakeSupervisor()
        assert sweep(tmp_path, sup, "candidate=tp4_dp2")[0] == 0  # the live service
        (live,) = sup.alive
        launched = list(sup.started)
        capsys.readouterr()
        code, _ = sweep(tmp_path, sup, *searching)
        said = capsys.readouterr().err
        assert code == 4, said
        assert list(sup.alive) == [live] and sup.started == launched  # untouched; no baseline measured
        assert "nothing was started or stopped" in said and "bug in gauntlet" not in said
    assert "search.storage postgresql+psycopg://me:***@127.0.0.1:" in said
    assert PASSWORD not in said
