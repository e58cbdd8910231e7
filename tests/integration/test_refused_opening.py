"""A sweep refused at its opening never orphans the live service (issue 42, items 12 and 14), replayed as a
new user met it, on the simulator with the real processes.

Sweep A leaves its validated retained server live. Sweep B, configured with another baseline, is refused
(exit 4): before, it had already moved ``sweeps/latest`` to its empty directory, after which ``status``
said nothing gauntlet started was running and advised ``rollback``, ``rollback`` failed on the port held
by gauntlet's own healthy server with the hint "run rollback", and sweep C with the matching baseline was
refused on the port; only ``stop`` (downtime) got out. A search whose ``search.storage`` is a PostgreSQL
URL with a wrong port is refused at the opening too, before the live service is touched (before, the
baseline was measured first and the sweep ended in "unexpected sqlalchemy.exc.OperationalError ... This
is a bug in gauntlet").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.layout import OffsitePaths, journal_file, offsite_dir
from orchestrator.app.search_storage import storage_problem
from orchestrator.ledger.lock import lock_dir
from tests.integration import sweep_helpers as h
from tests.older_gauntlet import as_an_older_gauntlet_left_it
from tests.ports import free_port

pytestmark = pytest.mark.slow

PASSWORD = "s3cret-pw"


def _flags(sweeps: Path, port: int) -> list[str]:
    """What locates the sweeps of this test for `status`, `rollback` (their latest under run.sweeps_dir)."""
    return [f"run.sweeps_dir={sweeps}", f"service.port={port}"]


def _copy_names(port: int) -> str:
    """The sweep the copy beside the port's lock names (the ledger)."""
    return str(json.loads(OffsitePaths(offsite_dir(lock_dir(), port)).record.read_text())["sweep_dir"])


def test_a_refused_sweep_leaves_the_live_service_to_status_rollback_and_the_next_sweep(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, a = h.run_sweep(["-m", "candidate=tp4_dp2"], sweeps=sweeps, port=port)
    h.assert_finished(code, out, a)
    (live_pid,) = [p.pid for p in h.sim_servers(port)]
    a_journal = journal_file(a).read_bytes()

    # B: another baseline. Refused before anything is touched, and everything left as it was.
    code, out, _ = h.run_sweep(
        ["-m", "candidate=twin", "candidate@baseline=tp4_dp2"], sweeps=sweeps, port=port
    )
    assert code == 4, out[-3000:]
    (b,) = [d for d in sweeps.iterdir() if not d.is_symlink() and d.resolve() != a]
    assert (sweeps / "latest").resolve() == a
    assert journal_file(a).read_bytes() == a_journal and not journal_file(b).exists()
    assert _copy_names(port) == str(a)
    assert [p.pid for p in h.sim_servers(port)] == [live_pid]
    assert "make tests/integration/conf/candidate/" not in out  # tp4_dp2 is conf/'s: the file selected
    assert "make conf/candidate/tp4_dp2.yaml describe the live service" in out, out[-3000:]
    assert f"`python -m orchestrator stop {a}`" in out

    # The state, as an older gauntlet left it: latest and the port's copy on B's empty directory.
    as_an_older_gauntlet_left_it(sweeps, b, port)
    assert (sweeps / "latest").resolve() == b.resolve() and _copy_names(port) == str(b.resolve())
    status = h.run_cli(["status", *_flags(sweeps, port)], timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"sweep: {a}" in status.stdout and f"`status` acts on {a}" in status.stderr
    named = h.run_cli(["status", str(b)], timeout=120)  # B named: the same answer, said first
    assert named.returncode == 0 and f"sweep: {a}" in named.stdout, named.stdout + named.stderr
    rolled = h.run_cli(["rollback", *_flags(sweeps, port)], timeout=600)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert "rollback OK" in rolled.stdout and "run rollback" not in rolled.stderr
    assert [p.pid for p in h.sim_servers(port)] == [live_pid]  # validated where it runs: no downtime
    assert (sweeps / "latest").resolve() == a and _copy_names(port) == str(a)  # both put back

    # A search whose study's database is out of reach (a wrong port): refused at the opening.
    # The URL through a variable, as a password must come (a command line's is refused).
    monkeypatch.setenv(
        "GAUNTLET_TEST_STORAGE_URL", f"postgresql+psycopg://me:{PASSWORD}@127.0.0.1:{free_port()}/gauntlet"
    )
    code, out, _ = h.run_sweep(
        [
            "-m",
            "search=small",
            "capacity.profile=decode_heavy",
            "search.storage=${oc.env:GAUNTLET_TEST_STORAGE_URL}",
        ],
        sweeps=sweeps,
        port=port,
    )
    assert code == 4, out[-3000:]
    assert "search.storage postgresql+psycopg://me:***@127.0.0.1:" in out and PASSWORD not in out
    assert "bug in gauntlet" not in out
    assert [p.pid for p in h.sim_servers(port)] == [live_pid] and (sweeps / "latest").resolve() == a

    # C: the baseline that describes the live service takes it over, as every sweep does.
    code, out, c = h.run_sweep(["-m", "candidate=twin"], sweeps=sweeps, port=port)
    assert c not in (a, b.resolve())
    h.assert_finished(code, out, c)
    assert f"live service baseline (pid {live_pid}) recorded as the baseline" in out
    h.assert_one_healthy_retained(c, port)


def test_a_real_postgresql_reached_and_not(postgres_url: str) -> None:
    """storage_problem against a throwaway PostgreSQL (tests/postgres.py): its URL is reached; the same
    server at a port where nothing listens, and a database it does not have, are faults that say so."""
    from sqlalchemy.engine import make_url

    assert storage_problem(postgres_url) is None
    good = make_url(postgres_url)
    wrong_port = good.set(port=free_port()).render_as_string(hide_password=False)
    fault = storage_problem(wrong_port)
    assert fault is not None and fault.what.startswith("cannot connect to the study's database (")
    assert f"127.0.0.1:{make_url(wrong_port).port}" in fault.check
    no_database = good.set(database="no_such_db").render_as_string(hide_password=False)
    fault = storage_problem(no_database)
    assert fault is not None and 'database "no_such_db" does not exist' in fault.what
