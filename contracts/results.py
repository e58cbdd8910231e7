"""Result files: the validated records that join measuring, judging and reporting.

Pipeline position: the load runner and the sweep write these; the gates and the report read them and
nothing else, so any verdict or report can be rebuilt from disk without rerunning load. Every file is
validated on write and on read (:mod:`contracts.files`: :func:`~contracts.files.write_model`,
:func:`~contracts.files.read_model`, :func:`~contracts.files.read_jsonl`).

Units: every duration is in **host seconds**: wall-clock seconds multiplied by the host's ``time_scale``
(1.0 on real hosts; the simulator may run faster than real time). Token counts come from the server's
``usage``, never from chunk counts.

Where each file lives: :mod:`contracts.layout`; the ones defined here::

    <sweep>/candidates/<name>/run.json                         CandidateRun (startup, probe, teardown)
    <sweep>/candidates/<name>/<profile>/r<k>/records.jsonl     RequestRecord per line
    <sweep>/candidates/<name>/<profile>/r<k>/summary.json      ProfileSummary
    <sweep>/candidates/<name>/<profile>/r<k>/bench_serve.json  the same run in vllm bench serve's fields
                                                               (contracts.benchserve)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.layout import RECORDS_FILE
from contracts.metering import GpuMetering
from contracts.schema import LoadConfig, WorkloadConfig
from contracts.spec_decode import SpecDecodeMetrics  # the record lives beside its arithmetic

SCHEMA_VERSION = 1

#: Error classes of a request (None = it succeeded).
ErrorClass = Literal[
    "http_4xx",  # the server refused the request
    "http_5xx",  # the server failed the request
    "connect",  # connection refused or reset before a response
    "client",  # the load client could not open a connection itself (EMFILE, EADDRNOTAVAIL): a harness fault
    "timeout",  # no end of stream within the request timeout or the profile's time bound
    "truncated",  # the stream ended without [DONE] or without a finish reason
    "malformed",  # a chunk was not valid JSON / SSE
    "stream_error",  # an error object arrived inside the stream
    "cancelled",  # the run was interrupted (Ctrl-C) before the request finished
]

Backend = Literal["vllm", "sim"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RequestRecord(_Model):
    """One request as the client saw it. Times are host seconds from the profile's start."""

    index: int  # position in the profile's request sequence (warmup first)
    warmup: bool  # sent during warmup; not counted
    target_prompt_tokens: int  # what the generator aimed for
    target_output_tokens: int  # max_tokens of the request
    scheduled_s: float  # when the schedule wanted it sent
    sent_s: float  # when it was actually sent (sent_s - scheduled_s > 0: the client fell behind)
    ttft_s: float | None  # first chunk with any token (reasoning included), from sent_s
    first_visible_s: float | None  # first non-empty content delta, from sent_s; None = censored
    end_s: float | None  # last byte of the stream, from sent_s
    chunk_offsets_s: list[float] = Field(default_factory=list)  # arrival of each token chunk, from sent_s
    prompt_tokens: int | None = None  # usage.prompt_tokens
    completion_tokens: int | None = None  # usage.completion_tokens
    finish_reason: str | None = None  # stop, length, abort, error, ...
    http_status: int | None = None
    error: ErrorClass | None = None
    error_detail: str | None = None  # first line of the error, for the report
    # The visible answer (its content deltas joined), kept for a labelled set's items only (the accuracy
    # gate scores it); None for every other profile.
    output_text: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.finish_reason is not None

    @property
    def censored(self) -> bool:
        """No visible answer arrived (recorded, never dropped; counts as +inf in censored medians)."""
        return self.first_visible_s is None


class Stats(_Model):
    """Distribution of one latency over the measured requests (host seconds)."""

    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    min: float | None = None
    max: float | None = None


class CensoredMedian(_Model):
    """Median where missing values count as +infinity (right-censored)."""

    n: int  # requests considered
    censored: int  # of which no value arrived
    value_s: float | None  # the median; None when it is infinite or n == 0
    infinite: bool  # more than half are censored: the median is +inf


class ClientHealth(_Model):
    """Whether the load client kept up: a saturated client under-reports gaps and over-reports TTFT."""

    # Send lateness: sent_s - scheduled_s over the measured requests (host seconds). Open loop: how late
    # each arrival left against its absolute schedule; closed loop: a slot's turnaround after its last end.
    dispatch_lag_p50_s: float
    dispatch_lag_p99_s: float
    dispatch_lag_max_s: float
    chunks_per_read_p99: float  # >1 means several chunks arrived in one socket read
    client_cpu_percent: float  # CPU of the client (all its worker processes) over the window, % of a core
    saturated: bool  # the runner judged itself the bottleneck
    notes: list[str] = Field(default_factory=list)
    # Added with open-loop pacing and workers (older summaries read the defaults):
    late: bool = False  # the lateness p99 (wall) exceeded load.max_send_lateness_s
    lateness_bound_s: float | None = None  # that bound, wall seconds; None = none configured
    pacer: str | None = None  # how open-loop sends were timed: timerfd | sleep-spin (None: closed loop)
    workers: int = 1  # processes that sent the measured requests
    worker_cpu_percent: list[float] = Field(default_factory=list)  # per worker process (workers > 1)
    # Resident memory the client grew by over the measured window, per concurrent stream (connections,
    # buffered reads, records; the garbage collector is paused meanwhile), bytes; None = not measured.
    rss_per_stream_bytes: float | None = None


class ServerMetrics(_Model):
    """What the server's /metrics said over the profile (sums over engines)."""

    scrapes: int
    preemptions: float  # delta of vllm:num_preemptions_total
    prompt_tokens: float  # delta of vllm:prompt_tokens_total
    generation_tokens: float  # delta of vllm:generation_tokens_total
    request_success: dict[str, float]  # delta by finished_reason
    peak_waiting: float  # max of vllm:num_requests_waiting
    peak_running: float
    peak_kv_cache_usage: float  # max of vllm:kv_cache_usage_perc (0-1)
    waiting_at_end: float
    running_at_end: float
    restart_detected: bool  # a counter went backwards between scrapes
    token_mismatch: bool  # client usage totals disagree with the server's counters
    notes: list[str] = Field(default_factory=list)
    # Optional families (None when the server does not export them, and in older files):
    prefix_cache_queries: float | None = None  # delta of vllm:prefix_cache_queries_total (tokens)
    prefix_cache_hits: float | None = None  # delta of vllm:prefix_cache_hits_total (tokens)
    prefix_cache_hit_rate: float | None = None  # hits / queries over the measured window
    speculative: SpecDecodeMetrics | None = None  # deltas of vllm:spec_decode_*_total


#: The latencies an SLO can bound (:class:`contracts.schema.SloConfig` fields without ``_s``).
SloMetric = Literal["ttft", "tpot", "first_visible", "e2e"]


class SloSummary(_Model):
    """One run against the service's SLO: attainment, goodput, and each bounded latency's percentile."""

    name: str  # the SLO's name (conf/slo/<name>.yaml)
    percentile: float  # the percentile each threshold must hold at
    thresholds: dict[str, float]  # SloMetric -> threshold, host seconds (per token for tpot)
    observed: dict[str, float | None]  # SloMetric -> the percentile observed; None = infinite (too many
    # requests failed or never produced the value)
    met: bool  # every observed percentile is at or under its threshold
    margin: float  # worst threshold / observed over the metrics (>= 1: held; 0: infinite)
    good_requests: int  # measured requests that met every threshold (goodput requests)
    attainment: float  # good_requests / measured requests (0-1)
    goodput_rps: float  # good requests / duration_s
    goodput_tps: float  # output tokens of the good requests / duration_s
    violations: dict[str, int] = Field(default_factory=dict)  # SloMetric -> requests over its threshold
    # (failed requests count against every metric)
    # The margin with each request's own send lateness added back to the latencies counted from the send
    # (load.goodput.late_margin); None: no record was late, or an older summary (the p99 rule applies).
    margin_lag_undone: float | None = None


class LoadSettings(_Model):
    """Exactly what the load runner was asked to run: the same settings run the profile again by hand
    (``python -m load SUMMARY.json --base-url URL``, see :mod:`load.__main__`)."""

    base_url: str  # the server it ran against
    served_model: str  # the ``model`` of every request
    #: The run's salt: request ``i`` carried ``cache_salt = f"{salt}-{i}"`` (match it in server logs).
    salt: str
    scale: float  # run.scale: the profile's request counts scaled by it
    time_scale: float  # host seconds per wall second (1.0 on real hosts)
    prompts_dir: str  # where ``workload.prompts_file`` was read
    workload: WorkloadConfig  # the profile as run (every field: lengths, seed, concurrency, sampling)
    load: LoadConfig | None = None  # how the client ran (workers, lateness bound, TLS files); None: older

    def rerun_command(self, summary_file: str, *, base_url: str | None = None) -> str:
        """The command line that runs this profile again by hand against ``base_url`` (default: the
        recorded server), with a fresh salt; ``--same-salt`` reuses this run's."""
        return f"python -m load {summary_file} --base-url {base_url or self.base_url}"


class ProfileSummary(_Model):
    """One (candidate, profile, repeat): the figures the gates judge."""

    schema_version: int = SCHEMA_VERSION
    candidate: str
    profile: str
    repeat: int
    fingerprint: str  # launch spec of the server measured
    backend: Backend
    host: str
    time_scale: float
    started_at: str  # ISO 8601, UTC
    duration_s: float  # the measured window (first send to last end), host seconds
    num_requests: int  # measured requests (warmup excluded)
    completed: int  # finished without error
    failed: int
    errors: dict[str, int]  # by ErrorClass
    prompt_tokens: int
    output_tokens: int
    prompt_tps: float  # prompt tokens / duration_s
    output_tps: float  # output tokens / duration_s
    ttft: Stats
    first_visible: Stats  # over requests that showed content
    first_visible_censored: CensoredMedian
    itl: Stats  # gaps between consecutive chunks
    e2e: Stats
    client: ClientHealth
    server: ServerMetrics | None  # None when /metrics could not be read
    interrupted: bool = False  # Ctrl-C or the time bound stopped it early
    #: The profile's time bound (``time_limit_s``) stopped it (``interrupted`` is True too); False in
    #: summaries written before it was recorded (their interrupted runs read as stopped)
    time_bound: bool = False
    records_file: str = RECORDS_FILE  # relative to the summary
    prompt_mismatches: int = 0  # measured requests whose usage.prompt_tokens missed the target by > 2%
    notes: list[str] = Field(default_factory=list)  # what the runner noticed (clipped max_tokens, ...)
    #: The run's salt and settings; None in summaries written before they were recorded.
    settings: LoadSettings | None = None
    # Added with the SLO (older summaries read as None): per-request time per output token after the
    # first, over completed requests with two or more tokens; the run against the SLO.
    tpot: Stats | None = None
    slo: SloSummary | None = None
    # Added with load levels and data workloads (older summaries read as None / 0):
    load_level: float | None = None  # capacity search: the request rate or concurrency of this run


class CapacityPoint(_Model):
    """One measured load level of a capacity search (one run; a level within noise has several)."""

    level: float  # request rate (req/s) or concurrency (requests in flight)
    attempt: int  # 1, 2, ...: repeats of this level
    summary_file: str  # relative to the candidate's directory
    met: bool  # this run held the SLO
    margin: float  # worst threshold / observed percentile (>= 1: held)
    attainment: float
    goodput_rps: float
    goodput_tps: float
    output_tps: float
    tps_per_user: float | None  # 1 / median TPOT: the decode speed one user sees
    # The load client's p99 dispatch lag in this run (s), and the lowest margin its lateness allows: each
    # request's own added back to its latencies counted from the send (the summary's slo.margin_lag_undone;
    # older summaries: the p99 lag added to every request); None in older files (no lag read).
    client_lag_s: float | None = None
    margin_lag_undone: float | None = None


class CapacityResult(_Model):
    """The capacity search of one candidate: the highest load at which the SLO held, and its bracket."""

    schema_version: int = SCHEMA_VERSION
    candidate: str
    profile: str  # the workload varied
    mode: Literal["rate", "concurrency"]
    unit: str  # "req/s" or "concurrent"
    slo: str  # the SLO's name
    slo_text: str  # the SLO in words, e.g. "TTFT p99 <= 1 s, TPOT p99 <= 15 ms"
    capacity: float | None  # highest level that held; None = even min_level failed
    low: float | None  # = capacity (the bracket's held end)
    high: float | None  # lowest level that failed above it; None = max_level held (capacity >= it)
    resolution: float  # the configured relative resolution
    gpus: int  # TP x DP of the candidate (for per-GPU figures)
    points: list[CapacityPoint] = Field(default_factory=list)  # in measurement order
    decided: dict[str, bool] = Field(default_factory=dict)  # level (as text) -> held, after repeats
    notes: list[str] = Field(default_factory=list)

    @property
    def interval(self) -> tuple[float, float] | None:
        """Where the true capacity lies, given the bracket: [low, high) (high = +inf when unbounded)."""
        if self.low is None:
            return None
        return (self.low, self.high if self.high is not None else float("inf"))


class GpuMemory(_Model):
    """One GPU's memory at a moment."""

    index: int
    name: str
    total_gib: float
    used_gib: float
    free_gib: float


class HostProbe(_Model):
    """What NVML said about the host (or why it could not)."""

    driver: bool  # an NVIDIA driver answered
    reason: str | None = None  # why not ("no NVIDIA driver", "simulated host", ...)
    driver_version: str | None = None
    gpus: list[GpuMemory] = Field(default_factory=list)
    compute_capability: list[str] = Field(default_factory=list)  # per GPU, "9.0"
    simulated: bool = False


class DoctorProblem(_Model):
    """One thing ``doctor`` found that would make a launch fail."""

    candidate: str | None  # None: the host (every candidate)
    check: Literal[
        "program", "flags", "gpu", "memory", "weights", "port", "spec", "live service", "search", "network"
    ]
    message: str

    def line(self) -> str:
        return f"{self.candidate or 'host'}: {self.check}: {self.message}"


class SweepPlan(_Model):
    """The candidates a sweep was asked to measure (``planned.json``), in the order asked, every
    opening's (a resume adds its own to the earlier ones)."""

    candidates: list[str] = Field(default_factory=list)


class DoctorReport(_Model):
    """What the pre-flight checks found (``doctor.json``): problems, and what was checked."""

    problems: list[DoctorProblem] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def for_candidate(self, name: str) -> list[DoctorProblem]:
        return [p for p in self.problems if p.candidate == name]

    def blocking(self, baseline: str) -> list[DoctorProblem]:
        """Problems that fail every candidate: the host's, and the retained baseline's own."""
        return [p for p in self.problems if p.candidate in (None, baseline)]


class StartupRecord(_Model):
    """How the launch went."""

    ok: bool
    kind: str | None = (
        None  # failure class: bad-args, incompatible, init-failed, out-of-memory, timeout, crashed
    )
    exit_code: int | None = None
    matched_line: str | None = None  # the log line that classified the failure
    evidence: list[str] = Field(default_factory=list)  # last log lines
    time_to_ready_s: float | None = None  # wall seconds


class TeardownRecord(_Model):
    """How the server was stopped, and the proof that nothing was left."""

    signal_sequence: list[str]  # e.g. ["SIGTERM", "SIGKILL"]
    duration_s: float
    survivors: list[int]  # pids still alive at the end (must be empty)
    port_free: bool
    gpu_released: bool | None  # None when there is no NVIDIA driver
    gpu_after: list[GpuMemory] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class WatchEvent(_Model):
    """Something the watcher saw while load ran."""

    at: str  # ISO 8601, UTC
    # harness: the load runner itself failed (bad workload data, an exception in the runner), not the
    # server; the candidate's verdict is then incomplete, never a stability failure.
    # hung: the process is alive but /health has not answered for the supervisor's hung_after_s (a
    # stopped, deadlocked or wedged server); the load is cancelled and the server killed
    kind: Literal["died", "hung", "restarted", "unhealthy", "recovered", "harness"]
    detail: str
    # A died or hung process of a multi-node server: its node (0: the head), the node's name, how it ended
    # (launch.watch); None / "" for a single-node server's (its pid and code are in ``detail``).
    node: int | None = None
    node_name: str = ""
    exit_code: int | None = None


#: Which measurement a launch was: the opening baseline, a candidate, a block or the end, the recovery.
Phase = Literal["baseline", "candidate", "baseline_end", "recovery"]


#: How a run's energy was read: NVML's total-energy counter, NVML's power readings integrated over the run
#: (where the counter is not supported), or the simulator's stated power model (simulated, not measured).
EnergyMethod = Literal["nvml_counter", "nvml_power", "simulated"]


class RunEnergy(_Model):
    """The energy the GPUs drew during one measured run (a profile's repeat), or why it was not measured.

    Read at the start and end of the run's measured window (warmup and calibration left out);
    ``output_tokens_per_joule`` is the window's output tokens/s over its average total power. Not
    measured (a CPU host, no NVIDIA driver, a counter reset): ``method``, ``joules`` and the figures are
    None, never zero, and ``reason`` says why."""

    method: EnergyMethod | None  # None: not measured
    joules: float | None  # every GPU together, over the run
    duration_s: float | None  # the sampled interval (host seconds)
    gpus: int  # GPUs read (every GPU the host's NVML or the simulator reports)
    watts_per_gpu: list[float] | None  # average power of each GPU over the run
    output_tokens_per_joule: float | None
    samples: int | None = None  # power readings integrated (nvml_power only)
    reason: str | None = None  # why not measured; or what the figure is (simulated: the power model)
    metering: GpuMetering | None = None  # the GPUs read (the candidate's own), shared, idle power, nodes

    @property
    def measured(self) -> bool:
        return self.joules is not None


class Pricing(_Model):
    """What the host's time and power cost (``host.gpu_hour_price``, ``host.power_price_kwh``), recorded
    with each launch so its $ per million tokens can be worked out from its files (:mod:`contracts.cost`)."""

    gpus: int  # GPUs paid for: the candidate's TP x DP (older files: the host's gpu_count)
    gpu_hour_price: float  # $ per GPU-hour
    power_price_kwh: float | None = None  # $ per kWh of GPU energy; None: energy is not priced
    host_gpus: int | None = None  # the host's GPUs (all nodes): the replicas it holds; None in older files
    input_price_ratio: float | None = None  # an input token's price / an output token's; None: not apart


class CandidateRun(_Model):
    """One candidate's launch on the host, independent of the profiles run against it."""

    schema_version: int = SCHEMA_VERSION
    candidate: str
    fingerprint: str
    backend: Backend
    host: str
    is_baseline: bool
    phase: Phase = "candidate"
    startup: StartupRecord
    probe: HostProbe | None = None
    free_gpu_gib_after_warmup: list[float] | None = None  # per GPU; None without NVML
    watch: list[WatchEvent] = Field(default_factory=list)
    teardown: TeardownRecord | None = None
    profiles: list[str] = Field(default_factory=list)  # profile/r<k> directories written
    # Where it ran when candidates run as jobs on many nodes, and the baseline measured on that same node
    # (a directory under candidates/) that the gates compare it with; None: the sweep's one baseline.
    node: str | None = None
    paired_baseline: str | None = None
    # An interleaved baseline block (run.interleave): the candidate whose measurement it followed.
    follows: str | None = None
    # Energy of each measured run, by its directory (profile/r<k>); absent in launches before it was read.
    energy: dict[str, RunEnergy] = Field(default_factory=dict)
    # The host's prices when this launch ran; None: the host has no gpu_hour_price (no cost figures).
    pricing: Pricing | None = None


class RecoveryCheck(_Model):
    """One check of the recovery validation."""

    name: str
    ok: bool
    expected: str
    observed: str


class RecoveryValidation(_Model):
    """Whether the restored retained configuration is the one recorded and serves load cleanly."""

    ok: bool
    candidate: str
    fingerprint: str
    recorded_fingerprint: str
    pid: int | None
    checks: list[RecoveryCheck] = Field(default_factory=list)
    profiles: list[str] = Field(default_factory=list)
    reason: str
