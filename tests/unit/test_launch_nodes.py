"""Where a multi-node server's followers run (launch/nodes.py): this machine, or SLURM job steps, with a
fake ``scontrol``/``squeue``/``scancel``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contracts.errors import LaunchError
from launch.nodes import LocalNodes, SlurmNodes, cancel_steps, node_launcher, slurm_nodes, step_name

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
        "--kill-on-bad-exit=1", "--job-name=gauntlet-node1-8000", "python", "-m", "launch.sim",
    ]  # fmt: skip
    with pytest.raises(LaunchError, match="needs 3 nodes; SLURM job 42 has 2"):
        nodes.names(3)


def test_the_heads_address_is_its_node_addr_resolved() -> None:
    nodes = slurm_nodes(JOB, FakeSlurm(), resolve={"10.0.0.1": "192.168.0.7"}.__getitem__)
    assert nodes is not None and nodes.head_address() == "192.168.0.7"


def test_the_head_is_the_node_gauntlet_runs_on() -> None:
    nodes = slurm_nodes({**JOB, "SLURMD_NODENAME": "n2"}, FakeSlurm())
    assert nodes is not None and nodes.names(2) == ["n2", "n1"]


def test_cancel_steps_cancels_only_this_servers_followers() -> None:
    listed = f"42.0 batch\n42.3 {step_name(1, 8000)}\n42.4 {step_name(1, 9000)}\n"
    fake = FakeSlurm(listed)
    assert cancel_steps("42", 8000, 2, fake) == ["42.3"]
    assert ["scancel", "42.3"] in fake.calls and ["scancel", "42.4"] not in fake.calls
