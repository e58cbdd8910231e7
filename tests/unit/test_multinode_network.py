"""Network settings per host (issue 45 item 5): host.network.interface checked when the config is composed,
rendered as GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME and each node's VLLM_HOST_IP (launch.netif), the head
met at its address on that interface, and doctor's check that every node resolves and reaches the head's
RPC port (launch.netcheck), through injected seams."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contracts.errors import ConfigError, LaunchError
from launch.spec import LaunchSpec, render_spec
from orchestrator.config.compose import ConfigLocation
from tests.ports import free_port
from tests.unit.composed import load

ROOT = Path(__file__).resolve().parents[2]
DP_NODES = [
    "host=sim_2x8",
    "candidate=tp4_dp2",
    "candidate.tensor_parallel_size=8",
    "candidate.data_parallel_size=2",
]


@pytest.mark.parametrize(
    ("value", "ok"),
    [("ib0", True), ("eth1.100", True), ("eth 0", False), ("a/b", False), ("averyveryverylong0", False)],
)
def test_the_interface_is_checked_when_the_config_is_composed(value: str, ok: bool) -> None:
    overrides = [*DP_NODES, f"+host.network.interface='{value}'"]
    if ok:
        cfg, _ = load(overrides)
        assert cfg.host.network.interface == value
        return
    with pytest.raises(ConfigError) as caught:
        load(overrides)
    line = next(ln for ln in str(caught.value).splitlines() if "host.network.interface" in ln)
    assert repr(value) in line and "a network interface name" in line and "sim_2x8.yaml" in line


def _spec(*extra: str) -> LaunchSpec:
    cfg, _ = load([*DP_NODES, *extra])
    return render_spec(cfg.service, cfg.candidate, cfg.host)


WRAP = ["python", "-m", "launch.netif", "--interface", "ib0", "--"]


@pytest.mark.parametrize(
    ("extra", "env", "wrapped"),
    [
        (["+host.network.interface=ib0"], {"GLOO_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAME": "ib0"}, True),
        ([], {}, False),  # no interface: as before
        (["+host.network.interface=ib0", "+host.env.NCCL_SOCKET_IFNAME=ib1"],  # the host's own env wins
         {"GLOO_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAME": "ib1"}, True),
    ],
)  # fmt: skip
def test_the_interface_sets_every_nodes_socket_variables_and_host_ip(
    extra: list[str], env: dict[str, str], wrapped: bool
) -> None:
    spec = _spec(*extra)
    assert {k: v for k, v in spec.env.items() if k.endswith("SOCKET_IFNAME")} == env
    for node in range(spec.nodes):
        assert (list(spec.node_argv(node)[:6]) == WRAP) is wrapped
    assert spec.interface == ("ib0" if wrapped else None)
    assert spec.rpc_port == 29550  # still found behind the wrapper


def test_a_single_node_spec_ignores_the_interface() -> None:
    one = ["candidate.tensor_parallel_size=2", "candidate.data_parallel_size=2"]
    assert _spec(*one, "+host.network.interface=ib0").fingerprint == _spec(*one).fingerprint


V4 = SimpleNamespace(family=socket.AF_INET, address="10.1.0.7")
V6 = SimpleNamespace(family=socket.AF_INET6, address="fe80::1")


@pytest.mark.parametrize(
    ("interface", "found", "expected"),
    [
        ("ib0", {"lo": [], "ib0": [V6, V4]}, "10.1.0.7"),
        ("ib0", {"lo": [], "eth0": [V4]}, "'ib0' does not exist on"),
        ("ib0", {"ib0": [V6]}, "'ib0' has no IPv4 address"),
    ],
)
def test_a_nodes_address_on_the_interface(interface: str, found: dict[str, list[Any]], expected: str) -> None:
    from launch.netif import head_address, interface_address

    if "." in expected and " " not in expected:
        assert interface_address(interface, lambda: found) == expected
        assert head_address(interface, lambda: "n1-addr", lambda: found) == expected
        assert head_address(None, lambda: "n1-addr", lambda: found) == "n1-addr"
        return
    with pytest.raises(LaunchError) as caught:
        interface_address(interface, lambda: found)
    assert expected in str(caught.value) and f"(interfaces: {', '.join(sorted(found))})" in str(caught.value)


@pytest.mark.parametrize(
    ("argv", "code", "out"),
    [
        (["--interface", "lo", "--", "python", "-c", "import os; print(os.environ['VLLM_HOST_IP'])"], 0,
         "127.0.0.1"),
        (["--interface", "nosuch0", "--", "python", "-c", "print(1)"], 1, "'nosuch0' does not exist"),
        (["--interface", "lo", "python"], 2, "usage: python -m launch.netif"),
    ],
)  # fmt: skip
def test_the_wrapper_sets_vllm_host_ip_on_its_node_and_runs_the_server(
    argv: list[str], code: int, out: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "launch.netif", *argv],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code and out in done.stdout + done.stderr


def _net(
    resolves: dict[str, str | None], unreachable: dict[str, str], head: str | Exception = "10.0.0.1"
) -> Any:
    from launch.netcheck import NodeNetwork

    def head_of(spec: LaunchSpec) -> str:
        if isinstance(head, Exception):
            raise head
        return head

    return NodeNetwork(
        names=lambda spec: ["n1", "n2"][: spec.nodes],
        head=head_of,
        resolve=resolves.get,
        reach=lambda spec, node, name, address, port: unreachable.get(name),
    )


OK = {"n1": "10.0.0.1", "n2": "10.0.0.2"}


@pytest.mark.parametrize(
    ("resolves", "unreachable", "head", "problems", "note"),
    [
        (OK, {}, "10.0.0.1", [], "network: 2 nodes of tp4_dp2 (n1, n2) resolve and reach 10.0.0.1:29550"),
        ({"n1": "10.0.0.1", "n2": None}, {}, "10.0.0.1",
         ["node 1 (n2) does not resolve: the launch could not place its ranks"], None),
        (OK, {"n2": "ConnectionRefusedError: [Errno 111] Connection refused"}, "10.0.0.1",
         ["node 1 (n2) cannot reach the head's RPC port 10.0.0.1:29550 (host.rpc_port): "
          "ConnectionRefusedError: [Errno 111] Connection refused"], None),
        ({"n1": None, "n2": "10.0.0.2"}, {}, "10.0.0.1",
         ["node 0 (n1) does not resolve: the launch could not place its ranks"], None),
        (OK, {}, LaunchError("a multi-node candidate on a GPU host runs inside a SLURM job"), [],
         "not checked here (a multi-node candidate on a GPU host runs inside a SLURM job"),
    ],
)  # fmt: skip
def test_doctor_checks_every_node_resolves_and_reaches_the_heads_rpc_port(
    resolves: dict[str, str | None],
    unreachable: dict[str, str],
    head: str | Exception,
    problems: list[str],
    note: str | None,
) -> None:
    from launch.netcheck import network_problems

    found, notes = network_problems(_spec(), _net(resolves, unreachable, head))
    assert found == problems
    assert (note is not None and any(note in n for n in notes)) or (note is None and notes == [])
    assert network_problems(_spec("candidate.data_parallel_size=1"), _net({}, {})) == ([], [])  # one node


@pytest.mark.parametrize("taken", [False, True])
def test_the_real_check_on_this_machine_listens_on_the_rpc_port_and_probes_it(taken: bool) -> None:
    from launch.netcheck import network_problems, real_network

    rpc = free_port()
    spec = _spec(f"host.rpc_port={rpc}")
    holder = socket.socket()
    if taken:  # another process holds the head's RPC port: the ranks could not meet there
        holder.bind(("127.0.0.1", rpc))
        holder.listen(1)
    try:
        found, notes = network_problems(spec, real_network({}))
    finally:
        holder.close()
    if taken:
        assert len(found) == 1 and f"the head cannot listen on 127.0.0.1:{rpc}" in found[0]
    else:
        assert found == [] and notes == [
            f"network: 2 nodes of tp4_dp2 (localhost, localhost) resolve and reach 127.0.0.1:{rpc}"
        ]


def test_doctor_reports_a_node_that_cannot_reach_the_head() -> None:
    from orchestrator.doctor import doctor
    from tests.unit.test_multinode_spec import doctor_probes

    net = _net(OK, {"n2": "TimeoutError: timed out"})
    report = doctor([*DP_NODES], ConfigLocation(), doctor_probes(), network=net)
    lines = [p.line() for p in report.problems if p.check == "network"]
    assert len(lines) == 1 and "node 1 (n2) cannot reach the head's RPC port 10.0.0.1:29550" in lines[0]
