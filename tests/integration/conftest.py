"""Fixtures shared by the integration tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launch.supervisor import Server as LaunchedServer
from launch.supervisor import Supervisor
from tests.integration.ref_load import Server
from tests.integration.sweep_helpers import kill_servers, reap_started
from tests.markers import mark_folder
from tests.ports import free_port
from tests.postgres import Cluster, database_name, find_bindir, require_or_skip, running_cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def reap_sweeps() -> Iterator[None]:
    """After each test, kill any sweep it started and left running (it failed before the sweep ended)."""
    yield
    reap_started()


@pytest.fixture
def port() -> Iterator[int]:
    """A free port for one sweep; any simulator a test left on it is killed afterwards."""
    value = free_port()
    yield value
    kill_servers(value)


@pytest.fixture
def ref_server() -> Iterator[Server]:
    """Start the reference server (benchmarks/sse_server.py) with extra flags; returns its base URL (https
    with --tls-cert). Every one started is stopped after the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> str:
        argv = [sys.executable, str(ROOT / "benchmarks" / "sse_server.py"), "--port", "0", *flags]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the server prints its port once it listens
        assert line.startswith("listening on"), line
        scheme = "https" if "--tls-cert" in flags else "http"
        return f"{scheme}://127.0.0.1:{int(line.split()[-1])}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for the session (tests/postgres.py); skipped where the binaries or the
    driver are missing, failed instead under GAUNTLET_REQUIRE_POSTGRES=1."""
    require_or_skip()
    bindir = find_bindir()
    assert bindir is not None  # require_or_skip checked it
    with running_cluster(bindir) as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's cluster, as a SQLAlchemy URL (postgresql+psycopg://...)."""
    return postgres_cluster.create_database(database_name(request.node.nodeid))


@pytest.fixture
def sup() -> Iterator[Supervisor]:
    """A supervisor that polls often, for the multi-node supervisor tests (a module may define its own)."""
    yield Supervisor(project_root=ROOT, poll_interval_s=0.05)


@pytest.fixture
def started(sup: Supervisor) -> Iterator[list[LaunchedServer]]:
    """The servers a test started with ``sup``, each torn down after it whatever the test did."""
    servers: list[LaunchedServer] = []
    yield servers
    for server in servers:
        with contextlib.suppress(Exception):
            sup.teardown(server)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is marked ``integration`` (real subprocesses)."""
    mark_folder(items, __file__, pytest.mark.integration)
