"""Startup-failure classes as data: a table of log patterns, first match wins.

Pipeline position: the launcher (:mod:`launch.supervisor`) calls :func:`classify` the moment a server exits
before it became ready (or when its startup deadline passes) and raises :func:`startup_failure`; the outcome
becomes the candidate's :class:`~contracts.results.StartupRecord` (:func:`startup_record`) and decides
whether the sweep says "incompatible with this hardware" or "crashed". Extending it for another runtime is
adding rows, not code::

    extra = parse_patterns([{"kind": "incompatible", "regex": "requires ROCm", "hint": "..."}])
    Supervisor(patterns=(*extra, *DEFAULT_PATTERNS))

Kinds: ``bad-args`` (the command line was refused), ``incompatible`` (the hardware or runtime refuses the
configuration), ``init-failed`` (a component could not initialize), ``out-of-memory``, ``timeout`` (never
became ready; decided by the launcher, not by a pattern) and ``crashed`` (anything else).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from contracts.errors import ConfigError, ConfigProblem, StartupFailure
from contracts.results import StartupRecord

BAD_ARGS: Final = "bad-args"
INCOMPATIBLE: Final = "incompatible"
INIT_FAILED: Final = "init-failed"
OUT_OF_MEMORY: Final = "out-of-memory"
TIMEOUT: Final = "timeout"
CRASHED: Final = "crashed"
#: Every failure kind, in the order a report lists them.
KINDS: Final = (BAD_ARGS, INCOMPATIBLE, INIT_FAILED, OUT_OF_MEMORY, TIMEOUT, CRASHED)
#: Kinds a pattern may assign (timeout is decided by the clock, crashed is the fallback).
PATTERN_KINDS: Final = (BAD_ARGS, INCOMPATIBLE, INIT_FAILED, OUT_OF_MEMORY, CRASHED)

#: How many log lines a failure carries as evidence.
EVIDENCE_LINES = 40

#: vLLM's logger prefix, with the ``(Name pid=N)`` tag of child processes:
#: '(Worker pid=9) ERROR 12-02 16:29:03 [multiproc_executor.py:1063] message'. Classifying reads the message.
_PREFIX = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s?)?"
)
#: Messages that never classify: traceback frames and source lines (they name files such as
#: ``eplb_state.py`` without saying anything failed), warnings of every kind, uvicorn's access log.
_NOISE = re.compile(
    r"""^(?:
        \s*File\s"[^"]*",\s+line\s\d+     # traceback frame
      | \s{4}                             # the source line under a frame, or a continuation
      | \s*[\^~]+\s*$                     # traceback carets
      | \[W\d{4}\s                        # torch C++ warning '[W1202 16:26:42...]'
      | INFO:\s                           # uvicorn
      | \S+\.py:\d+:\s\w*Warning:          # Python warning
      | \s*warnings\.warn\(
      | \#\ gauntlet:                       # the launcher's own header line (it quotes the command line)
    )""",
    re.VERBOSE,
)
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN"})
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class FailurePattern:
    """One row of the table: a log line matching ``regex`` (case-insensitive) means ``kind``.

    ``exit_codes`` restricts the row to those process exit codes (argparse exits with 2).
    """

    kind: str
    regex: str
    hint: str
    exit_codes: frozenset[int] | None = None
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in PATTERN_KINDS:
            raise ValueError(f"failure kind {self.kind!r} is not one of {', '.join(PATTERN_KINDS)}")
        object.__setattr__(self, "_compiled", re.compile(self.regex, re.IGNORECASE))

    def matches(self, line: str, exit_code: int | None) -> bool:
        if self.exit_codes is not None and exit_code not in self.exit_codes:
            return False
        return self._compiled.search(line) is not None


@dataclass(frozen=True)
class Classification:
    """The verdict on one failed startup."""

    kind: str
    hint: str
    matched_line: str | None  # the log line that decided it (None: fallback or timeout)
    evidence: list[str]  # the last log lines


#: Most specific first; the first row that matches any line wins. vLLM's messages (and the simulator's,
#: which copies them) are quoted in the comments.
DEFAULT_PATTERNS: Final[tuple[FailurePattern, ...]] = (
    # "error: unrecognized arguments: --no-such-flag" (argparse, exit 2, within seconds)
    FailurePattern(
        BAD_ARGS,
        r"error: unrecognized arguments",
        "a flag is unknown to this vLLM version: check extra_args and `vllm serve --help`",
        frozenset({2}),
    ),
    # "error: argument --moe-backend: invalid choice: 'x'", "error: argument --max-num-seqs: invalid int"
    FailurePattern(
        BAD_ARGS,
        r"error: (argument \S+|the following arguments are required)",
        "a flag has a value this vLLM version refuses: see the quoted line",
        frozenset({2}),
    ),
    # "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs."
    FailurePattern(
        INCOMPATIBLE,
        r"requires SM ?\d+|requires (a GPU with )?compute capability",
        "the kernel needs a newer GPU generation than this host has: pick another moe_backend",
    ),
    # "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    FailurePattern(
        INCOMPATIBLE,
        r"requires [^.]*\b(AVX-?512|AMX|AVX2)\b",
        "this CPU lacks the instruction set the configuration needs: use kv_cache_dtype auto",
    ),
    # "RuntimeError: Unsupported CPU attention configuration" (head sizes outside the kernel's list)
    FailurePattern(
        INCOMPATIBLE,
        r"Unsupported (CPU )?attention configuration|no (valid|supported) attention backend",
        "no attention kernel supports this model shape or dtype on this device",
    ),
    # "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ..."
    FailurePattern(
        OUT_OF_MEMORY,
        r"CUDA out of memory|OutOfMemoryError|\bout of memory\b|Cannot allocate memory",
        "the configuration needs more device memory than is free: "
        "lower max_num_batched_tokens or max_model_len, or use more GPUs",
    ),
    # "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`..."
    FailurePattern(
        OUT_OF_MEMORY,
        r"No available memory for the cache blocks",
        "the weights fill the memory budget: raise gpu_memory_utilization or use more GPUs",
    ),
    # "ValueError: Free memory on device (70.1/79.2 GiB) on startup is less than desired GPU memory
    #  utilization (0.9, 71.3 GiB)"; on CPU: "... less than desired CPU memory utilization"
    FailurePattern(
        OUT_OF_MEMORY,
        r"less than desired (GPU |CPU )?memory utilization",
        "another process holds memory on the device: stop it, or lower gpu_memory_utilization",
    ),
    # "ValueError: To serve at least one request with the models's max seq len (131072), (8.0 GiB KV cache
    #  is needed, which is larger than the available KV cache memory (2.1 GiB)."
    FailurePattern(
        OUT_OF_MEMORY,
        r"larger than the available KV cache memory|insufficient (KV cache )?memory",
        "the KV cache cannot hold one request of max_model_len: lower max_model_len or free memory",
    ),
    # "NotImplementedError: EPLB is not supported for DeepseekV4ForCausalLM: ... cannot initialize.",
    # "RuntimeError: EPLB state failed to initialize" (before the generic NotImplementedError row)
    FailurePattern(
        INIT_FAILED,
        r"\bEPLB\b.*\b(fail\w*|error|unable|cannot|could not|not supported)\b"
        r"|\b(fail\w*|unable|cannot|could not)\b.*\bEPLB\b",
        "expert-parallel load balancing could not start: check eplb_config and expert parallelism",
    ),
    # "ValueError: The number of required GPUs (16 = ...) exceeds the 8 GPUs available on this host."
    FailurePattern(
        INIT_FAILED,
        r"number of required GPUs|larger than the number of available GPUs|exceeds the \d+ GPUs available",
        "the candidate needs more GPUs than the host has: lower tensor/data parallel sizes",
    ),
    # "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU." (any CPU, head_dim 80)
    FailurePattern(
        INCOMPATIBLE,
        r"^NotImplementedError: |requires head_size divisible",
        "the runtime has no implementation of this configuration for this model on this hardware",
    ),
    # "... is not supported on this platform", "... not supported on CPU"
    FailurePattern(
        INCOMPATIBLE,
        r"(not|isn't|is not) supported (on|by) (this|the current|your|cpu|rocm|xpu)\b"
        r"|not supported for (this|the current) (platform|device|gpu)",
        "the runtime refuses this configuration on this hardware",
    ),
    # "torch.distributed.DistBackendError: NCCL error ...", "Failed to initialize NCCL/process group"
    FailurePattern(
        INIT_FAILED,
        r"NCCL error|DistBackendError|(failed to|could not|unable to) (initialize|init)\b",
        "a distributed component could not initialize: check the GPUs' topology and NCCL settings",
    ),
    # "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig"
    FailurePattern(
        BAD_ARGS,
        r"ValidationError: \d+ validation errors? for",
        "vLLM rejected a configuration value at startup: see the quoted line",
    ),
    # "ValueError: gpu_memory_utilization must be in (0, 1], got 1.5", "Unsupported KV cache dtype 'x'"
    FailurePattern(
        BAD_ARGS,
        r"^ValueError: .*(\bmust be (at least|at most|in|one of|greater|less)\b|Unsupported KV cache dtype)",
        "a configuration value is out of range: see the quoted line",
    ),
    # "ValueError: speculative method 'x' is not supported for this model"
    FailurePattern(
        INIT_FAILED,
        r"is not supported for this model",
        "a component of the candidate cannot be built for this model",
    ),
    # "RuntimeError: Engine core initialization failed. See root cause above." (no known root cause)
    FailurePattern(
        INIT_FAILED,
        r"Engine core initialization failed",
        "the engine could not start; the root cause is earlier in the log",
    ),
)

CRASHED_HINT = "the server exited before it became ready; read the evidence and the full log"
TIMEOUT_HINT = "the server did not become ready in time: raise host.startup_timeout_s or read the log"


def clean_lines(text: str) -> list[str]:
    """Log text as lines without ANSI colour codes or trailing whitespace."""
    return [_ANSI.sub("", line).rstrip() for line in text.splitlines()]


def significant(line: str) -> str | None:
    """The message of a log line that may classify a failure, without vLLM's logger prefix; None for noise."""
    prefix = _PREFIX.match(line)
    level = prefix.group("level") if prefix else None
    if level in _QUIET_LEVELS:
        return None
    message = line[prefix.end() :] if prefix else line
    if not message.strip() or _NOISE.match(message):
        return None
    return message.strip()


def classify(
    exit_code: int | None,
    lines: Sequence[str],
    patterns: Sequence[FailurePattern] = DEFAULT_PATTERNS,
    *,
    timed_out: bool = False,
) -> Classification:
    """Classify a failed startup from its exit code and log lines (pure).

    The first pattern (in table order) that matches any non-noise line wins; the first matching line is
    quoted. A timeout is ``timeout`` whatever the log says (a matching line is still quoted); a process that
    exited without a matching line is ``crashed``.
    """
    evidence = list(lines[-EVIDENCE_LINES:])
    candidates = [message for line in lines if (message := significant(line)) is not None]
    for pattern in patterns:
        for message in candidates:
            if pattern.matches(message, exit_code):
                if timed_out:
                    return Classification(TIMEOUT, TIMEOUT_HINT, message, evidence)
                return Classification(pattern.kind, pattern.hint, message, evidence)
    if timed_out:
        return Classification(TIMEOUT, TIMEOUT_HINT, None, evidence)
    return Classification(CRASHED, CRASHED_HINT, None, evidence)


def startup_failure(
    candidate: str, log_path: Path, verdict: Classification, exit_code: int | None, elapsed_s: float
) -> StartupFailure:
    """The error a failed startup raises: what happened, its class, the line that decided it, the log."""
    if verdict.kind == TIMEOUT:
        what = f"did not become ready within {elapsed_s:.0f} s (still running; now torn down)"
    else:
        what = f"exited with code {exit_code} after {elapsed_s:.1f} s before becoming ready"
    quoted = f": {verdict.matched_line}" if verdict.matched_line else ""
    return StartupFailure(
        f"{candidate} {what} [{verdict.kind}{quoted}] (log: {log_path})",
        kind=verdict.kind,
        exit_code=exit_code,
        matched_line=verdict.matched_line,
        evidence=verdict.evidence,
        hint=verdict.hint,
        elapsed_s=elapsed_s,
    )


def startup_record(outcome: float | StartupFailure) -> StartupRecord:
    """The startup record of a launch: seconds to ready, or the classified failure (for run.json)."""
    if isinstance(outcome, StartupFailure):
        return StartupRecord(
            ok=False,
            kind=outcome.kind,
            exit_code=outcome.process_exit_code,
            matched_line=outcome.matched_line,
            evidence=outcome.evidence,
            time_to_ready_s=None,
        )
    return StartupRecord(ok=True, time_to_ready_s=round(outcome, 3))


#: What a process killed by a signal most likely met (a death under load names it; vLLM's own line gives
#: only the negative exit code).
SIGNAL_MEANINGS: Final[Mapping[int, str]] = {
    signal.SIGILL: "an instruction this CPU or OS refused; on an AMX CPU see docs/launcher.md",
    signal.SIGSEGV: "a crash in native code",
    signal.SIGBUS: "a bad memory access in native code",
    signal.SIGABRT: "an abort in native code",
    signal.SIGKILL: "killed from outside: the kernel's OOM killer, or a kill -9",
    signal.SIGFPE: "an arithmetic fault in native code",
}

_CHILD_DIED = re.compile(r"(?P<who>[\w.-]+) died unexpectedly \(exit code: (?P<code>-?\d+)\)")


def signal_name(exit_code: int) -> str | None:
    """``-4`` -> ``"SIGILL (an instruction this CPU or OS refused; ...)"``; None for a normal exit code."""
    if exit_code >= 0:
        return None
    try:
        sig = signal.Signals(-exit_code)
    except ValueError:
        return f"signal {-exit_code}"
    meaning = SIGNAL_MEANINGS.get(sig)
    return f"{sig.name} ({meaning})" if meaning else sig.name


def death_cause(exit_code: int | None, lines: Sequence[str]) -> str | None:
    """Why a server that was serving died, as far as its exit code and log say (pure); None when they say
    nothing more than the exit code. vLLM's API server often exits 0 after its engine died: the line
    ``Worker proc VllmWorker-0 died unexpectedly (exit code: -4)`` is then the cause (SIGILL)."""
    said = []
    if exit_code is not None and (name := signal_name(exit_code)) is not None:
        said.append(f"the server was killed by {name}")
    for line in reversed(lines):
        if (found := _CHILD_DIED.search(line)) is not None:
            name = signal_name(int(found.group("code")))
            said.append(
                f"its log: {found.group('who')} died by {name}" if name else f"its log: {found.group(0)}"
            )
            break
    return "; ".join(said) or None


def read_log_tail(path: Path, max_bytes: int = 512 * 1024) -> list[str]:
    """The last ``max_bytes`` of a log file as clean lines (an unreadable file gives no lines)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    lines = clean_lines(data.decode("utf-8", errors="replace"))
    if size > max_bytes and lines:
        lines = lines[1:]  # the first line is cut
    return lines


def parse_patterns(
    items: Iterable[Mapping[str, Any]], *, source: str = "<patterns>"
) -> tuple[FailurePattern, ...]:
    """User patterns from config data (``kind``, ``regex``, ``hint``, optional ``exit_codes``).

    Put them before :data:`DEFAULT_PATTERNS` so they win. Bad rows raise ConfigError naming the row.
    """
    out: list[FailurePattern] = []
    problems: list[ConfigProblem] = []
    for index, item in enumerate(items):
        where = f"[{index}]"
        try:
            codes = item.get("exit_codes")
            out.append(
                FailurePattern(
                    kind=str(item["kind"]),
                    regex=str(item["regex"]),
                    hint=str(item.get("hint", "")),
                    exit_codes=frozenset(int(c) for c in codes) if codes is not None else None,
                )
            )
        except KeyError as exc:
            problems.append(ConfigProblem(source, f"{where}.{exc.args[0]}", None, "required"))
        except re.error as exc:
            problems.append(
                ConfigProblem(source, f"{where}.regex", item.get("regex"), f"a valid regex ({exc})")
            )
        except (ValueError, TypeError) as exc:
            problems.append(ConfigProblem(source, where, dict(item), str(exc)))
    if problems:
        raise ConfigError(problems, hint="fix the failure patterns named above")
    return tuple(out)
