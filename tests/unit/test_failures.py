"""Startup-failure classification: the pattern table against vLLM's and the simulator's real messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from launch.failures import (
    DEFAULT_PATTERNS,
    EVIDENCE_LINES,
    KINDS,
    FailurePattern,
    classify,
    death_cause,
    parse_patterns,
    read_log_tail,
    significant,
)

ROOT = Path(__file__).resolve().parents[2]

# Lines as vLLM 0.32 on CPU printed them (copied from real logs, pids and times as they were).
ARGPARSE = "api_server.py: error: unrecognized arguments: --no-such-flag"
ENGINE_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)
HEAD80 = (
    "(Worker pid=9579) ERROR 12-02 16:29:03 [multiproc_executor.py:1063] NotImplementedError: FP8 KV cache "
    "requires head_size divisible by 32 on CPU."
)
NOISE = [
    "(APIServer pid=5899) WARNING 12-02 16:26:11 [system_utils.py:255] Found ulimit of 20000 and failed to "
    "automatically increase with error current limit exceeds maximum limit.",
    "(APIServer pid=5899) WARNING 12-02 16:26:22 [vllm.py:725] Model Runner V2 requires Triton; using the V1 "
    "model runner instead.",
    "(Worker pid=6119) WARNING 12-02 16:26:42 [cpu_worker.py:114] libtcmalloc is not found in LD_PRELOAD.",
    "[W1202 16:26:42.756964973 utils.cpp:68] Warning: NUMA binding: Using MEMBIND policy (function x)",
    "INFO:     Started server process [5899]",
]


@pytest.mark.parametrize(
    ("exit_code", "lines", "kind", "quoted"),
    [
        # argparse: exit 2 within seconds
        (2, [*NOISE, "usage: api_server.py [-h] ...", ARGPARSE], "bad-args", ARGPARSE),
        (2, ["api_server.py: error: argument --moe-backend: invalid choice: 'x'"], "bad-args",
         "api_server.py: error: argument --moe-backend: invalid choice: 'x'"),
        # the same text with another exit code is not argparse speaking
        (1, [ARGPARSE], "crashed", None),
        # hardware or runtime refuses the configuration
        (1, ["Traceback (most recent call last):",
             '  File "vllm/model_executor/layers/fused_moe/deep_gemm_mega_moe.py", line 88, in __init__',
             "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs.", ENGINE_FAILED],
         "incompatible", "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs."),
        (1, ["(EngineCore pid=7) ERROR 12-02 16:27:44 [core.py:1510] NotImplementedError: FP8 KV cache on "
             "CPU requires x86 with AVX-512 or AMX.", ENGINE_FAILED],
         "incompatible", "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."),
        (1, [*NOISE, HEAD80, ENGINE_FAILED], "incompatible",
         "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU."),
        (1, ["RuntimeError: Unsupported CPU attention configuration"], "incompatible",
         "RuntimeError: Unsupported CPU attention configuration"),
        # an EPLB root cause is init-failed even though it is a NotImplementedError
        (1, ["Traceback (most recent call last):",
             '  File "vllm/distributed/eplb/eplb_state.py", line 212, in build',
             "NotImplementedError: EPLB is not supported for DeepseekV4ForCausalLM: its MoE layers expose no "
             "expert load state, so expert-parallel load balancing cannot initialize.", ENGINE_FAILED],
         "init-failed", "NotImplementedError: EPLB is not supported for DeepseekV4ForCausalLM"),
        (1, ["RuntimeError: EPLB state failed to initialize: rank 3 has no experts", ENGINE_FAILED],
         "init-failed", "RuntimeError: EPLB state failed to initialize"),
        # memory
        (1, ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
             "capacity of 79.19 GiB of which 1.02 GiB is free."], "out-of-memory",
         "torch.OutOfMemoryError: CUDA out of memory."),
        (1, ["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
             "when initializing the engine.", ENGINE_FAILED], "out-of-memory",
         "ValueError: No available memory for the cache blocks."),
        (1, ["ValueError: Free memory on device (70.1/79.2 GiB) on startup is less than desired GPU memory "
             "utilization (0.9, 71.3 GiB)."], "out-of-memory",
         "is less than desired GPU memory utilization"),
        (1, ["ValueError: Available memory on node 0 (3.1/23.4 GiB) on startup is less than desired CPU "
             "memory utilization (0.81, 19.0 GiB)."], "out-of-memory",
         "less than desired CPU memory utilization"),
        (1, ["ValueError: To serve at least one request with the models's max seq len (131072), (8.00 GiB KV "
             "cache is needed, which is larger than the available KV cache memory (2.10 GiB)."],
         "out-of-memory", "larger than the available KV cache memory"),
        # other init failures and bad values found at startup
        (1, ["ValueError: The number of required GPUs (16 = tensor_parallel_size 4 x data_parallel_size 4) "
             "exceeds the 8 GPUs available on this host."], "init-failed", "The number of required GPUs"),
        (1, ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system "
             "error"], "init-failed", "NCCL error"),
        (1, ["ValueError: speculative method 'eagle' is not supported for this model (supported: [...])"],
         "init-failed", "speculative method 'eagle' is not supported for this model"),
        (1, ["ValueError: gpu_memory_utilization must be in (0, 1], got 1.5"], "bad-args",
         "ValueError: gpu_memory_utilization must be in (0, 1], got 1.5"),
        (1, ["ValueError: Unsupported KV cache dtype 'fp4' for this model (supported: ['auto', 'fp8'])"],
         "bad-args", "Unsupported KV cache dtype 'fp4'"),
        (1, ["pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig"], "bad-args",
         "ValidationError: 1 validation error for VllmConfig"),
        # only the generic engine line: init-failed, quoting it
        (1, [*NOISE, ENGINE_FAILED], "init-failed", "Engine core initialization failed"),
        # nothing known: crashed, whatever the exit code (a signal gives a negative one)
        (1, [*NOISE, "Segmentation fault (core dumped)"], "crashed", None),
        (-9, [], "crashed", None),
        (0, ["INFO:     Shutting down"], "crashed", None),
    ],
)  # fmt: skip
def test_classification_table(exit_code: int, lines: list[str], kind: str, quoted: str | None) -> None:
    verdict = classify(exit_code, lines)
    assert verdict.kind == kind
    if quoted is None:
        assert verdict.matched_line is None
    else:
        assert verdict.matched_line is not None and quoted in verdict.matched_line
    assert verdict.hint
    assert verdict.evidence == lines[-EVIDENCE_LINES:]


@pytest.mark.parametrize(
    "line",
    [
        # warnings and info lines never classify, even when they say "not supported on this platform"
        "(APIServer pid=1) WARNING 12-02 16:26:22 [cpu.py:224] pin_memory is not supported on this platform.",
        "(APIServer pid=1) INFO 12-02 16:27:24 [cache.py:361] Using fp8 data type to store kv cache.",
        # traceback frames name EPLB files without anything having failed
        '  File "vllm/distributed/eplb/eplb_state.py", line 212, in failover_build',
        '(Worker pid=9) ERROR 12-02 16:29:03 [executor.py:1063]   File "/x/eplb/fail.py", line 3, in f',
        "/x/api_server.py:24: DeprecationWarning: `x` is deprecated and not supported on this platform",
    ],
)
def test_noise_lines_never_classify(line: str) -> None:
    assert significant(line) is None
    assert classify(1, [line]).kind == "crashed"


def test_the_prefix_is_stripped_from_the_quoted_line() -> None:
    assert (
        significant(HEAD80) == "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU."
    )


def test_root_cause_wins_over_the_generic_engine_line_whatever_the_order() -> None:
    lines = [ENGINE_FAILED, "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs.", ENGINE_FAILED]
    assert classify(1, lines).kind == "incompatible"


def test_timeout_is_timeout_whatever_the_log_says_and_still_quotes_a_match() -> None:
    stuck = classify(None, ["RuntimeError: EPLB state failed to initialize"], timed_out=True)
    assert (stuck.kind, stuck.matched_line) == ("timeout", "RuntimeError: EPLB state failed to initialize")
    quiet = classify(None, ["INFO:     Waiting for application startup."], timed_out=True)
    assert (quiet.kind, quiet.matched_line) == ("timeout", None)


def test_user_patterns_put_first_win_over_the_defaults() -> None:
    extra = parse_patterns([{"kind": "incompatible", "regex": r"HIP error: invalid device function",
                             "hint": "this ROCm build lacks the kernel"}])  # fmt: skip
    lines = ["RuntimeError: HIP error: invalid device function", ENGINE_FAILED]
    assert classify(1, lines).kind == "init-failed"
    verdict = classify(1, lines, (*extra, *DEFAULT_PATTERNS))
    assert (verdict.kind, verdict.hint) == ("incompatible", "this ROCm build lacks the kernel")


def test_bad_user_patterns_are_refused_naming_the_row() -> None:
    with pytest.raises(ConfigError) as info:
        parse_patterns(
            [
                {"kind": "incompatible", "regex": "ok", "exit_codes": [1]},
                {"kind": "meltdown", "regex": "x"},
                {"kind": "crashed", "regex": "("},
                {"regex": "no kind"},
            ],
            source="conf/host/rocm.yaml",
        )
    text = str(info.value)
    assert "[1]" in text and "meltdown" in text
    assert "[2].regex" in text
    assert "[3].kind" in text
    assert "[0]" not in text


def test_every_pattern_kind_is_a_known_kind_and_rows_compile() -> None:
    assert {p.kind for p in DEFAULT_PATTERNS} <= set(KINDS)
    with pytest.raises(ValueError, match="not one of"):
        FailurePattern("timeout", "x", "timeouts are decided by the clock")


def _sim_refusals() -> list[tuple[str, list[str]]]:
    out = []
    for path in sorted((ROOT / "launch" / "sim" / "profiles").glob("*.json")):
        for refusal in json.loads(path.read_text()).get("refusals", []):
            # a hardware limit (a compute capability, or the CPU platform itself) is incompatible
            hardware = refusal.get("unless_min_compute_capability") or any(
                "on CPU" in line for line in refusal["log"]
            )
            kind = "incompatible" if hardware else "init-failed"
            out.append((kind, list(refusal["log"])))
    return out


@pytest.mark.parametrize(("kind", "log"), _sim_refusals() or [pytest.param("", [], marks=pytest.mark.skip(
    reason="no simulator profiles in launch/sim/profiles"))])  # fmt: skip
def test_simulator_refusals_classify_as_the_simulator_means(kind: str, log: list[str]) -> None:
    assert classify(1, [*log, ENGINE_FAILED]).kind == kind


def test_read_log_tail_strips_colour_and_the_cut_first_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"first line that will be cut\n" + b"x" * 50 + b"\n\x1b[31mERROR\x1b[0m boom \xff\n")
    assert read_log_tail(log, max_bytes=60)[-1] == "ERROR boom \ufffd"
    assert read_log_tail(log, max_bytes=60)[0] != "first line that will be cut"
    assert read_log_tail(log)[0] == "first line that will be cut"
    assert read_log_tail(tmp_path / "missing.log") == []


WORKER_SIGILL = (
    "(EngineCore pid=10141) ERROR 12-05 02:03:37 [multiproc_executor.py:315] Worker proc VllmWorker-0 died "
    "unexpectedly (exit code: -4), shutting down executor."
)


@pytest.mark.parametrize(
    ("exit_code", "lines", "cause"),
    [
        # vLLM's API server exits 0 after its engine died: the worker's line is the cause (seen, an AMX CPU)
        (
            0,
            ["INFO starting", WORKER_SIGILL, "INFO [shutdown] MPClient: complete"],
            "its log: VllmWorker-0 died by SIGILL (an instruction this CPU or OS refused; on an AMX CPU "
            "see docs/launcher.md)",
        ),
        (
            -9,
            [],
            "the server was killed by SIGKILL (killed from outside: the kernel's OOM killer, or a kill -9)",
        ),
        (-11, ["x"], "the server was killed by SIGSEGV (a crash in native code)"),
        (-10, [], "the server was killed by SIGUSR1"),  # a signal with no usual meaning: its name only
        (
            0,
            ["Worker proc VllmWorker-1 died unexpectedly (exit code: 1), shutting down executor."],
            "its log: VllmWorker-1 died unexpectedly (exit code: 1)",
        ),
        (1, ["RuntimeError: something"], None),  # nothing beyond the exit code
        (None, [], None),
    ],
)
def test_death_cause_names_the_signal_of_the_server_or_of_the_worker_its_log_names(
    exit_code: int | None, lines: list[str], cause: str | None
) -> None:
    assert death_cause(exit_code, lines) == cause
