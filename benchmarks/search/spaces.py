"""The spaces the search-quality benchmark measures the search on, and their budgets.

Pipeline position: read by the driver (``benchmarks/search_quality.py``), which composes the demo's
experiment (``+experiment=demo_search``: its host, baseline, workloads, SLO and gates) and puts each space
in place of ``conf/search/demo.yaml``'s (:func:`with_space`). Pure data.

**Written before any tuning.** ``layout`` and ``edge`` were written on 2026-12-06, with their budgets and
stall rules, before the search or a brute force ran on either, and nothing of the search was tuned on them
(or on any seed of 10-49: seeds 0-9 are the ones used while developing). ``layout``'s best point was
expected in TP1 x DP8 (docs/simulator.md: MLA keeps the whole latent KV on every TP rank, so DP attention
with expert parallelism is this model's throughput layout), another layout than the baseline's TP2 x DP4;
``edge``'s at an end of three fields' ranges (48 sequences, the most of its list: the capacity is at most
``max_num_seqs`` x DP; a 16K budget, the most; k = 5, the fewest drafts, as fewer break serial latency).
The brute force says whether they are (the measurements page).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from contracts.schema import GauntletConfig

#: The layouts the spaces name (TP x DP, expert parallelism on, as the demo's).
LAYOUTS: dict[str, dict[str, Any]] = {
    "tp1_dp8": {"tensor_parallel_size": 1, "data_parallel_size": 8, "enable_expert_parallel": True},
    "tp2_dp4": {"tensor_parallel_size": 2, "data_parallel_size": 4, "enable_expert_parallel": True},
    "tp4_dp2": {"tensor_parallel_size": 4, "data_parallel_size": 2, "enable_expert_parallel": True},
}


@dataclass(frozen=True)
class BenchSpace:
    """A space of the benchmark: its fields (None: the demo's own file) and its search settings."""

    name: str
    why: str
    space: dict[str, Any] | None = None
    layouts: tuple[str, ...] = ()
    #: The search's budget (launches, the confirmations' included) and stall rule; None: the demo's.
    max_launches: int | None = None
    stall_trials: int | None = None


# Written before any tuning (2026-12-06): see the module's docstring. Each budget is at most 10% of its
# space (the goal), each stall rule a third of the budget, as the demo's (16 of 48).
SPACES: dict[str, BenchSpace] = {
    "demo": BenchSpace(
        name="demo",
        why="the demo's own space, as make demo-search runs it (576 points, 48 launches: 8.3%)",
    ),
    "layout": BenchSpace(
        name="layout",
        why="its best point expected in another layout than the baseline's (TP1 x DP8)",
        space={
            "layout": "choice(tp1_dp8, tp2_dp4, tp4_dp2)",
            "max_num_seqs": "choice(32, 48, 64, 128)",
            "max_num_batched_tokens": "choice(4096, 8192, 16384)",
            "gpu_memory_utilization": "choice(0.72, 0.81)",
            "speculative": {"num_speculative_tokens": "choice(1, 2, 3, 5, 7)"},
        },
        layouts=("tp1_dp8", "tp2_dp4", "tp4_dp2"),
        max_launches=36,  # 10% of 360
        stall_trials=12,
    ),
    "edge": BenchSpace(
        name="edge",
        why="its best point expected at an end of three fields' ranges (48 sequences, 16K, k = 5)",
        space={
            "layout": "choice(tp2_dp4, tp4_dp2)",
            "max_num_seqs": "choice(16, 24, 32, 48)",
            "max_num_batched_tokens": "choice(2048, 4096, 8192, 16384)",
            "gpu_memory_utilization": "choice(0.66, 0.72, 0.78)",
            "speculative": {"num_speculative_tokens": "choice(5, 6, 7)"},
        },
        layouts=("tp2_dp4", "tp4_dp2"),
        max_launches=28,  # 9.7% of 288
        stall_trials=9,
    ),
}


def with_space(cfg: GauntletConfig, bench: BenchSpace) -> GauntletConfig:
    """``cfg`` (the demo's experiment) searching ``bench``'s space with its budget."""
    assert cfg.search is not None
    search = cfg.search
    if bench.space is not None:
        search = replace(
            search,
            name=bench.name,
            space=bench.space,
            layouts={name: dict(LAYOUTS[name]) for name in bench.layouts},
        )
    if bench.max_launches is not None:
        search = replace(search, max_launches=bench.max_launches)
    if bench.stall_trials is not None:
        search = replace(search, stall_trials=bench.stall_trials)
    return replace(cfg, search=search)
