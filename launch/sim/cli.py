"""Command line of the simulator: vLLM's flags (as gauntlet renders them) plus ``--sim-*`` flags.

Pipeline position: the launcher starts ``python -m launch.sim`` with a launch spec's argv; this module
turns that argv into :class:`SimArgs` exactly as vLLM would accept or refuse it (an unknown flag exits
with code 2 and ``error: unrecognized arguments: ...``; ``--config FILE.yaml`` is read as vLLM reads it,
with command-line flags winning over the file).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launch.sim.model import EngineConfig

BOOL = argparse.BooleanOptionalAction


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m launch.sim",
        description="Simulated vLLM server (gauntlet); every number it produces is simulated.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add(
        "model_tag", nargs="?", default=None, help="model (positional form of --model, as `vllm serve MODEL`)"
    )
    add("--config", default=None, help="YAML file of flags (keys are flag names without --)")
    add("--model", default=None)
    add("--served-model-name", nargs="+", default=None)
    add("--revision", default=None)
    add("--code-revision", default=None)
    add("--tokenizer", default=None)
    add("--tokenizer-mode", default="auto")
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=8000)
    add("--tensor-parallel-size", "-tp", type=int, default=1)
    add("--pipeline-parallel-size", "-pp", type=int, default=1)
    add("--data-parallel-size", "-dp", type=int, default=1)
    add("--data-parallel-size-local", "-dpl", type=int, default=None)
    add("--data-parallel-backend", "-dpb", default="mp")
    add("--distributed-executor-backend", default=None, choices=["ray", "mp", "uni", "external_launcher"])
    # Multi-node (launch.sim.nodes): the head's address and RPC port, a follower's first rank, --headless.
    add("--data-parallel-start-rank", "-dpr", type=int, default=None)
    add("--data-parallel-address", "-dpa", default=None)
    add("--data-parallel-rpc-port", "-dpp", type=int, default=None)
    add("--headless", action=BOOL, default=False)
    # One API server per node (hybrid) or per rank (external): each serves its own ranks (launch.sim.nodes).
    add("--data-parallel-hybrid-lb", "-dph", action=BOOL, default=False)
    add("--data-parallel-external-lb", "-dpe", action=BOOL, default=False)
    add("--data-parallel-rank", "-dpn", type=int, default=None)
    add("--nnodes", "-n", type=int, default=1)
    add("--node-rank", "-r", type=int, default=0)
    add("--master-addr", default=None)
    add("--master-port", type=int, default=None)
    add("--api-server-count", "-asc", type=int, default=1)
    add("--enable-expert-parallel", action=BOOL, default=False)
    add("--enable-eplb", action=BOOL, default=False)
    add("--eplb-config", default=None)
    add("--speculative-config", default=None)
    add("--moe-backend", default="auto")
    add("--gpu-memory-utilization", type=float, default=0.9)
    add("--max-num-batched-tokens", type=int, default=None)
    add("--max-num-seqs", type=int, default=None)
    add("--max-model-len", type=int, default=None)
    add("--kv-cache-dtype", default="auto")
    add("--block-size", type=int, default=None)
    add("--dtype", default="auto")
    add("--quantization", "-q", default=None)
    add("--reasoning-parser", default=None)
    add("--seed", type=int, default=0)
    add("--trust-remote-code", action=BOOL, default=False)
    add("--enforce-eager", action=BOOL, default=False)
    add("--enable-prefix-caching", action=BOOL, default=None)
    add("--enable-chunked-prefill", action=BOOL, default=None)
    add("--async-scheduling", action=BOOL, default=None)
    add("--disable-log-stats", action=BOOL, default=False)
    add("--enable-log-requests", action=BOOL, default=False)
    add("--disable-log-requests", action=BOOL, default=None)
    add("--disable-uvicorn-access-log", action=BOOL, default=False)
    add("--uvicorn-log-level", default="info")
    add("--shutdown-timeout", type=float, default=None)
    add("--swap-space", type=float, default=None)
    add("--load-format", default="auto")
    add("--download-dir", default=None)
    add("--generation-config", default=None)
    add("--compilation-config", "-O", default=None)
    add("--api-key", default=None)
    sim = parser.add_argument_group("simulation (gauntlet only)")
    sim.add_argument("--sim-profile", default="h100x8_deepseek_v4_flash", help="profile name or JSON path")
    sim.add_argument("--sim-time-scale", type=float, default=1.0, help="simulated seconds per wall second")
    sim.add_argument(
        "--sim-speed",
        type=float,
        # The simulated node's hardware, not the candidate's configuration: a parallel sweep's simulated
        # cluster sets it per node in the environment, so no spec (and no fingerprint) carries it.
        default=float(os.environ.get("GAUNTLET_SIM_SPEED", "1.0")),
        help="host speed factor (0.8: steps 1/0.8 longer; default $GAUNTLET_SIM_SPEED or 1.0)",
    )
    sim.add_argument("--sim-startup-s", type=float, default=1.0, help="wall seconds before the port opens")
    sim.add_argument(
        "--sim-follower-exit-s", type=float, default=None, help="a --headless follower dies after T wall s"
    )
    sim.add_argument("--sim-slow-start-s", type=float, default=0.0, help="extra wall seconds of startup")
    sim.add_argument(
        "--sim-crash-after-requests", type=int, default=None, help="die after N finished requests"
    )
    sim.add_argument("--sim-crash-at-s", type=float, default=None, help="die T simulated s after ready")
    sim.add_argument(
        "--sim-hang-health",
        type=float,
        nargs="?",
        const=0.0,
        default=None,
        help="/health stops answering T simulated s after ready (no value: from the start)",
    )
    sim.add_argument(
        "--sim-error-rate", type=float, default=0.0, help="fraction of chat requests answered 500"
    )
    sim.add_argument(
        "--sim-stall-stream-after-chunks", type=int, default=None, help="streams go silent after N chunks"
    )
    sim.add_argument(
        "--sim-coalesce-ms",
        type=float,
        default=1.0,
        help="wall ms under which one stream's steps are merged into one chunk (never first/visible/last)",
    )
    return parser


def _config_argv(path: str) -> list[str]:
    """vLLM's ``--config`` semantics: key -> --key; true -> flag; false -> dropped; mapping -> JSON."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"error: cannot read --config {path}: {exc}") from None
    if data is None:
        return []
    if not isinstance(data, dict):
        raise SystemExit(f"error: --config {path} must hold a mapping of flag names to values")
    argv: list[str] = []
    for key, value in data.items():
        flag = f"--{str(key).removeprefix('--')}"
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        elif isinstance(value, list):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def expand_config(argv: Sequence[str]) -> list[str]:
    """Insert the ``--config`` file's flags before the command line's (the command line wins)."""
    args = list(argv)
    for i, item in enumerate(args):
        if item == "--config" and i + 1 < len(args):
            path, rest = args[i + 1], args[:i] + args[i + 2 :]
        elif item.startswith("--config="):
            path, rest = item.split("=", 1)[1], args[:i] + args[i + 1 :]
        else:
            continue
        # like vLLM: a positional MODEL stays first, then the file's flags, then the command line's
        head = rest[:1] if rest and not rest[0].startswith("-") else []
        return head + _config_argv(path) + rest[len(head) :]
    return args


@dataclass(frozen=True)
class SimArgs:
    """The parsed command line."""

    model: str
    served_model_name: str
    host: str
    port: int
    max_model_len: int | None
    reasoning_parser: str | None
    engine: EngineConfig
    profile: str
    time_scale: float
    startup_s: float
    slow_start_s: float
    crash_after_requests: int | None
    crash_at_s: float | None
    hang_health_after_s: float | None
    error_rate: float
    stall_after_chunks: int | None
    coalesce_s: float
    raw: dict[str, Any]
    api_key: str | None = None  # --api-key (vLLM also reads VLLM_API_KEY; the server does that)


def parse_args(argv: Sequence[str]) -> SimArgs:
    """Parse like vLLM: exits 2 with ``error: ...`` on stderr for an unknown flag or a bad value."""
    parser = build_parser()
    ns = parser.parse_args(expand_config(argv))
    model = ns.model or ns.model_tag
    if not model:
        parser.error("the following arguments are required: --model (or a positional MODEL)")
    spec: dict[str, Any] = {}
    if ns.speculative_config:
        try:
            spec = json.loads(ns.speculative_config)
        except json.JSONDecodeError as exc:
            parser.error(f"argument --speculative-config: invalid JSON ({exc})")
        if not isinstance(spec, dict):
            parser.error("argument --speculative-config: expected a JSON object")
    if ns.eplb_config:
        try:
            json.loads(ns.eplb_config)
        except json.JSONDecodeError as exc:
            parser.error(f"argument --eplb-config: invalid JSON ({exc})")
    if ns.sim_time_scale <= 0:
        parser.error("argument --sim-time-scale: must be > 0")
    if ns.sim_speed <= 0:
        parser.error("argument --sim-speed: must be > 0")
    if not 0.0 <= ns.sim_error_rate <= 1.0:
        parser.error("argument --sim-error-rate: must be in [0, 1]")
    method = spec.get("method")
    engine = EngineConfig(
        tensor_parallel_size=ns.tensor_parallel_size,
        data_parallel_size=ns.data_parallel_size,
        pipeline_parallel_size=ns.pipeline_parallel_size,
        enable_expert_parallel=bool(ns.enable_expert_parallel),
        enable_eplb=bool(ns.enable_eplb),
        speculative_method=str(method) if method else None,
        num_speculative_tokens=int(spec.get("num_speculative_tokens", 0) or 0),
        draft_sample_method=str(spec.get("draft_sample_method", "greedy")),
        moe_backend=ns.moe_backend,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        max_num_seqs=ns.max_num_seqs,
        max_model_len=ns.max_model_len or 0,
        kv_cache_dtype=ns.kv_cache_dtype,
        enforce_eager=bool(ns.enforce_eager),
        seed=ns.seed,
        speed=ns.sim_speed,
    )
    return SimArgs(
        model=model,
        served_model_name=(ns.served_model_name or [model])[0],
        host=ns.host,
        port=ns.port,
        max_model_len=ns.max_model_len,
        reasoning_parser=ns.reasoning_parser,
        engine=engine,
        profile=ns.sim_profile,
        time_scale=ns.sim_time_scale,
        startup_s=max(0.0, ns.sim_startup_s),
        slow_start_s=max(0.0, ns.sim_slow_start_s),
        crash_after_requests=ns.sim_crash_after_requests,
        crash_at_s=ns.sim_crash_at_s,
        hang_health_after_s=ns.sim_hang_health,
        error_rate=ns.sim_error_rate,
        stall_after_chunks=ns.sim_stall_stream_after_chunks,
        coalesce_s=max(0.0, ns.sim_coalesce_ms) / 1e3,
        raw=vars(ns),
        api_key=ns.api_key,
    )
