"""The search (issue 34): its typed configuration (``conf/search/``), its space as data, and its record.

Pipeline position: a shared contract. ``conf/search/<name>.yaml`` is composed onto :class:`SearchConfig`
(``GauntletConfig.search``; None: no search, the sweep measures the candidates it is given). The space's
expressions are Hydra's sweep syntax, parsed by :mod:`orchestrator.config.space` into a :class:`Space`;
the sweep records every trial in ``search/trials.json`` (:mod:`contracts.trials`), which the report
reads. A trial's figure is the search's *estimate*; the verdict on the winner is
the confirmation's, measured again as an ordinary candidate against the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Candidate fields a space may vary (``layout`` picks one of ``SearchConfig.layouts``: TP x DP x EP);
#: besides them, any vLLM flag through the candidate's ``extra_args`` (:data:`EXTRA_PREFIX`).
SEARCH_FIELDS = (
    "layout",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "speculative.method",
    "speculative.num_speculative_tokens",
    "moe_backend",
    "kv_cache_dtype",
)
#: A space's field ``extra_args.<flag>`` varies one of vLLM's flags that no typed field renders (the flag's
#: name without ``--``, e.g. ``extra_args.block_size``, ``extra_args.enable_prefix_caching``): the point's
#: value goes into the candidate's ``extra_args`` (true -> ``--flag``, false -> ``--no-flag``), and plan
#: checks every value against the installed vLLM's flags (doctor's flag table).
EXTRA_PREFIX = "extra_args."
#: Fields of SEARCH_FIELDS that take whole numbers (CandidateConfig's and SpeculativeConfig's ``int``): an
#: interval over one is sampled as integers, and a point's value for one is an integer
#: (tests/unit/test_search_point.py reads the types, so the two cannot drift apart).
INTEGER_FIELDS = ("max_num_seqs", "max_num_batched_tokens", "speculative.num_speculative_tokens")
#: Fields a named layout may set.
LAYOUT_FIELDS = ("tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "enable_eplb")
#: ``speculative.method`` value that turns speculative decoding off.
SPECULATIVE_OFF = "off"
#: What a search optimises: capacity at the SLO (the capacity search's answer), goodput (output tokens/s
#: of requests that met the SLO) or output tokens/s per GPU, both at ``load_level`` (maximised); or $ per
#: million output tokens at the capacity the SLO allows (minimised; needs ``host.gpu_hour_price``).
OBJECTIVES = ("capacity", "goodput", "tps_per_gpu", "usd_per_mtok_at_slo")
#: The objectives a search minimises (the others it maximises).
MINIMISED = ("usd_per_mtok_at_slo",)
SAMPLERS = ("tpe", "random")
PRUNERS = ("successive_halving", "hyperband", "none")


@dataclass
class SearchConfig:
    """A search over candidate fields (conf/search/): the space, the objective, the budget, the engine."""

    # Short name of the search; it names the study and the winner (<name>_t<trial>).
    name: str = "search"
    # The space: candidate field -> Hydra sweep expression, choice(a,b), range(start,stop,step),
    # interval(low,high) or tag(log,interval(low,high)); a plain value fixes the field. Nested keys
    # (speculative: {method: ...}) name nested fields. Fields: contracts.search.SEARCH_FIELDS, and any
    # vLLM flag as extra_args: {block_size: choice(16, 32), enable_prefix_caching: choice(true, false)}
    # (int(interval(a,b)) draws a flag's whole numbers; interval(a,b) fractions).
    space: dict[str, Any] = field(default_factory=dict)
    # Named layouts for the `layout` field: name -> {tensor_parallel_size, data_parallel_size,
    # enable_expert_parallel, enable_eplb}; plan checks each against the host's placement rule.
    layouts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the search optimises: capacity (default), goodput, tps_per_gpu (maximised) or
    # usd_per_mtok_at_slo ($ per million output tokens at the SLO's capacity, minimised) (OBJECTIVES).
    objective: str = "capacity"
    # Also minimise the serial latency (median end-to-end time of the serial profile): a Pareto front of
    # capacity vs latency instead of one best point (no pruning: Optuna prunes single objectives only).
    pareto: bool = False
    # Load level of the goodput and tps_per_gpu objectives and of the screening probe (requests in flight
    # or requests/s, as capacity.profile's mode); None = the baseline's measured capacity.
    load_level: float | None = None
    # Most server launches the search may spend (a point pruned before it starts costs none).
    max_launches: int = 16
    # Most GPU-hours the search may spend (GPUs x host seconds of its launches); None = no bound.
    max_gpu_hours: float | None = None
    # Stop after this many fully measured trials in a row that did not improve the best by min_improvement
    # (a point that did not start or whose screen was pruned could not improve it, and does not count).
    stall_trials: int = 8
    # Smallest relative improvement of the best estimate that counts (0.02 = 2%).
    min_improvement: float = 0.02
    # Optuna's RDB storage URL (sqlite:///..., postgresql://user@host/db) for a team's shared study;
    # None = an SQLite file in the sweep directory (search/study.db), which a resumed sweep reopens.
    storage: str | None = None
    # Sampler: tpe (Optuna's TPE, learning from infeasible points through its constraints) or random.
    sampler: str = "tpe"
    # Finished trials before TPE models the space, the search's own first points counted (the baseline's
    # point, each layout's start probe); those after them are random.
    startup_trials: int = 4
    # Sampler seed.
    seed: int = 0
    # Multi-fidelity: successive_halving or hyperband promote a screened point to the full capacity
    # search only when its screen is among the best 1/reduction_factor; none measures every point fully.
    pruner: str = "successive_halving"
    reduction_factor: int = 3
    # Confirmations, inside the budget: the search's trials leave this many launches of max_launches (and
    # their GPU-hours) for them. The best confirm_top distinct feasible points are confirmed together
    # against the baseline; while none is a KEEP and the budget lasts, the runner-ups one at a time. The
    # recommendation is the best confirmed KEEP.
    confirm_top: int = 2
    # Trials measured at once, each a job on a node of its own with that node's baseline (docs/search.md):
    # needs a launcher that runs jobs side by side (hydra/launcher=gauntlet_slurm, or gauntlet_local with
    # run.simulated_nodes); 1 = one trial after the other in the sweeping process.
    parallel: int = 1


# ---------------------------------------------------------------- the space, parsed (pure data)


@dataclass(frozen=True)
class Dimension:
    """One field of the space: a finite list of values, or a continuous interval."""

    name: str
    #: choice / range: the values; interval: empty.
    values: tuple[Any, ...] = ()
    #: interval: its bounds and scale.
    low: float | None = None
    high: float | None = None
    log: bool = False
    #: interval: drawn as whole numbers (an integer field, or ``int(interval(a,b))`` on an extra flag).
    integer: bool = False

    @property
    def finite(self) -> bool:
        return self.low is None


@dataclass(frozen=True)
class Space:
    """The parsed space: its dimensions in declaration order, the named layouts, what is fixed."""

    dimensions: tuple[Dimension, ...]
    layouts: dict[str, dict[str, Any]]
    fixed: dict[str, Any]

    @property
    def size(self) -> int | None:
        """Points in the space (None: an interval makes it continuous)."""
        total = 1
        for dim in self.dimensions:
            if not dim.finite:
                return None
            total *= len(dim.values)
        return total
