"""Multi-node candidates (issue 35): where TP x DP sits on a host's nodes, one command per node, the
fingerprints, plan's output and validation's refusal; a single-node spec renders as before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts.errors import ConfigError, SpecTamperedError
from contracts.placement import NodeLayout, node_layout
from contracts.results import GpuMemory, HostProbe
from launch.preflight import Probes, diagnose, node_ranks
from launch.spec import CPU_BIND_ENV, HEAD_ADDRESS, LaunchSpec, render_spec, resolve_head
from orchestrator.plan import format_plan, plan
from tests.unit.composed import load
from tests.unit.test_spec import CPU_SMALL

#: Fingerprints recorded by the code before hosts had nodes: restore and rollback find recorded sweeps by
#: them, so a single-node spec must keep its bytes.
RECORDED = [
    (
        ["host=h100x8", "candidate=baseline"],
        "56d7c9d0e33234cc04d342f812a7f34c2bc0f7e1bcac231ab366acd0685ce417",
    ),
    (["host=sim", "candidate=tp4_dp2"], "bcb1235dac379b540316c4046f151ec52caaf63184c79464ab1cc7d45b4a7695"),
]


@pytest.mark.parametrize(
    ("tp", "dp", "nodes", "per", "expected"),
    [
        (8, 2, 2, 8, NodeLayout(2, 1)),
        (16, 1, 2, 8, NodeLayout(2, 0, 2)),
        (4, 2, 2, 8, NodeLayout(1, 2)),  # fits one node: a single-node launch
        (4, 4, 2, 8, NodeLayout(2, 2)),
        (2, 8, 2, 8, NodeLayout(2, 4)),
        (3, 4, 2, 8, NodeLayout(2, 2)),  # two TP3 replicas a node, 2 GPUs idle on each
        (8, 3, 2, 8, "needs 3 nodes of 8 GPUs; h has 2"),
        (4, 3, 2, 8, "DP must be a multiple of 2"),
        (12, 1, 2, 8, "must be a multiple of 8"),
        (16, 2, 2, 8, "needs 4 nodes"),
        (16, 2, 4, 8, NodeLayout(4, 0, 2)),
    ],
)
def test_node_layout(tp: int, dp: int, nodes: int, per: int, expected: NodeLayout | str) -> None:
    got = node_layout(tp, dp, nodes=nodes, gpus_per_node=per, where="h")
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert got == expected


@pytest.mark.parametrize(("overrides", "fingerprint"), RECORDED)
def test_a_single_node_spec_keeps_its_recorded_fingerprint(overrides: list[str], fingerprint: str) -> None:
    cfg, _ = load(overrides)
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.fingerprint == f"sha256:{fingerprint}"
    assert spec.nodes == 1 and spec.node_fingerprints() == [spec.fingerprint]
    assert "followers" not in spec.to_json()


def test_a_candidate_that_fits_one_node_renders_the_same_on_the_two_node_host() -> None:
    one, _ = load(["host=sim", "candidate=tp4_dp2"])
    two, _ = load(["host=sim_2x8", "candidate=tp4_dp2"])
    a = render_spec(one.service, one.candidate, one.host)
    b = render_spec(two.service, two.candidate, two.host)
    assert b.argv == a.argv and b.fingerprint == a.fingerprint and b.followers == ()


def _spec(tp: int, dp: int) -> LaunchSpec:
    cfg, _ = load(
        [
            "host=sim_2x8",
            "candidate=tp4_dp2",
            f"candidate.tensor_parallel_size={tp}",
            f"candidate.data_parallel_size={dp}",
        ]
    )
    return render_spec(cfg.service, cfg.candidate, cfg.host)


def _tail(argv: tuple[str, ...], after: str) -> list[str]:
    return list(argv[argv.index(after) + 2 :])


def test_dp_over_nodes_renders_a_head_and_a_headless_follower() -> None:
    spec = _spec(8, 2)
    assert spec.nodes == 2
    rpc = ["--data-parallel-address", HEAD_ADDRESS, "--data-parallel-rpc-port", "29550"]
    assert _tail(spec.argv, "--sim-time-scale") == ["--data-parallel-size-local", "1", *rpc]
    assert _tail(spec.followers[0], "--sim-time-scale") == [
        "--headless", "--data-parallel-start-rank", "1", "--data-parallel-size-local", "1", *rpc,
    ]  # fmt: skip
    head, follower = spec.node_fingerprints()
    assert len({head, follower, spec.fingerprint}) == 3
    assert resolve_head(spec.followers[0], "n1")[-3] == "n1"


def test_tp_across_nodes_renders_nnodes_and_node_ranks() -> None:
    spec = _spec(16, 1)
    master = ["--master-addr", HEAD_ADDRESS, "--master-port", "29550"]
    assert _tail(spec.argv, "--sim-time-scale") == ["--nnodes", "2", "--node-rank", "0", *master]
    assert _tail(spec.followers[0], "--sim-time-scale") == [
        "--headless", "--nnodes", "2", "--node-rank", "1", *master,
    ]  # fmt: skip


def test_a_multi_node_spec_round_trips_and_a_tampered_follower_is_refused() -> None:
    spec = _spec(8, 2)
    again = LaunchSpec.from_json(spec.to_json())
    assert again == spec
    tampered = replace(spec, followers=((*spec.followers[0][:-1], "29551"),))  # keeps the fingerprint
    with pytest.raises(SpecTamperedError):
        LaunchSpec.from_json(tampered.to_json())


def test_plan_prints_one_command_per_node() -> None:
    tp16 = ["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1"]
    text = format_plan(plan(["host=sim_2x8", "candidate=tp4_dp2", *tp16]))
    spec = _spec(16, 1)
    head, follower = spec.node_fingerprints()
    assert f"fingerprint: {spec.fingerprint} (the whole, 2 nodes)" in text
    assert f"node 0 (head): {head}" in text and f"node 1 (follower): {follower}" in text
    assert text.count("--headless") == 1 and "\n  command:" not in text  # only the nodes' commands


@pytest.mark.parametrize(
    ("overrides", "field", "value", "allowed"),
    [
        (["candidate.tensor_parallel_size=4", "candidate.data_parallel_size=3"],
         "tensor_parallel_size x data_parallel_size", "4 x 3", "DP must be a multiple of 2"),
        (["candidate.tensor_parallel_size=12", "candidate.data_parallel_size=1"],
         "tensor_parallel_size x data_parallel_size", "12 x 1", "must be a multiple of 8"),
        (["host.gpus_per_node=6"], "host.gpus_per_node", "6", "nodes x gpus_per_node = gpu_count (16)"),
        (["host.nodes=0"], "host.nodes", "0", "an integer >= 1"),
    ],
)  # fmt: skip
def test_validation_refuses_layouts_that_do_not_fit_the_nodes(
    overrides: list[str], field: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(["host=sim_2x8", "candidate=tp4_dp2", *overrides])
    text = str(caught.value)
    line = next(line for line in text.splitlines() if field in line)
    assert value in line and allowed in line
    assert "sim_2x8.yaml" in line or "tp4_dp2.yaml" in line or "override" in line


def doctor_probes() -> Probes:
    """One node of 8 H100s as NVML sees it; vLLM's flags and the weights are not what is checked here."""
    gpus = [GpuMemory(index=i, name="NVIDIA H100 80GB HBM3", total_gib=79.6, used_gib=0.5, free_gib=79.1)
            for i in range(8)]  # fmt: skip
    return Probes(
        host=lambda: HostProbe(driver=True, driver_version="570", gpus=gpus, compute_capability=["9.0"] * 8),
        resolve=lambda argv: ["/opt/venv/bin/vllm", *argv[1:]],
        version=lambda program: "0.32.0",
        help_text=lambda program, version: "",
        sim_help=lambda: "",
        read_file=lambda path: None,
        hf_snapshot=lambda model: None,
        port_in_use=lambda host, port: False,
        environ={},
    )


def test_doctor_checks_a_multi_node_candidate_against_one_nodes_gpus() -> None:
    two_by_8 = ["host.nodes=2", "host.gpus_per_node=8", "host.gpu_count=16", "host.placement=at_most"]
    wide = ["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=2"]
    cfg, _ = load(["host=h100x8", *two_by_8])
    cands = [load(["host=h100x8", "candidate=tp4_dp2", *two_by_8, *wide])[0].candidate]
    report = diagnose(cfg, [cfg.baseline, *cands], doctor_probes())  # 8 GPUs seen on this node
    assert [p.line() for p in report.problems if p.check == "gpu"] == []
    tp16 = [load(["host=h100x8", "candidate=tp4_dp2", *two_by_8, "candidate.tensor_parallel_size=16",
                  "candidate.data_parallel_size=1"])[0].candidate]  # fmt: skip
    assert node_ranks(tp16[0], cfg.host) == (8, 1, 1) and node_ranks(cands[0], cfg.host) == (8, 1, 1)
    assert node_ranks(cfg.baseline, cfg.host) == (2, 1, 4)  # TP2 x DP4 fits one node


@pytest.mark.parametrize(
    ("per", "tp", "dp", "bind", "nodes"),
    [
        (1, 1, 2, "0", 2),  # a replica a node: each binds its one rank to its core 0
        (2, 2, 2, "0|1", 2),  # a TP2 replica a node
        (2, 4, 1, "0|1", 2),  # TP4 across two 2-core nodes: two ranks a node
        (2, 1, 2, "0|1", 1),  # fits one node: bound as on a one-node host
    ],
)
def test_a_multi_node_cpu_host_binds_each_nodes_own_ranks(
    per: int, tp: int, dp: int, bind: str, nodes: int
) -> None:
    host = ["host.nodes=2", f"host.gpus_per_node={per}", f"host.gpu_count={2 * per}"]
    cfg, _ = load([*CPU_SMALL, *host, f"candidate.tensor_parallel_size={tp}",
                   f"candidate.data_parallel_size={dp}"])  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.env[CPU_BIND_ENV] == bind and spec.nodes == nodes
