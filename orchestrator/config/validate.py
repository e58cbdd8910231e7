"""Validate the typed configuration: every problem named by file, field, value and what is allowed.

Pipeline position: right after composition (:mod:`orchestrator.config.compose`), before any launch spec is
rendered; also where a sweep's recorded ``config.yaml`` is checked again (rollback, stop). Pure apart from
reading the YAML files an error names, and free of Hydra and OmegaConf, so the commands that rebuild from
disk do not load them. All problems are reported together and nothing starts.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts.dp_balance import balance_problems
from contracts.errors import ConfigError, ConfigProblem, HarnessError
from contracts.labelled import is_labelled
from contracts.multinode import candidate_layout
from contracts.network import interface_problem
from contracts.paths import CONF_DIR, PROJECT_ROOT
from contracts.pipeline import pipeline_parallel_size
from contracts.placement import placement_problem
from contracts.ray_backend import backend_problems
from contracts.schema import (
    CandidateConfig,
    GauntletConfig,
    HostConfig,
    LengthConfig,
    LoadConfig,
    RunConfig,
    WorkloadConfig,
)
from load.sources import source_problems
from load.workload import ARRIVALS, parse_prompts
from orchestrator.config.accuracy import accuracy_problems, labelled_file_problems
from orchestrator.config.client_inputs import api_key_problems, tls_problems
from orchestrator.config.guard import abuse_problems
from orchestrator.config.lm_eval import lm_eval_problems
from orchestrator.config.measure_bounds import capacity_problems, cost_problems

#: --moe-backend values vLLM 0.32 accepts (vllm/config/kernel.py, MoEBackend).
MOE_BACKENDS = (
    "auto", "triton", "batched_triton", "deep_gemm", "deep_gemm_mega_moe", "cutlass", "flashinfer_trtllm",
    "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_moe_ep_cutedsl", "flashinfer_b12x", "b12x",
    "flashinfer_moe_ep_mega_deep_gemm", "marlin", "humming", "triton_unfused", "aiter", "aiter_mega_moe",
    "aiter_triton_mxfp4_bf16", "flydsl", "hpc", "emulation", "rdna3",
)  # fmt: skip
#: --kv-cache-dtype values vLLM 0.32 accepts (vllm/config/cache.py, CacheDType).
KV_CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)  # fmt: skip
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")
HOST_KINDS = ("gpu", "cpu", "sim")
PLACEMENTS = ("exact", "at_most")
#: run.retained_after_sweep: keep the restored retained server up (the live service), or stop it (the demo).
RETAINED_AFTER_SWEEP = ("keep", "stop")
WORKLOAD_MODES = ("closed", "open")
LENGTH_KINDS = ("fixed", "uniform", "lognormal")
CANDIDATE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Sources:
    """Which YAML file each config group came from, so errors can name it."""

    choices: dict[str, str] = field(default_factory=dict)
    search_path: list[Path] = field(default_factory=lambda: [CONF_DIR])
    # Command-line overrides ("candidate.tensor_parallel_size=3"): a value set there is named as such.
    overrides: list[str] = field(default_factory=list)
    # The primary config's name (``--config-name``): the file that sets run.*, gates.* profile lists.
    config_name: str = "config"
    # Values a search derived rather than read (orchestrator.config.search_defaults), one line each.
    derived: list[str] = field(default_factory=list)
    # The Hydra launcher's class (``hydra.launcher._target_``): where a search's trials run (plan's view).
    launcher: str = ""

    def override_of(self, dotted: str) -> str | None:
        """The command-line override that sets ``dotted`` (``run.repeats=0``), if one does."""
        for item in self.overrides:
            if item.split("=", 1)[0].lstrip("+~") == dotted:
                return item
        return None

    def top_origin(self, dotted: str) -> str:
        """Where a top-level value such as ``run.repeats`` was set: its override, else the primary config."""
        item = self.override_of(dotted)
        if item is not None:
            return f"command-line override {item!r}"
        path = self.group_file("", self.config_name)
        return display_path(path) if path else f"{self.config_name}.yaml"

    def group_file(self, group: str, choice: str | None) -> Path | None:
        if choice is None:
            return None
        for root in self.search_path:
            candidate = root / group / f"{choice}.yaml"
            if candidate.is_file():
                return candidate
        return None

    def origin(self, group: str, choice: str | None, key_path: Sequence[str], package: str = "") -> str:
        """The file that last set ``key_path`` in ``group/choice`` (following its defaults), for messages."""
        dotted = ".".join(key_path)
        item = self.override_of(f"{package or group}.{dotted}")
        if item is not None:
            return f"command-line override {item!r}"
        seen: set[str] = set()
        current = choice
        while current is not None and current not in seen:
            seen.add(current)
            path = self.group_file(group, current)
            if path is None:
                break
            raw = read_yaml(path)
            if _has_path(raw, key_path):
                return display_path(path)
            current = parent_in_group(raw)
        path = self.group_file(group, choice)
        return display_path(path) if path else f"{group}/{choice}.yaml"

    def describe(self, package: str) -> str:
        choice = self.choices.get(package)
        group = package.split("@", maxsplit=1)[0]
        path = self.group_file(group, choice)
        return display_path(path) if path else f"<{package}>"

    def baseline_file(self) -> str:
        """The baseline the user selected (``candidate@baseline``) as a refusal names it: its file, from
        their ``--config-dir`` when it is there, and any command-line override of ``baseline.*``."""
        keys = [o for o in self.overrides if o.lstrip("+~").startswith("baseline.")]
        return " and ".join(
            [self.describe("candidate@baseline"), *(f"command-line override {o!r}" for o in keys)]
        )


def display_path(path: Path) -> str:
    """A config file as an error names it: relative to the project root when it is inside it."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML file's top-level mapping, or {} when it cannot be read (for naming a value's origin)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _has_path(raw: Mapping[str, Any], key_path: Sequence[str]) -> bool:
    node: Any = raw
    for key in key_path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def parent_in_group(raw: Mapping[str, Any]) -> str | None:
    """The same-group config a group file extends (``defaults: [baseline, _self_]``), if any."""
    for entry in raw.get("defaults") or []:
        if isinstance(entry, str) and not entry.startswith("/") and entry != "_self_":
            return entry
    return None


def placement_refusal(cand: CandidateConfig, host: HostConfig) -> str | None:
    """Why ``host`` cannot place the candidate's TP x DP (its GPUs, its placement rule, its nodes), or None
    (also when TP or DP is below 1: a problem of the value, said on its own)."""
    tp, dp = cand.tensor_parallel_size, cand.data_parallel_size
    if tp < 1 or dp < 1:
        return None
    pp = pipeline_parallel_size(cand.extra_args)  # --pipeline-parallel-size: TP x PP GPUs a replica
    why = placement_problem(
        tp,
        dp,
        gpus=host.gpu_count,
        placement=host.placement,
        where=f"host '{host.name}'",
        pipeline_parallel_size=pp,
    )
    if why:
        return why
    layout = candidate_layout(tp, dp, host, pipeline_parallel_size=pp)  # also PP across nodes
    return layout if isinstance(layout, str) else None


def multinode_backend_problems(cand: CandidateConfig, host: HostConfig) -> list[tuple[str, object, str]]:
    """The candidate's ``multinode_backend`` against where its ranks sit on ``host``."""
    pp = pipeline_parallel_size(cand.extra_args)
    layout = candidate_layout(
        cand.tensor_parallel_size, cand.data_parallel_size, host, pipeline_parallel_size=pp
    )
    return backend_problems(
        cand.multinode_backend, [cand.extra_args], layout, balancing=cand.data_parallel_load_balancing
    )


def candidate_problems(cand: CandidateConfig, host: HostConfig, where: Any) -> list[ConfigProblem]:
    """Problems of one candidate on one host. ``where(key_path)`` names the file that set a field."""
    out: list[ConfigProblem] = []

    def bad(path: Sequence[str], value: object, allowed: str) -> None:
        out.append(ConfigProblem(where(path), ".".join(path), value, allowed))

    if not CANDIDATE_NAME.match(str(cand.name)):
        bad(["name"], cand.name, "1-64 letters, digits, '_', '.', '-' (it names a directory)")
    for key in ("tensor_parallel_size", "data_parallel_size"):
        if int(getattr(cand, key)) < 1:
            bad([key], getattr(cand, key), "an integer >= 1")
    tp, dp = cand.tensor_parallel_size, cand.data_parallel_size
    if (allowed := placement_refusal(cand, host)) is not None:
        files = dict.fromkeys([where(["tensor_parallel_size"]), where(["data_parallel_size"])])
        out.append(
            ConfigProblem(
                " + ".join(files), "tensor_parallel_size x data_parallel_size", f"{tp} x {dp}", allowed
            )
        )
    for key, value, allowed in multinode_backend_problems(cand, host):  # mp or ray (contracts.ray_backend)
        bad(key.split("."), value, allowed)
    gmu = cand.gpu_memory_utilization
    if not (isinstance(gmu, int | float) and 0 < gmu <= 1):
        bad(["gpu_memory_utilization"], gmu, "a fraction in (0, 1]")
    if cand.speculative is not None:
        spec = cand.speculative
        if spec.num_speculative_tokens < 1:
            bad(["speculative", "num_speculative_tokens"], spec.num_speculative_tokens, "an integer >= 1")
        if spec.draft_sample_method not in DRAFT_SAMPLE_METHODS:
            bad(
                ["speculative", "draft_sample_method"],
                spec.draft_sample_method,
                f"one of {', '.join(DRAFT_SAMPLE_METHODS)}",
            )
    if cand.moe_backend.lower().replace("-", "_") not in MOE_BACKENDS:
        near = difflib.get_close_matches(cand.moe_backend, MOE_BACKENDS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        bad(["moe_backend"], cand.moe_backend, f"a vLLM MoE backend{hint}: {', '.join(MOE_BACKENDS)}")
    if cand.kv_cache_dtype is not None and cand.kv_cache_dtype not in KV_CACHE_DTYPES:
        bad(["kv_cache_dtype"], cand.kv_cache_dtype, f"one of {', '.join(KV_CACHE_DTYPES)}")
    for path, value, allowed in balance_problems(cand, host):  # hybrid/external DP load balancing
        bad(path, value, allowed)
    for key in ("max_num_batched_tokens", "max_num_seqs"):
        value = getattr(cand, key)
        if value is not None and int(value) < 1:
            bad([key], value, "an integer >= 1, or null for vLLM's default")
    return out


def longest(dist: LengthConfig) -> int:
    """The longest length a distribution can draw (a lognormal without ``max``: its mean, the only bound
    it states).

    >>> longest(LengthConfig(kind="uniform", mean=100, min=10, max=300)), longest(LengthConfig(mean=7))
    (300, 7)
    """
    if dist.kind in ("uniform", "lognormal") and dist.max > 0:
        return dist.max
    return dist.mean


def workload_problems(
    name: str, wl: WorkloadConfig, where: Any, *, max_model_len: int | None = None
) -> list[ConfigProblem]:
    """Problems of one workload profile; with ``max_model_len`` (the service's context) a request whose
    prompt (with its shared prefix) plus ``max_tokens`` can exceed it is one too: the server refuses it
    with a 400 and the sweep would blame the candidate (issue 21)."""
    out: list[ConfigProblem] = []

    def bad(path: Sequence[str], value: object, allowed: str) -> None:
        out.append(ConfigProblem(where(path), f"workloads.{name}." + ".".join(path), value, allowed))

    if wl.mode not in WORKLOAD_MODES:
        bad(["mode"], wl.mode, f"one of {', '.join(WORKLOAD_MODES)}")
    if wl.arrivals not in ARRIVALS:
        bad(["arrivals"], wl.arrivals, f"one of {', '.join(ARRIVALS)}")
    if wl.mode == "open" and (wl.rate is None or not (math.isfinite(wl.rate) and wl.rate > 0)):
        bad(["rate"], wl.rate, "a positive arrival rate in requests/s for an open-loop profile")
    if wl.repeats is not None and wl.repeats < 1:
        bad(["repeats"], wl.repeats, "an integer >= 1, or null for run.repeats")
    if wl.concurrency < 1:
        bad(["concurrency"], wl.concurrency, "an integer >= 1")
    if wl.num_requests < 1:
        bad(["num_requests"], wl.num_requests, "an integer >= 1")
    if wl.warmup_requests < 0:
        bad(["warmup_requests"], wl.warmup_requests, "an integer >= 0")
    for key in ("prompt_tokens", "output_tokens"):
        dist: LengthConfig = getattr(wl, key)
        if dist.kind not in LENGTH_KINDS:
            bad([key, "kind"], dist.kind, f"one of {', '.join(LENGTH_KINDS)}")
        if dist.mean < 1:
            bad([key, "mean"], dist.mean, "a token count >= 1")
        if dist.kind in ("uniform", "lognormal") and not (1 <= dist.min <= dist.mean <= dist.max):
            bad([key], f"min={dist.min} mean={dist.mean} max={dist.max}", "1 <= min <= mean <= max")
        if dist.kind == "lognormal" and dist.std < 0:
            bad([key, "std"], dist.std, "a standard deviation in tokens >= 0")
    if wl.time_limit_s <= 0 or wl.request_timeout_s <= 0:
        bad(["time_limit_s"], wl.time_limit_s, "positive seconds")
    if wl.prompts_file is not None:
        path = CONF_DIR / "workload" / wl.prompts_file
        if not path.is_file():
            bad(
                ["prompts_file"],
                wl.prompts_file,
                f"an existing file under conf/workload/ ({path} is missing)",
            )
        elif is_labelled(wl.prompts_file):  # a labelled set (JSONL): read now, as a prompts list is
            labelled_file_problems(path, wl, bad)
        else:  # read it now: an empty or misshapen set is refused here, never blamed on a server
            try:
                parse_prompts(path.read_text(), str(path))
            except (HarnessError, OSError, ValueError) as exc:
                why = exc.message if isinstance(exc, HarnessError) else f"cannot read {path}: {exc}"
                bad(["prompts_file"], wl.prompts_file, f"a JSON list of non-empty strings: {why}")
    generated = wl.data is None and wl.prompts_file is None
    if max_model_len and generated and wl.prompt_tokens.mean >= 1 and wl.output_tokens.mean >= 1:
        prefix = wl.shared_prefix.prefix_tokens if wl.shared_prefix is not None else 0
        prompt, output = longest(wl.prompt_tokens), longest(wl.output_tokens)
        if prefix + prompt + output > max_model_len:
            with_prefix = f"shared_prefix.prefix_tokens {prefix} + " if prefix else ""
            bad(
                ["prompt_tokens"],
                f"{with_prefix}longest prompt {prompt} + longest output_tokens {output} = "
                f"{prefix + prompt + output}",
                f"at most service.max_model_len ({max_model_len}) tokens per request",
            )
    out += source_problems(name, wl, CONF_DIR / "workload", where, max_model_len=max_model_len)
    return out


def run_problems(run: RunConfig, sources: Sources | None = None) -> list[ConfigProblem]:
    """Problems of the ``run`` section's own values (profile names are checked against the workloads)."""
    where = (sources or Sources()).top_origin
    out: list[ConfigProblem] = []
    if run.repeats < 1:
        out.append(ConfigProblem(where("run.repeats"), "run.repeats", run.repeats, "an integer >= 1"))
    if run.scale <= 0:
        out.append(ConfigProblem(where("run.scale"), "run.scale", run.scale, "a positive factor"))
    low = run.min_repeats if run.min_repeats is not None else run.repeats
    if run.min_repeats is not None and run.min_repeats < 1:
        out.append(
            ConfigProblem(
                where("run.min_repeats"), "run.min_repeats", run.min_repeats, "an integer >= 1, or null"
            )
        )
    if run.max_repeats is not None and run.max_repeats < low:
        allowed = f"an integer >= run.min_repeats ({low}), or null for fixed repeats"
        out.append(ConfigProblem(where("run.max_repeats"), "run.max_repeats", run.max_repeats, allowed))
    if run.confirm_runs < 0:
        key = "run.confirm_runs"
        out.append(
            ConfigProblem(where(key), key, run.confirm_runs, "an integer >= 0 (0: no confirmation runs)")
        )
    if run.retained_after_sweep not in RETAINED_AFTER_SWEEP:
        allowed = f"one of {', '.join(RETAINED_AFTER_SWEEP)}"
        key = "run.retained_after_sweep"
        out.append(ConfigProblem(where(key), key, run.retained_after_sweep, allowed))
    if run.simulated_nodes < 0:
        key = "run.simulated_nodes"
        out.append(ConfigProblem(where(key), key, run.simulated_nodes, "an integer >= 0"))
    if any(speed <= 0 for speed in run.simulated_node_speeds):
        key = "run.simulated_node_speeds"
        allowed = "positive speed factors (1.0: as fast as the profile)"
        out.append(ConfigProblem(where(key), key, run.simulated_node_speeds, allowed))
    if run.node_baseline_max_age_s < 0:
        key = "run.node_baseline_max_age_s"
        allowed = "seconds >= 0 (0: every job measures its own)"
        out.append(ConfigProblem(where(key), key, run.node_baseline_max_age_s, allowed))
    if run.interleave_repeats < 1:
        key = "run.interleave_repeats"
        allowed = "an integer >= 1 (run.interleave=false turns the blocks off)"
        out.append(ConfigProblem(where(key), key, run.interleave_repeats, allowed))
    if run.interleave and not run.recovery_profiles:
        key = "run.interleave"
        allowed = "false, or run.recovery_profiles naming the profiles each baseline block measures"
        out.append(ConfigProblem(where(key), key, run.interleave, allowed))
    return out


#: The highest TCP port.
MAX_PORT = 65535
#: More worker processes than this is a typo, not a fleet (each is a process with its own event loop).
MAX_LOAD_WORKERS = 256


def load_problems(load: LoadConfig, sources: Sources | None = None) -> list[ConfigProblem]:
    """Problems of the ``load`` section: worker count, lateness bound, TLS files the client cannot use."""
    where = (sources or Sources()).top_origin
    out: list[ConfigProblem] = []
    if not 1 <= load.workers <= MAX_LOAD_WORKERS:
        allowed = f"an integer from 1 to {MAX_LOAD_WORKERS} (1: the runner's own process)"
        out.append(ConfigProblem(where("load.workers"), "load.workers", load.workers, allowed))
    if load.max_send_lateness_s is not None and load.max_send_lateness_s <= 0:
        key = "load.max_send_lateness_s"
        out.append(ConfigProblem(where(key), key, load.max_send_lateness_s, "seconds > 0, or null"))
    out.extend(tls_problems(load, where))  # each file readable, PEM, the key its certificate's
    if load.client_key is not None and load.client_cert is None:
        key = "load.client_key"
        out.append(ConfigProblem(where(key), key, load.client_key, "null unless load.client_cert is set"))
    return out


def validate(cfg: GauntletConfig, sources: Sources | None = None) -> None:
    """Raise ConfigError listing every problem of the composed config; return quietly when valid."""
    src = sources or Sources()
    problems: list[ConfigProblem] = []
    host = cfg.host
    host_file = src.describe("host")
    if host.kind not in HOST_KINDS:
        problems.append(ConfigProblem(host_file, "host.kind", host.kind, f"one of {', '.join(HOST_KINDS)}"))
    if host.placement not in PLACEMENTS:
        problems.append(
            ConfigProblem(host_file, "host.placement", host.placement, f"one of {', '.join(PLACEMENTS)}")
        )
    if host.gpu_count < 1:
        problems.append(ConfigProblem(host_file, "host.gpu_count", host.gpu_count, "an integer >= 1"))
    if host.nodes < 1:
        problems.append(ConfigProblem(host_file, "host.nodes", host.nodes, "an integer >= 1"))
    elif host.nodes > 1 and host.gpus_per_node * host.nodes != host.gpu_count:
        problems.append(
            ConfigProblem(
                host_file,
                "host.gpus_per_node",
                host.gpus_per_node,
                f"GPUs per node, an integer >= 1 with nodes x gpus_per_node = gpu_count ({host.gpu_count})",
            )
        )
    if host.nodes > 1 and not 1 <= host.rpc_port <= MAX_PORT:
        port = ConfigProblem(host_file, "host.rpc_port", host.rpc_port, f"a TCP port, 1..{MAX_PORT}")
        problems.append(port)
    if (why := interface_problem(host.network.interface)) is not None:
        problems.append(ConfigProblem(host_file, "host.network.interface", host.network.interface, why))
    if host.time_scale <= 0:
        problems.append(ConfigProblem(host_file, "host.time_scale", host.time_scale, "a positive factor"))
    nice = host.server_autogroup_nice
    if nice is not None and not -20 <= nice <= 19:
        allowed = "an integer -20..19 (Linux's nice range), or null to leave the scheduler's default"
        problems.append(ConfigProblem(host_file, "host.server_autogroup_nice", nice, allowed))
    if not host.entrypoint or not any("{model}" in part for part in host.entrypoint):
        problems.append(
            ConfigProblem(host_file, "host.entrypoint", host.entrypoint, "a command containing '{model}'")
        )
    if not 1 <= cfg.service.port <= MAX_PORT:  # 0 would let the kernel pick: nobody could find it
        port_at = src.origin("service", src.choices.get("service"), ["port"])
        problems.append(
            ConfigProblem(port_at, "service.port", cfg.service.port, f"a TCP port, 1..{MAX_PORT}")
        )
    for package, cand in (("candidate", cfg.candidate), ("candidate@baseline", cfg.baseline)):
        choice = src.choices.get(package)
        key = package.rpartition("@")[2]

        def where(path: Sequence[str], choice: str | None = choice, key: str = key) -> str:
            return src.origin("candidate", choice, path, key) if choice else f"<{key}>"

        problems.extend(candidate_problems(cand, host, where))
    runs = {*cfg.run.profiles, *cfg.run.recovery_profiles, cfg.capacity.profile}
    for name, wl in cfg.workloads.items():
        choice = src.choices.get(f"workload@workloads.{name}")

        def wwhere(path: Sequence[str], choice: str | None = choice, name: str = name) -> str:
            return (
                src.origin("workload", choice, path, f"workloads.{name}") if choice else f"<workloads.{name}>"
            )

        # A request longer than the context is checked on the profiles this sweep runs.
        context = cfg.service.max_model_len if name in runs else None
        problems.extend(workload_problems(name, wl, wwhere, max_model_len=context))
    known = set(cfg.workloads)
    for section, names in (
        ("run.profiles", cfg.run.profiles),
        ("run.recovery_profiles", cfg.run.recovery_profiles),
        ("gates.accepted_profiles", cfg.gates.accepted_profiles),
        ("gates.loaded_profiles", cfg.gates.loaded_profiles),
    ):
        for name in names:
            if name not in known:
                problems.append(
                    ConfigProblem(
                        src.top_origin(section), section, name, f"a workload name: {', '.join(sorted(known))}"
                    )
                )
    problems.extend(run_problems(cfg.run, src))
    problems.extend(load_problems(cfg.load, src))
    problems.extend(
        api_key_problems(cfg.service, src.origin("service", src.choices.get("service"), ["api_key_env"]))
    )
    problems.extend(capacity_problems(cfg, src.describe("slo"), "conf/config.yaml"))
    problems.extend(cost_problems(cfg, src))
    from gates import REGISTRY  # noqa: PLC0415  (gates register themselves on import)

    for name in cfg.gates.enabled:
        if name not in REGISTRY:
            problems.append(
                ConfigProblem(
                    src.origin("gates", src.choices.get("gates"), ["enabled"]),
                    "gates.enabled",
                    name,
                    f"a registered gate: {', '.join(REGISTRY)}",
                )
            )
    problems.extend(abuse_problems(cfg, _where_of(src)))
    if not 0 < cfg.gates.confidence < 1:
        problems.append(
            ConfigProblem(
                src.describe("gates"), "gates.confidence", cfg.gates.confidence, "a level in (0, 1)"
            )
        )
    problems.extend(accuracy_problems(cfg, src))
    problems.extend(lm_eval_problems(cfg, src.top_origin))
    if problems:
        raise ConfigError(problems)


def _where_of(src: Sources) -> Callable[[str, str, Sequence[str]], str]:
    """``where(package, group, key_path)``: the file that set a field of a config group, for messages."""

    def where(package: str, group: str, key_path: Sequence[str]) -> str:
        choice = src.choices.get(package)
        if choice is None:
            return f"<{package}>"
        return src.origin(group, choice, key_path, package.rpartition("@")[2])

    return where
