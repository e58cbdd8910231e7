"""A throwaway PostgreSQL cluster for tests: Debian's ``postgresql`` package, started in a temporary folder.

``Cluster`` runs ``initdb`` and ``pg_ctl`` (as the ``postgres`` user when the tests run as root: PostgreSQL
refuses to run as root), listens on 127.0.0.1 at a free port with trust authentication, and hands out a
fresh database per test as a SQLAlchemy URL (``postgresql+psycopg://...``: psycopg 3, the driver SQLAlchemy
2 names first for PostgreSQL); :meth:`Cluster.password_role` adds a role that must give its password.
``pg_ctl stop -m immediate`` and the folder's removal end it.

Where the binaries are missing, ``missing_reason`` says why and the fixture skips; with
``GAUNTLET_REQUIRE_POSTGRES=1`` (CI installs the package) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ports import free_port

REQUIRE_ENV = "GAUNTLET_REQUIRE_POSTGRES"
#: Debian puts the server's programs here, not on PATH (only psql and the wrappers are on PATH).
DEBIAN_BINDIRS = "/usr/lib/postgresql"
SUPERUSER = "gauntlet"


def find_bindir(path: str | None = None, debian: Path = Path(DEBIAN_BINDIRS)) -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: from PATH, else Debian's newest version."""
    on_path = shutil.which("initdb", path=path)
    if on_path is not None:
        folder = Path(on_path).resolve().parent
        if (folder / "pg_ctl").exists() and (folder / "postgres").exists():
            return folder
    versions = sorted(
        (p for p in debian.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1,
    )
    return versions[-1] if versions else None


def _as_postgres(argv: Sequence[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when this process is root (the server refuses root)."""
    if os.geteuid() != 0:
        return list(argv)
    return ["runuser", "-u", "postgres", "--", *argv]


def missing_reason() -> str | None:
    """None when a cluster can be started here; else what is missing and how to get it."""
    if find_bindir() is None:
        return "PostgreSQL's initdb/pg_ctl not found (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no postgres user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser (util-linux) is missing"
    try:
        import psycopg  # noqa: F401  # the driver of the URL the fixture hands out
    except ImportError:
        return "the psycopg driver is not installed (pip install -e '.[postgres]')"
    return None


@dataclass(frozen=True)
class Cluster:
    """A running cluster: where its programs are, its port, its socket folder and its data folder."""

    bindir: Path
    port: int
    socket_dir: Path
    data_dir: Path

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this cluster."""
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create ``name`` and return its URL."""
        subprocess.run(
            [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return self.url(name)

    def password_role(self, name: str, password: str) -> str:
        """A role that must give ``password`` over TCP (scram-sha-256: a line of ``pg_hba.conf`` above the
        trust lines, the first that matches decides) and a database of its own; returns the database's URL
        without the password. ``password`` is letters and digits (it is spliced into SQL)."""
        assert name.isidentifier() and password.isalnum()
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(f"host all {name} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        _run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "reload"])
        for sql in (
            f"CREATE ROLE {name} LOGIN PASSWORD '{password}'",
            f"CREATE DATABASE {name} OWNER {name}",
        ):
            _run([str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER,
                  "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql])  # fmt: skip
        url = f"postgresql+psycopg://{name}@127.0.0.1:{self.port}/{name}"
        deadline = time.monotonic() + 30  # the reload is a signal: wait until the server asks for it
        while not self._refused_without_password(url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{hba}: the server still lets {name} in without a password")
            time.sleep(0.05)
        return url

    def _refused_without_password(self, url: str) -> bool:
        import psycopg  # the driver is optional (missing_reason says so)

        dsn = url.replace("postgresql+psycopg://", "postgresql://")
        try:
            psycopg.connect(dsn, connect_timeout=10, passfile="/dev/null", password="").close()
        except psycopg.OperationalError as exc:
            return "password" in str(exc)
        return False


@contextmanager
def running_cluster(bindir: Path) -> Iterator[Cluster]:
    """Start a cluster in a fresh temporary folder; stop it and remove the folder on the way out."""
    top = Path(tempfile.mkdtemp(prefix="gauntlet-pg-"))
    data, sockets = top / "data", top / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(top, "postgres")
        shutil.chown(sockets, "postgres")
    port = free_port()
    started = False
    try:
        _run([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
              "--no-sync", "--no-instructions"])  # fmt: skip
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off -c full_page_writes=off"
        _run([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(top / "server.log"),
              "-w", "-t", "60", "start"])  # fmt: skip
        started = True
        yield Cluster(bindir=bindir, port=port, socket_dir=sockets, data_dir=data)
    finally:
        if started:
            _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(top, ignore_errors=True)


def _run(argv: Sequence[str], *, check: bool = True) -> None:
    done = subprocess.run(_as_postgres(argv), capture_output=True, text=True, timeout=120, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )


def require_or_skip() -> None:
    """Skip the test when no cluster can be started here; fail instead under GAUNTLET_REQUIRE_POSTGRES=1."""
    why = missing_reason()
    if why is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1: {why}")
    pytest.skip(why)


def database_name(nodeid: str) -> str:
    """A fresh database name for one test: its name made safe and cut to 40 characters, and a random tail
    (PostgreSQL folds case and allows 63 bytes; two parametrized rows must not share a database)."""
    tail = nodeid.rsplit("::", 1)[-1].lower()
    return "t_" + "".join(c if c.isalnum() else "_" for c in tail)[:40] + "_" + uuid.uuid4().hex[:8]
