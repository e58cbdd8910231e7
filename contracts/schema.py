"""Typed configuration schema: the dataclasses behind every YAML file in ``conf/``.

Pipeline position: a shared contract. ``conf/*.yaml`` is composed by Hydra on top of these schemas
(registered in the ConfigStore by :func:`orchestrator.config.compose.register_configs`), then
:mod:`orchestrator.config.compose` validates the result and converts it once into these plain dataclasses.
This module imports neither Hydra nor OmegaConf, so every stage can use the types without loading them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.layout import DEFAULT_SWEEPS_DIR
from contracts.lmeval_sweep import LmEvalConfig
from contracts.network import NetworkConfig
from contracts.search import SearchConfig

#: OmegaConf's marker for a required value (``omegaconf.MISSING`` is this string); composing a config that
#: leaves one unset is an error naming the field.
MISSING: Any = "???"


@dataclass
class ServiceConfig:
    """What stays fixed across the sweep: the model and the flags every candidate shares."""

    # Model path or Hugging Face id, as vLLM takes it (positional for `vllm serve`, --model otherwise).
    model: str = MISSING
    # Name the OpenAI API serves the model under (--served-model-name); requests use it.
    served_model_name: str = MISSING
    # Model revision (git sha or tag) pinned for the sweep; None = the default branch.
    revision: str | None = None
    # Longest context in tokens (prompt + output) the server accepts (--max-model-len).
    max_model_len: int = 131072
    # KV cache element type (--kv-cache-dtype): auto, fp8, fp8_e4m3, fp8_e5m2, ...
    kv_cache_dtype: str = "auto"
    # Reasoning parser that splits hidden reasoning from visible content (--reasoning-parser); None = off.
    reasoning_parser: str | None = None
    # Address the server binds to (--host).
    bind_host: str = "127.0.0.1"
    # TCP port the server listens on (--port).
    port: int = 8000
    # Sampling seed of the engine (--seed).
    seed: int = 0
    # Further vLLM flags fixed for the whole sweep: flag name without "--" -> value
    # (true -> --flag, false -> --no-flag, mapping/list -> JSON).
    extra_args: dict[str, Any] = field(default_factory=dict)
    # Environment variables for the server process: literal values are not secrets; a secret comes as
    # ${oc.env:NAME}, written <from $NAME> everywhere and read from gauntlet's environment at launch.
    env: dict[str, str] = field(default_factory=dict)
    # Names of secret environment variables (tokens, API keys) copied from gauntlet's own environment at
    # launch; their values are never written, printed or fingerprinted.
    pass_env: list[str] = field(default_factory=list)
    # Name of the environment variable holding the API key the served API requires (vLLM's --api-key,
    # handed to the server as VLLM_API_KEY); the health checks and the load runner send it as a Bearer
    # token. None = no key. Its value is read at launch and never written, printed or fingerprinted.
    api_key_env: str | None = None


@dataclass
class SpeculativeConfig:
    """Speculative decoding (--speculative-config)."""

    # Drafting method: dspark, ngram, eagle, eagle3, mtp, draft_model, ...
    method: str = MISSING
    # Draft tokens proposed per step (>= 1).
    num_speculative_tokens: int = MISSING
    # How draft tokens are sampled: greedy or probabilistic.
    draft_sample_method: str = "greedy"
    # Drafter checkpoint, when the method needs a separate one; None = carried by the target model.
    model: str | None = None
    # Further keys passed through to --speculative-config unchanged.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CandidateConfig:
    """One deployment candidate: the baseline's settings plus this file's differences."""

    # Unique name of the candidate; it names its result directory. Must differ from every other candidate.
    name: str = MISSING
    # One line on what the candidate changes and why.
    description: str = ""
    # GPUs per model replica (--tensor-parallel-size).
    tensor_parallel_size: int = 1
    # Independent model replicas (--data-parallel-size).
    data_parallel_size: int = 1
    # Shard MoE experts across all TP x DP GPUs (--enable-expert-parallel).
    enable_expert_parallel: bool = False
    # Expert-parallel load balancing (--enable-eplb).
    enable_eplb: bool = False
    # EPLB settings passed as JSON to --eplb-config; empty = vLLM's defaults.
    eplb_config: dict[str, Any] = field(default_factory=dict)
    # Speculative decoding; None = off.
    speculative: SpeculativeConfig | None = None
    # MoE kernel backend (--moe-backend): auto, triton, deep_gemm, deep_gemm_mega_moe, cutlass, ...
    moe_backend: str = "auto"
    # Fraction of each GPU's memory vLLM may use for weights, activations and KV cache, in (0, 1].
    gpu_memory_utilization: float = 0.9
    # Scheduler token budget per engine step, prefill and decode together (--max-num-batched-tokens).
    max_num_batched_tokens: int | None = None
    # Most sequences running at once per replica (--max-num-seqs); None = vLLM's default.
    max_num_seqs: int | None = None
    # Override of the service's KV cache dtype for this candidate; None = the service's.
    kv_cache_dtype: str | None = None
    # DP over nodes: internal (the head's API), hybrid (an API per node), external (per rank); multinode.md.
    data_parallel_load_balancing: str = "internal"
    # How a candidate spanning nodes runs there: mp (a head and --headless followers) or ray (a Ray
    # cluster, one vllm serve on the head; docs/multinode.md, Ray). Unused within one node.
    multinode_backend: str = "mp"
    # Further vLLM flags for this candidate only (same form as ServiceConfig.extra_args; wins over it).
    extra_args: dict[str, Any] = field(default_factory=dict)
    # Extra environment variables for this candidate's server process.
    env: dict[str, str] = field(default_factory=dict)
    # Flags passed only when the host is the simulator (e.g. {sim-speed: 0.8}); ignored on real hosts.
    sim_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class HostConfig:
    """Where candidates run and how vLLM is started there."""

    # Short name of the host kind (h100x8, cpu, sim).
    name: str = MISSING
    # gpu: NVIDIA host checked through NVML; cpu: vLLM's CPU backend; sim: the simulated host.
    kind: str = "gpu"
    # Accelerators a candidate's TP x DP is placed on (on a multi-node host: all nodes' together).
    gpu_count: int = MISSING
    # Nodes of the host (1: one machine). A candidate needing more GPUs than a node has spans nodes: a
    # head serves the API, a follower per other node runs `--headless` (docs/multinode.md).
    nodes: int = 1
    # Accelerators per node (0: gpu_count, one node); with nodes > 1, gpu_count = nodes x gpus_per_node.
    gpus_per_node: int = 0
    # The port a multi-node candidate's ranks meet on at the head (--data-parallel-rpc-port, or
    # --master-port when TP spans nodes); unused by single-node candidates.
    rpc_port: int = 29550
    # The interface the nodes' ranks talk over (contracts/network.py); default: each library's own choice.
    network: NetworkConfig = field(default_factory=NetworkConfig)
    # exact: TP x DP must use every GPU; at_most: TP x DP may not exceed gpu_count.
    placement: str = "exact"
    # GPU model, e.g. "NVIDIA H100 80GB HBM3" (the simulator's profile; checked against NVML on GPU hosts).
    gpu_name: str = ""
    # Compute capability as "major.minor", e.g. "9.0" for Hopper.
    compute_capability: str = ""
    # Memory per GPU in GiB.
    gpu_memory_gib: float = 0.0
    # Command that starts the server, before the flags. "{model}" is replaced by the service's model;
    # an executable named "python" means the interpreter running gauntlet; a relative path is taken
    # from the project root.
    entrypoint: list[str] = field(default_factory=lambda: ["vllm", "serve", "{model}"])
    # Command that starts a multi-node candidate's followers (`--headless`), before the flags, as
    # entrypoint; empty: entrypoint. The cpu host's module entry point has no headless mode, so its
    # followers start through `vllm serve` (scripts/vllm_serve.py; docs/multinode.md).
    follower_entrypoint: list[str] = field(default_factory=list)
    # The Ray CLI a candidate with multinode_backend: ray starts each node's Ray with (`ray start`).
    ray_entrypoint: list[str] = field(default_factory=lambda: ["ray"])
    # Environment variables every server on this host gets.
    env: dict[str, str] = field(default_factory=dict)
    # Names (shell globs: NCCL_*, VLLM_*, PYTORCH_*, CUDA_*, HF_*) of variables of gauntlet's own environment
    # the server inherits (launch/command.py). A secret's name (one containing TOKEN, SECRET, PASSWORD,
    # PASSWD, KEY or CREDENTIAL: launch.spec.SECRET_NAME) never matches a glob: list
    # it in service.pass_env. host.env and the candidate's env win over a passed-through value.
    env_passthrough: list[str] = field(default_factory=list)
    # Longest wait for a server to become ready, in seconds (DeepSeek-class checkpoints: 1800 on h100x8).
    startup_timeout_s: float = 1800.0
    # Wait after SIGTERM before SIGKILL of every remaining process of the server, in seconds.
    shutdown_grace_s: float = 30.0
    # Longest wait for GPU memory to return to its pre-launch level after teardown, in seconds.
    gpu_release_timeout_s: float = 60.0
    # Simulated seconds per wall-clock second (the simulator only; 1.0 on real hosts). Durations the load
    # runner measures are multiplied by it, so reports are in host seconds.
    time_scale: float = 1.0
    # Flags passed only to the simulator (its profile and fault injection).
    sim_args: dict[str, Any] = field(default_factory=dict)
    # Nice (-20..19) of each started server's session (Linux autogroup), null: left alone (docs/launcher.md).
    server_autogroup_nice: int | None = None
    # Price of one GPU-hour on this host in $ (the cost figures: $ per million output tokens, the cost
    # gate; docs/accuracy-and-cost.md). The candidate's TP x DP GPUs are paid for. None = no cost figures.
    gpu_hour_price: float | None = None
    # Price of a kWh of GPU energy in $, added to the GPU-hours when set (needs the runs' energy).
    power_price_kwh: float | None = None
    # An input (prompt) token's price relative to an output token's (0.25: a quarter), to price the two
    # apart; None = every $ on the output tokens.
    input_token_price_ratio: float | None = None


@dataclass
class LengthConfig:
    """A token-length distribution for prompts or outputs."""

    # fixed: always `mean`; uniform: between min and max; lognormal: mean and std, clipped to [min, max].
    kind: str = "fixed"
    # Mean length in tokens.
    mean: int = MISSING
    # Standard deviation in tokens (lognormal only).
    std: int = 0
    # Smallest length in tokens (uniform, lognormal).
    min: int = 1
    # Largest length in tokens (uniform, lognormal).
    max: int = 0


@dataclass
class SharedPrefixConfig:
    """Shared system prompts: N system prompts x M user messages, the prefix cache on by design."""

    # Distinct system prompts (N); request i uses system prompt i mod N.
    system_prompts: int = 4
    # Distinct user messages per system prompt (M); request i asks message (i // N) mod M, of the profile's
    # prompt_tokens length. Requests beyond N x M repeat whole prompts, as users repeat questions.
    users: int = 8
    # Length of each system prompt in tokens (calibrated with the server's /tokenize).
    prefix_tokens: int = 512


@dataclass
class DataSourceConfig:
    """Requests read from a file instead of generated (docs/capacity.md, "Workloads from data")."""

    # trace: JSONL, one request per line (prompt text or token length, output length, arrival offset,
    # optional conversation id); sharegpt: a ShareGPT JSON list of conversations.
    kind: str = "trace"
    # The file, relative to conf/workload/ (or absolute).
    file: str = MISSING
    # Trace replay speed: arrival offsets are divided by it (1.0 = real time, 2.0 = twice as fast).
    # 0 = ignore the offsets and use the profile's mode (closed loop or Poisson at `rate`).
    speed: float = 1.0
    # ShareGPT: most turns replayed per conversation; turn k carries the k-1 previous exchanges (the
    # file's own answers) before its question, so later turns share a growing prefix.
    max_turns: int = 1


@dataclass
class WorkloadConfig:
    """One reproducible load profile."""

    # Profile name (serial, short, prefill_10k, decode_heavy, mixed, answer_gate).
    name: str = MISSING
    # What the profile stresses.
    description: str = ""
    # closed: a fixed number of requests in flight; open: Poisson arrivals at `rate`.
    mode: str = "closed"
    # Requests in flight at once (closed loop).
    concurrency: int = 1
    # Mean arrival rate in requests per second (open loop).
    rate: float | None = None
    # Open loop's arrival process: poisson (exponential gaps, mean 1/rate) or constant (every 1/rate s:
    # what pacing benchmarks compare, since a late send is then visible against a known schedule).
    arrivals: str = "poisson"
    # Requests measured.
    num_requests: int = MISSING
    # Repeats of this profile per candidate; None = run.repeats. (A fixed prompt set on a deterministic
    # server gives the same answer every time: one repeat can be enough.)
    repeats: int | None = None
    # Requests sent first and not counted.
    warmup_requests: int = 0
    # Prompt length in tokens.
    prompt_tokens: LengthConfig = field(default_factory=LengthConfig)
    # Output length in tokens (max_tokens of each request).
    output_tokens: LengthConfig = field(default_factory=LengthConfig)
    # Generate until max_tokens regardless of EOS (with min_tokens = max_tokens: exact output length).
    ignore_eos: bool = False
    # Sampling temperature.
    temperature: float = 0.0
    # Fixed prompts file (JSON list of strings, relative to conf/workload/); replaces generated prompts.
    prompts_file: str | None = None
    # Seed of every random choice in the profile.
    seed: int = 0
    # Hard bound on the profile's wall time in seconds; unfinished requests are recorded as timed out.
    time_limit_s: float = 600.0
    # Longest wait for one request in seconds.
    request_timeout_s: float = 600.0
    # Shared system prompts (prefix caching on by design: requests of a run share one cache_salt);
    # None = every request has its own salt and shares nothing.
    shared_prefix: SharedPrefixConfig | None = None
    # Requests from a data file (trace or ShareGPT) instead of generated ones; None = generated.
    data: DataSourceConfig | None = None


@dataclass
class AccuracyGateConfig:
    """The answer_accuracy gate: a labelled profile scored on both sides (docs/accuracy-and-cost.md)."""

    profile: str = "accuracy"  # the labelled profile (a .jsonl prompts_file); not applicable unless run
    # Allowed accuracy drop against the baseline (0.02 = 2 accuracy points): passes only when the drop's
    # upper bound (Tango's score interval on the paired items) is at or below it; fails when its lower
    # bound is above it.
    tolerance: float = 0.02
    min_items: int = 20  # fewest items scored on both sides before the gate decides (fewer: incomplete)
    # Largest share of a side's answers cut at max_tokens (finish_reason length) the gate judges; above it
    # the comparison is incomplete (a truncated answer reads as wrong: the budget would be judged).
    max_truncated: float = 0.02


@dataclass
class CostGateConfig:
    """The cost gate's bounds ($ per million output tokens at the measured throughput); both None = off."""

    # Allowed $/Mtok worsening against the baseline's per loaded profile (0.05: 5%, beyond noise); None: off
    tolerance: float | None = None
    # Budget in $/Mtok per loaded profile: fails when the runs' interval lies above it; None = no budget.
    max_usd_per_mtok: float | None = None


@dataclass
class GatesConfig:
    """Acceptance thresholds (see gates/)."""

    # Allowed loss of aggregate tokens/s under load against the baseline, as a fraction (0.05 = 5%).
    throughput_tolerance: float = 0.05
    # Allowed worsening of loaded median TTFT and of the censored median visible-answer time, as a fraction.
    latency_tolerance: float = 0.05
    # Smallest free memory per GPU after warmup, in GiB.
    min_free_gpu_memory_gib: float = 0.5
    # Confidence level of every interval.
    confidence: float = 0.95
    # Bootstrap resamples per interval.
    bootstrap_resamples: int = 2000
    # Seed of the bootstrap.
    seed: int = 0
    # Profiles whose requests must all succeed with zero preemptions and no restart (those run.profiles
    # runs: the stability gate judges the ones the sweep measured).
    accepted_profiles: list[str] = field(default_factory=list)
    # Profiles that count as "under load" for throughput and loaded TTFT.
    loaded_profiles: list[str] = field(default_factory=list)
    # The single-request profile ("empty road").
    serial_profile: str = "serial"
    # The fixed visible-answer reliability profile.
    answer_profile: str = "answer_gate"
    # Gates to evaluate, by registered name; empty = all registered gates.
    enabled: list[str] = field(default_factory=list)
    # Smallest latency improvement that counts as a gain, as a fraction (0.05 = 5% faster); the interval
    # must also exclude "no change".
    min_gain: float = 0.05
    # Allowed loss of capacity at the SLO against the baseline, as a fraction (0.1 = 10%): the capacity
    # gate fails when the ratio is below 1 - tolerance and its interval lies below 1.
    capacity_tolerance: float = 0.1
    # Launch-to-launch spread of one configuration's capacity at the SLO (sd of its log, 0.03 = 3%): an
    # assumed prior, used where a side has one search; a larger spread measured between the baseline's
    # launches replaces it (gates/capacity_interval.py, docs/capacity.md).
    capacity_launch_sd: float = 0.03

    # How a lost visible answer is decided: "any_lost_answer_blocks" (a policy: fewer visible answers than
    # the baseline on the answer prompts rejects, whatever the noise; the exact test and the posterior are
    # reported) or "exact_test" (a statistical test: Fisher's exact test, one-sided, must reject "no
    # change" at the gates' level; a loss within noise is inconclusive).
    answer_policy: str = "any_lost_answer_blocks"
    # The cost gate (gates/cost.py): off unless a bound is set, not applicable without host.gpu_hour_price.
    cost: CostGateConfig = field(default_factory=CostGateConfig)
    accuracy: AccuracyGateConfig = field(default_factory=AccuracyGateConfig)  # gates/answer_accuracy.py
    # Allowed drop of speculative decoding's draft acceptance (accepted / draft tokens) against the
    # baseline's, in points (0.05 = 5 points), beyond noise (gates/spec_acceptance.py); None = off.
    spec_acceptance_tolerance: float | None = None


@dataclass
class SloConfig:
    """The service's SLO: per-request latency thresholds that must hold at a percentile of requests.

    A request *meets the SLO* when every set threshold holds for it (a failed request meets none); its
    output counts as goodput. A run *holds the SLO* when, for every set threshold, the ``percentile``-th
    percentile of that latency over the measured requests (failed or censored ones count as +inf) is at
    or under the threshold. Unset thresholds (None) are not checked. See docs/capacity.md.
    """

    # Short name, shown in reports ("default", "interactive").
    name: str = "default"
    # The percentile (0-100] at which every threshold must hold, e.g. 99 for "p99 <= threshold".
    percentile: float = 99.0
    # Time to first token, in host seconds; None = not checked.
    ttft_s: float | None = None
    # Time per output token after the first (a request's mean inter-token latency, ITL/TPOT), in host
    # seconds per token; None = not checked.
    tpot_s: float | None = None
    # Time to the first visible (non-reasoning) answer token, in host seconds; None = not checked.
    first_visible_s: float | None = None
    # End-to-end request latency, in host seconds; None = not checked.
    e2e_s: float | None = None


@dataclass
class CapacityConfig:
    """The capacity search: the highest load at which the SLO holds, per candidate (docs/capacity.md)."""

    # The workload profile the search varies (its `mode` decides: open = request rate, closed =
    # concurrency); None = no capacity search.
    profile: str | None = None
    # First load level tried (requests/s for open loop, requests in flight for closed loop).
    start: float = 8.0
    # Lowest and highest load levels the search may try; the answer is reported as below / above them.
    min_level: float = 1.0
    max_level: float = 512.0
    # Bracketing multiplies (or divides) the level by this factor until the SLO flips.
    growth: float = 2.0
    # Relative resolution: bisection stops when highest-holding and lowest-failing levels are within
    # this fraction of each other (0.1 = the capacity is known to within 10%; closed loop: or 1 request).
    resolution: float = 0.1
    # Most load levels measured per candidate (bracketing and bisection together).
    max_points: int = 10
    # A level whose SLO margin (threshold / observed percentile, worst metric) is within this fraction of
    # 1 is "within noise" and measured again, up to `max_repeats` times; the median margin decides.
    noise: float = 0.1
    max_repeats: int = 3
    # Measured requests per level: closed loop `waves` x concurrency; open loop rate x `duration_s`;
    # at least `min_requests` either way.
    waves: float = 2.0
    duration_s: float = 30.0
    min_requests: int = 16
    # Requests sent first at each level and not counted (the server is already warm from the profiles).
    warmup_requests: int = 0
    # Search the baseline's capacity again in each interleaved block (a fresh launch, run.interleave): the
    # capacity gate averages the baseline's launches and measures their spread (docs/capacity.md).
    in_blocks: bool = True


@dataclass
class RunConfig:
    """What a sweep measures for each candidate."""

    # Profiles measured for every candidate, in order.
    profiles: list[str] = field(default_factory=list)
    # Repeats of each profile of the baseline, and of every candidate unless min/max_repeats are set (the
    # gates need >= 2 for intervals).
    repeats: int = 3
    # Adaptive repeats (gates/sequential.py): a candidate runs min_repeats repeats, then one more only
    # while its verdict is inconclusive, up to max_repeats; every look spends an equal share of the error
    # rate. None = run.repeats (fixed). A profile's own `repeats` (the answer gate) is never exceeded.
    min_repeats: int | None = None
    max_repeats: int | None = None
    # Confirmation runs (gates/confirm.py): after fixed repeats (the baseline's; a candidate's unless
    # adaptive), a profile whose runs disagree beyond 2x, or whose slow outlier run set aside leaves fewer
    # than `repeats`, gets one more run, again, up to this many more. 0: never.
    confirm_runs: int = 4
    # Profiles of the recovery validation after the restore; they also measure the baseline again at the
    # end of the sweep, which is how drift is detected.
    recovery_profiles: list[str] = field(default_factory=list)
    # Repeats of each recovery profile.
    recovery_repeats: int = 1
    # Multiplier on every profile's request count (the demo scales profiles down); 1.0 = as configured.
    scale: float = 1.0
    # Directory that holds sweeps; each sweep gets a sub-directory.
    sweeps_dir: str = DEFAULT_SWEEPS_DIR
    # Draw the report's PNG plots (report.html embeds them). false: the tables, report.md/.json/.html and
    # summaries.csv without them, about 1.5 s of CPU less each time the report is written.
    plots: bool = True
    # What happens to the restored, validated retained server when the sweep ends: "keep" (it is the live
    # service and stays up; `python -m orchestrator stop` ends it) or "stop" (the demo: nothing is left).
    retained_after_sweep: str = "keep"
    # At the sweep's end, when the gates keep a candidate (the one they recommend), promote it as
    # `python -m orchestrator promote SWEEP NAME` would: launch its recorded spec, validate it under load
    # and make it the retained configuration (a failed validation restores the baseline). false: the
    # baseline stays live and the last lines give the command.
    promote_keep: bool = False
    # A local "cluster" of N simulated nodes, for a launcher that runs jobs as parallel processes on this
    # machine (hydra/launcher=submitit_local): each job holds one node slot (its own simulator and port),
    # so at most N jobs measure at once. 0: jobs run where the launcher puts them (a real cluster).
    simulated_nodes: int = 0
    # Speed factor of each simulated node's hardware (node K runs at speeds[K]; missing: 1.0). A node
    # property, outside every spec: it is how the per-node pairing of evidence is tested.
    simulated_node_speeds: list[float] = field(default_factory=list)
    # A job measures the retained configuration on its own node before its candidate; a later job on the
    # same node reuses that measurement while it is younger than this (seconds).
    node_baseline_max_age_s: float = 3600.0
    # Interleaved baseline blocks (ABA): after each candidate that started, the retained configuration is
    # launched again and measures the recovery profiles `interleave_repeats` times, so the baseline is
    # measured before AND after every candidate (per node in a parallel sweep: baseline, candidate,
    # baseline, candidate, ...; a block also opens the node's next job). The drift check compares the
    # opening repeats with these blocks and the end-of-sweep recovery; the gates' baseline sample includes
    # them. False: the order of earlier versions (baseline once, then the candidates; drift from the
    # recovery run alone; one launch less per candidate).
    interleave: bool = True
    interleave_repeats: int = 1

    @property
    def candidate_repeats(self) -> tuple[int, int]:
        """A candidate's least and most repeats: ``min_repeats`` (else ``repeats``) to ``max_repeats`` (else
        ``repeats``, or the least if that is more); adaptive when they differ (gates/sequential.py)."""
        low = self.min_repeats if self.min_repeats is not None else self.repeats
        return low, self.max_repeats if self.max_repeats is not None else max(low, self.repeats)


@dataclass
class LoadConfig:
    """How the load client runs (what it sends is the workload's): processes, pacing bound, TLS."""

    # Worker processes that share a profile's streams and requests (each its own event loop, one clock
    # origin); 1 = the runner's own process. More than one core of client: a fleet, a trace at speed.
    workers: int = 1
    # Send lateness bound in wall seconds: a run whose p99 of (sent - scheduled) exceeds it is flagged
    # `client.late` in its summary (the schedule was not kept as tightly as asked). None = no bound.
    max_send_lateness_s: float | None = 0.001
    # CA bundle (PEM file) that verifies an https:// server's certificate; None = the system trust store.
    ca_bundle: str | None = None
    # Client certificate (PEM file) for a server that asks for one (mutual TLS); None = send none.
    client_cert: str | None = None
    # Private key (PEM file) of client_cert; None = the key is in client_cert's file.
    client_key: str | None = None


@dataclass
class GauntletConfig:
    """The composed configuration of one job."""

    service: ServiceConfig = field(default_factory=ServiceConfig)
    host: HostConfig = field(default_factory=HostConfig)
    # The candidate this job measures.
    candidate: CandidateConfig = field(default_factory=CandidateConfig)
    # The retained configuration the sweep compares against and restores.
    baseline: CandidateConfig = field(default_factory=CandidateConfig)
    # Every load profile, by name.
    workloads: dict[str, WorkloadConfig] = field(default_factory=dict)
    gates: GatesConfig = field(default_factory=GatesConfig)
    run: RunConfig = field(default_factory=RunConfig)
    # The service's SLO (conf/slo/): goodput and attainment in every summary, the capacity search's test.
    slo: SloConfig = field(default_factory=SloConfig)
    # The capacity search (off unless `capacity.profile` names a workload).
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    # How the load client runs: worker processes, the send-lateness bound, TLS files.
    load: LoadConfig = field(default_factory=LoadConfig)
    search: SearchConfig | None = None  # a search (conf/search/, docs/search.md); None = no search
    lm_eval: LmEvalConfig = field(default_factory=LmEvalConfig)  # lm_eval profiles run on every launch
