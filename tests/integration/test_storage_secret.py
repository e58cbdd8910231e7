"""A password in ``search.storage`` is written nowhere, and the search still reaches its database with it.

The acceptance of issue 42, item 11, on the simulator: a search whose study lives in a PostgreSQL role that
must give its password (scram-sha-256, tests/postgres.py) leaves the password in no file under the sweep
directory (config.yaml, overrides.txt, multirun.yaml, Hydra's ``.hydra/`` records, the submitit launcher's
pickled jobs and results, the journal, the records), none under the lock directory (the lock, the copy
kept beside it), no line of the sweep's output and no command line of any process of the sweep's tree
(sampled while it runs); and the study in the database holds its trials. The same URL on the command line is
refused before anything is written. And libpq's own ways, which the docs point to: psycopg reads
PGPASSWORD and a password file for a URL without a password.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import optuna
import psutil
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from contracts.trials import read_search
from tests.integration.sweep_helpers import ROOT, orchestrator_cmd, sweep_dir
from tests.postgres import Cluster

pytestmark = pytest.mark.slow

PASSWORD = "Pw8c41d2e0b7"  # letters and digits: it is spliced into SQL by the helper
TOKEN = "hf_a93e77d01c"  # a secret read through a variable whose name does not look secret

#: A search of one launch, seconds per trial (tests/integration/test_search_storage.py's settings).
FAST = [
    "-m",
    "run.profiles=[decode_heavy]",
    "gates.accepted_profiles=[decode_heavy]",
    "gates.loaded_profiles=[decode_heavy]",
    "run.confirm_runs=0",
    "run.retained_after_sweep=stop",
    "host.time_scale=40",
    "capacity.profile=decode_heavy",
    "capacity.start=16",
    "capacity.max_level=32",
    "capacity.max_points=2",
    "capacity.max_repeats=1",
    "capacity.waves=1",
    "capacity.min_requests=8",
    "capacity.noise=0",
    "search.max_launches=1",
    "+service.env.HF_TOKEN=${oc.env:GAUNTLET_TEST_HFTOK}",  # the env key looks secret, the variable not
]


@pytest.fixture(scope="module")
def role(postgres_cluster: Cluster) -> str:
    """A database whose role must give :data:`PASSWORD`; its URL without the password."""
    return postgres_cluster.password_role("team_secret", PASSWORD)


def with_password(url: str) -> str:
    return url.replace("team_secret@", f"team_secret:{PASSWORD}@")


class Sampler:
    """The command lines of a process and its descendants, sampled until stopped (a poll, not a sleep)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.lines: set[str] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.05):
            try:
                root = psutil.Process(self.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                try:
                    self.lines.add("\0".join(proc.cmdline()))
                except psutil.Error:
                    continue

    def stop(self) -> set[str]:
        self.done.set()
        self.thread.join(timeout=10)
        return self.lines


def run(args: list[str], tmp_path: Path, port: int, env: dict[str, str]) -> tuple[int, str, set[str]]:
    """The sweep as a user runs it, its lock directory under the sweeps folder: exit code, output, argvs."""
    cmd = orchestrator_cmd(args, sweeps=tmp_path / "sweeps", port=port)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    sampler = Sampler(proc.pid)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()
        argvs = sampler.stop()
    return proc.returncode, out, argvs


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        yield from (p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("given", "launcher"),
    [
        ("in the search's file", "gauntlet_local"),  # jobs pickled by submitit: the launcher's own copies
        ("in a variable, on the command line by name", "basic"),  # Hydra's override, resolved when read
    ],
)
def test_a_password_in_search_storage_is_written_nowhere_and_the_study_reaches_its_database(
    tmp_path: Path, port: int, role: str, given: str, launcher: str
) -> None:
    url = with_password(role)
    env = {
        **os.environ,
        "GAUNTLET_LOCK_DIR": str(tmp_path / "sweeps" / ".lock"),
        "GAUNTLET_TEST_HFTOK": TOKEN,
    }
    env.pop("PGPASSWORD", None)  # the password comes from the URL only
    args = [*FAST]
    if given == "in the search's file":
        conf = tmp_path / "conf" / "search"
        conf.mkdir(parents=True)
        small = (ROOT / "tests/integration/conf/search/small.yaml").read_text()
        (conf / "secret.yaml").write_text(small.replace("name: small", f"name: small\nstorage: {url}"))
        args = ["-cd", str(tmp_path / "conf"), *args, "search=secret"]
    else:
        env["TEAM_STORE"] = url
        args = [*args, "search=small", "search.storage=${oc.env:TEAM_STORE}"]
    if launcher == "gauntlet_local":  # jobs pickled under .submitit/, run by submitit's own processes
        # a trial and its node's baseline are paid before they start: 2 launches for the trial, 3 kept for
        # the confirmation, the baseline's block after it and its node's baseline should it need one
        args += ["hydra/launcher=gauntlet_local", "run.simulated_nodes=1"]
        args += ["search.max_launches=5", "search.confirm_top=1"]
    code, out, argvs = run(args, tmp_path, port, env)
    sweep = sweep_dir(tmp_path / "sweeps")
    assert code in (0, 8), out[-3000:]  # 8: a verdict within the client's lag on a loaded machine
    record = read_search(sweep)
    # one trial, or on gauntlet_local one or two (its node's baseline is paid with the first, as a second
    # launch; once it is measured the confirmation needs one launch less, and that launch may go to a trial)
    most = 2 if launcher == "gauntlet_local" else 1
    assert record is not None and 1 <= len(record.trials) <= most, out[-3000:]
    storage = optuna.storages.RDBStorage(url)
    try:  # the study is in the database the password opens: the sweep and its job reached it
        stored = optuna.load_study(study_name="small", storage=storage).trials
    finally:
        storage.engine.dispose()
    assert {t.number for t in record.trials} <= {t.number for t in stored}, (record.trials, stored)
    files = list(files_under(sweep, tmp_path / "sweeps" / ".lock"))
    names = {p.relative_to(tmp_path / "sweeps").as_posix() for p in files}
    assert {"config.yaml", "overrides.txt", "multirun.yaml"} <= {Path(n).name for n in names}, names
    assert any("/.hydra/" in n for n in names) and any(n.startswith(".lock/port-") for n in names), names
    if launcher == "gauntlet_local":
        assert any("/.submitit/" in n and n.endswith(".pkl") for n in names), names
    for path in files:
        data = path.read_bytes()
        assert PASSWORD.encode() not in data and TOKEN.encode() not in data, path
    assert PASSWORD not in out and TOKEN not in out
    assert argvs and not [a for a in argvs if PASSWORD in a or TOKEN in a]
    assert "<from $" in (sweep / "config.yaml").read_text()


def test_a_password_on_the_command_line_is_refused_before_anything_is_written(
    tmp_path: Path, port: int, role: str
) -> None:
    env = {**os.environ, "GAUNTLET_LOCK_DIR": str(tmp_path / "sweeps" / ".lock")}
    args = [*FAST, "search=small", f"search.storage={with_password(role)}"]
    code, out, _ = run(args, tmp_path, port, {**env, "GAUNTLET_TEST_HFTOK": TOKEN})
    assert code == 2, out[-3000:]
    assert PASSWORD not in out and "team_secret:***@127.0.0.1" in out and "PGPASSWORD or ~/.pgpass" in out
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("how", ["PGPASSWORD", "PGPASSFILE", "neither"])
def test_psycopg_reads_libpqs_password_variable_and_file_for_a_url_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_cluster: Cluster, role: str, how: str
) -> None:
    """What docs/search.md advises: the URL without its password, the password where libpq looks."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{postgres_cluster.port}:*:team_secret:{PASSWORD}\n")
    passfile.chmod(0o600)  # libpq ignores a password file others can read
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    if how == "PGPASSWORD":
        monkeypatch.setenv("PGPASSWORD", PASSWORD)
    elif how == "PGPASSFILE":
        monkeypatch.setenv("PGPASSFILE", str(passfile))
    engine = create_engine(role)
    try:
        if how == "neither":
            with pytest.raises(OperationalError, match="password"):
                engine.connect()
            return
        with engine.connect() as conn:
            assert conn.execute(text("select current_user")).scalar() == "team_secret"
    finally:
        engine.dispose()
