"""One API server per node (issue 45 item 3c): the candidate's data_parallel_load_balancing renders vLLM's
documented hybrid and external commands per node, and validation refuses what vLLM 0.32 or gauntlet
cannot run, naming the file, the field, the value and what is allowed."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from launch.api_servers import api_servers
from launch.spec import HEAD_ADDRESS, render_spec
from tests.unit.composed import load

FOUR_BY_8 = ["host=sim_2x8", "host.nodes=4", "host.gpu_count=32"]
PORTS4 = ["8000", "8001", "8002", "8003"]
LB = "candidate.data_parallel_load_balancing"
RPC = ["--data-parallel-address", HEAD_ADDRESS, "--data-parallel-rpc-port", "29550"]


def _hybrid(local: int, start: int) -> list[str]:
    return ["--data-parallel-hybrid-lb", "--data-parallel-size-local", str(local),
            "--data-parallel-start-rank", str(start), *RPC]  # fmt: skip


def _external(rank: int) -> list[str]:
    return ["--data-parallel-external-lb", "--data-parallel-rank", str(rank), *RPC]


def _port(argv: tuple[str, ...]) -> str:
    return argv[argv.index("--port") + 1]


@pytest.mark.parametrize(
    ("host", "shape", "mode", "tails", "ports"),
    [
        # TP4 x DP4 on 2 x 8: two ranks a node, each node's API server serves its own two
        (["host=sim_2x8"], (4, 4), "hybrid", [_hybrid(2, 0), _hybrid(2, 2)], ["8000", "8001"]),
        (["host=sim_2x8"], (2, 8), "hybrid", [_hybrid(4, 0), _hybrid(4, 4)], ["8000", "8001"]),
        (FOUR_BY_8, (4, 8), "hybrid", [_hybrid(2, 2 * k) for k in range(4)], PORTS4),
        # one rank a node: rendered as asked; vLLM runs it as external load balancing (MoE models)
        (["host=sim_2x8"], (8, 2), "hybrid", [_hybrid(1, 0), _hybrid(1, 1)], ["8000", "8001"]),
        # TP8 x DP2: one rank a node, each rank its own server
        (["host=sim_2x8"], (8, 2), "external", [_external(0), _external(1)], ["8000", "8001"]),
        (FOUR_BY_8, (8, 4), "external", [_external(k) for k in range(4)], PORTS4),
    ],
)  # fmt: skip
def test_hybrid_and_external_render_vllms_documented_command_on_every_node(
    host: list[str], shape: tuple[int, int], mode: str, tails: list[list[str]], ports: list[str]
) -> None:
    tp, dp = shape
    cfg, _ = load(
        [*host, "candidate=tp4_dp2", f"candidate.tensor_parallel_size={tp}",
         f"candidate.data_parallel_size={dp}", f"candidate.data_parallel_load_balancing={mode}"]
    )  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    nodes = [spec.argv, *spec.followers]
    assert [list(argv[argv.index("--sim-time-scale") + 2 :]) for argv in nodes] == tails
    assert [_port(argv) for argv in nodes] == ports
    assert not any("--headless" in argv for argv in nodes)  # every node serves
    assert api_servers(spec.port, spec.followers) == [(k, int(p)) for k, p in enumerate(ports)]
    # the rest of each node's command is the head's: the candidate's flags, the model, the DP size
    strip = [[part for i, part in enumerate(argv) if i != argv.index("--port") + 1] for argv in nodes]
    assert all(argv[: -len(tails[0])] == strip[0][: -len(tails[0])] for argv in strip)


def test_internal_is_todays_head_and_headless_followers_with_one_api_server() -> None:
    cfg, _ = load(["host=sim_2x8", "candidate=tp4_dp2", "candidate.data_parallel_size=4"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert cfg.candidate.data_parallel_load_balancing == "internal"
    assert "--headless" in spec.followers[0] and _port(spec.followers[0]) == "8000"
    assert api_servers(spec.port, spec.followers) == [(0, 8000)]


@pytest.mark.parametrize(
    ("host", "overrides", "field", "value", "allowed"),
    [
        (["host=sim_2x8"], [f"{LB}=round_robin"],
         "data_parallel_load_balancing", "round_robin", "one of internal, hybrid, external"),
        # fits one node: one API server (TP4 x DP2 on an 8-GPU node)
        (["host=sim_2x8"], ["candidate.data_parallel_size=2", f"{LB}=hybrid"],
         "data_parallel_load_balancing", "hybrid", "ranks fit one node of host 'sim_2x8'"),
        (["host=sim"], [f"{LB}=external"],
         "data_parallel_load_balancing", "external", "ranks fit one node of host 'sim'"),
        # one replica across nodes (TP16): no DP to balance
        (["host=sim_2x8"], ["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1",
                            f"{LB}=hybrid"],
         "data_parallel_load_balancing", "hybrid", "one replica across 2 nodes"),
        # external is one server per rank; gauntlet runs one process a node
        (["host=sim_2x8"], ["candidate.data_parallel_size=4", f"{LB}=external"],
         "data_parallel_load_balancing", "external", "puts 2 ranks on each node"),
        # vLLM's own flags come from the field only
        (["host=sim_2x8"], ["candidate.data_parallel_size=4",
                            "+candidate.extra_args.data_parallel_hybrid_lb=true"],
         "extra_args.data_parallel_hybrid_lb", "True", "set data_parallel_load_balancing"),
        (["host=sim_2x8"], ["candidate.data_parallel_size=4", "+candidate.extra_args.data-parallel-rank=1"],
         "extra_args.data-parallel-rank", "1", "set data_parallel_load_balancing"),
    ],
)  # fmt: skip
def test_validation_refuses_load_balancing_vllm_or_gauntlet_cannot_run(
    host: list[str], overrides: list[str], field: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load([*host, "candidate=tp4_dp2", *overrides])
    line = next(line for line in str(caught.value).splitlines() if f"{field} = " in line)
    assert f"{field} = {value}" in line.replace("'", "") and allowed in line
    assert "override" in line  # where the value came from
