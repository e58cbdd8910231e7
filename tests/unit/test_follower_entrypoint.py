"""A multi-node candidate's followers start through the host's follower_entrypoint (issue 35, item 6): on
the cpu host the head keeps vLLM's module entry point and each ``--headless`` follower runs ``vllm serve``
through scripts/vllm_serve.py, since the module form has no headless mode (docs/multinode.md); a host
without one starts its followers as its head."""

from __future__ import annotations

import pytest

from launch.spec import render_spec
from tests.unit.composed import load
from tests.unit.test_spec import CPU_SMALL

CPU_2X1 = [*CPU_SMALL, "host.nodes=2", "host.gpus_per_node=1", "host.gpu_count=2",
           "candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2"]  # fmt: skip
SIM_2X8 = ["host=sim_2x8", "candidate=tp4_dp2", "candidate.tensor_parallel_size=8",
           "candidate.data_parallel_size=2"]  # fmt: skip
MODULE = [".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
SERVE = [".venv-vllm/bin/python", "scripts/vllm_serve.py", "serve"]


@pytest.mark.parametrize(
    ("overrides", "head", "follower"),
    [
        (CPU_2X1, [*MODULE, "MODEL"], [*SERVE, "MODEL"]),
        (  # a host's own follower entry point
            [*CPU_2X1, "host.follower_entrypoint=[bin/serve,'{model}',--x]"],
            [*MODULE, "MODEL"],
            ["bin/serve", "MODEL", "--x"],
        ),
        ([*CPU_2X1, "host.follower_entrypoint=[]"], [*MODULE, "MODEL"], [*MODULE, "MODEL"]),
        (
            SIM_2X8,
            ["python", "-m", "launch.sim", "--model", "MODEL"],
            ["python", "-m", "launch.sim", "--model", "MODEL"],
        ),
    ],
)
def test_followers_start_through_the_hosts_follower_entrypoint(
    overrides: list[str], head: list[str], follower: list[str]
) -> None:
    cfg, _ = load(overrides)
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    model = cfg.service.model
    (follower_argv,) = spec.followers
    assert list(spec.argv[: len(head)]) == [model if p == "MODEL" else p for p in head]
    assert list(follower_argv[: len(follower)]) == [model if p == "MODEL" else p for p in follower]
    # the same flags on every node; a follower's own: --headless from its first rank (DP over nodes: 6 of
    # the head's last flags say its local ranks, address and port)
    flags, placement = spec.argv[len(head) : -6], spec.argv[-6:]
    assert follower_argv[len(follower) :] == (
        *flags,
        "--headless",
        "--data-parallel-start-rank",
        "1",
        *placement,
    )


def test_a_single_node_cpu_candidate_is_started_as_before() -> None:
    cfg, _ = load([*CPU_SMALL, "candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.followers == () and list(spec.argv[:4]) == MODULE
    assert "scripts/vllm_serve.py" not in spec.argv
