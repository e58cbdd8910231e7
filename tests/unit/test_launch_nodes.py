"""Where a multi-node server's followers run (launch/nodes.py): this machine, or SLURM job steps, with a
fake ``scontrol``/``squeue``/``scancel``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.errors import LaunchError, TeardownError
from launch.nodes import LocalNodes, SlurmNodes, node_launcher, slurm_nodes
from launch.process import ProcInfo
from tests.unit.test_supervisor import FakeSystem, Scenario, make, make_spec

JOB = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-2]"}


class FakeSlurm:
    def __init__(self, squeue: str = "") -> None:
        self.calls: list[list[str]] = []
        self.squeue = squeue

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "n1\nn2\n" if argv[3] == "n[1-2]" else "n1\n"
        if argv[:3] == ["scontrol", "show", "node"]:
            return f"NodeName={argv[3]} Arch=x86_64\n   NodeAddr=10.0.0.1 NodeHostName=h1\n"
        if argv[0] == "squeue":
            return self.squeue
        return ""


@pytest.mark.parametrize(
    ("kind", "environ", "expected"),
    [
        ("sim", {}, LocalNodes()),
        ("cpu", {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n1"}, LocalNodes()),  # a one-node job
        ("gpu", JOB, SlurmNodes("42", ("n1", "n2"), "10.0.0.1")),
        ("sim", JOB, SlurmNodes("42", ("n1", "n2"), "10.0.0.1")),
    ],
)
def test_node_launcher(kind: str, environ: dict[str, str], expected: object) -> None:
    assert node_launcher(kind, environ, FakeSlurm()) == expected


def test_a_gpu_host_outside_a_slurm_job_is_refused() -> None:
    with pytest.raises(LaunchError, match="inside a SLURM job"):
        node_launcher("gpu", {}, FakeSlurm())


def test_a_follower_is_a_named_job_step_on_its_node() -> None:
    nodes = slurm_nodes(JOB, FakeSlurm())
    assert nodes is not None and nodes.names(2) == ["n1", "n2"]
    assert nodes.command(["python", "-m", "launch.sim"], 1, 8000) == [
        "srun", "--jobid=42", "--nodes=1", "--ntasks=1", "--nodelist=n2", "--overlap",
        "--kill-on-bad-exit=1", "--job-name=gauntlet-node1-8000", "env", "GAUNTLET_SERVER_NODE=n2",
        "python", "-m", "launch.sim",
    ]  # fmt: skip
    with pytest.raises(LaunchError, match="needs 3 nodes; SLURM job 42 has 2"):
        nodes.names(3)


def test_the_heads_address_is_its_node_addr_resolved() -> None:
    nodes = slurm_nodes(JOB, FakeSlurm(), resolve={"10.0.0.1": "192.168.0.7"}.__getitem__)
    assert nodes is not None and nodes.head_address() == "192.168.0.7"


def test_the_head_is_the_node_gauntlet_runs_on() -> None:
    nodes = slurm_nodes({**JOB, "SLURMD_NODENAME": "n2"}, FakeSlurm())
    assert nodes is not None and nodes.names(2) == ["n2", "n1"]


@dataclass
class RpcSquatter(FakeSystem):
    """The fake host of test_supervisor, with the ranks' port 29550 held by another program."""

    def port_in_use(self, host: str, port: int) -> bool:
        return port == RPC or super().port_in_use(host, port)

    def port_holders(self, port: int) -> list[ProcInfo]:
        return [ProcInfo(4343, 1.0, ("squatter",))] if port == RPC else super().port_holders(port)


RPC = 29550


@pytest.mark.parametrize("squatted", [False, True])
def test_teardown_of_a_multi_node_server_proves_the_ranks_port_free(tmp_path: Path, squatted: bool) -> None:
    system = (RpcSquatter if squatted else FakeSystem)(Scenario(ready_after=0.0))
    sup, _, _ = make(system=system)
    rpc = ("--data-parallel-rpc-port", str(RPC))
    spec = make_spec(argv=(*make_spec().argv, *rpc), followers=((*make_spec().argv, "--headless", *rpc),))
    server = sup.start(spec, tmp_path / "server.log")
    assert len(server.followers) == 1 and spec.rpc_port == RPC
    if not squatted:
        assert sup.teardown(server).port_free
        return
    with pytest.raises(TeardownError, match=f"left its ranks' port {RPC} taken by pid 4343"):
        sup.teardown(server)
