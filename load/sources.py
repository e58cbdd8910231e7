"""Workload sources: generated requests, shared system prompts, a JSONL trace, ShareGPT conversations.

Pipeline position: the planner's first step. :func:`plan_source` turns a profile into planned requests
(pure, deterministic): the generated profile (:func:`load.workload.plan_requests`) unless the profile
has ``shared_prefix`` (N system prompts x M user messages, one cache_salt per run so the prefix cache
works) or ``data`` (a trace replayed at its arrival offsets, or ShareGPT conversations, multi-turn
optional). :mod:`load.prompts` then builds and counts the prompts with the server's ``/tokenize``. The
formats (docs/capacity.md, "Workloads from data")::

    {"arrival_s": 0.0, "prompt_tokens": 512, "output_tokens": 128}
    {"arrival_s": 0.4, "prompt": "Summarize ...", "output_tokens": 64, "conversation_id": "c1"}

    [{"id": "c1", "conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contracts.errors import ConfigProblem, HarnessError
from contracts.schema import DataSourceConfig, WorkloadConfig
from load.workload import PlannedRequest, plan_requests, scaled_counts

#: Index spaces of generated texts that are not a request's own (a request's text is seeded by its index).
SYSTEM_PROMPT_BASE = -1_000  # system prompt k: seed index SYSTEM_PROMPT_BASE - k
USER_PROMPT_BASE = 10_000_000  # shared-prefix user message c: seed index USER_PROMPT_BASE + c
#: Chat roles of ShareGPT's "from" field.
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
SOURCE_KINDS = ("trace", "sharegpt")


def shares_prefix(workload: WorkloadConfig) -> bool:
    """Requests of one run share prefix-cache blocks by design (one cache_salt for the run)."""
    return workload.shared_prefix is not None or workload.data is not None


def replays_offsets(workload: WorkloadConfig) -> bool:
    """A trace replayed at its arrival offsets: open loop whatever ``mode`` says."""
    return workload.data is not None and workload.data.kind == "trace" and workload.data.speed > 0


def plan_source(
    workload: WorkloadConfig, *, scale: float, prompts: list[str] | None, prompts_dir: Path
) -> list[PlannedRequest]:
    """Every request of the profile, warmup first, from its source."""
    if workload.data is not None:
        path = data_path(workload.data, prompts_dir)
        if workload.data.kind == "trace":
            return plan_trace(workload, read_trace(path), scale=scale)
        return plan_sharegpt(workload, read_sharegpt(path, workload.data.max_turns), scale=scale)
    planned = plan_requests(workload, scale=scale, prompts=prompts)
    if workload.shared_prefix is not None:
        return plan_shared_prefix(workload, planned)
    return planned


def data_path(data: DataSourceConfig, prompts_dir: Path) -> Path:
    path = Path(data.file)
    return path if path.is_absolute() else prompts_dir / path


# ------------------------------------------------------------------------------------- shared prefix


def plan_shared_prefix(workload: WorkloadConfig, planned: Sequence[PlannedRequest]) -> list[PlannedRequest]:
    """Request i: system prompt i mod N, user message (i // N) mod M (the same text whenever it recurs)."""
    shared = workload.shared_prefix
    assert shared is not None
    n, m = shared.system_prompts, shared.users
    out = []
    for p in planned:
        k, u = p.index % n, (p.index // n) % m
        out.append(
            replace(
                p,
                system_prompt_index=k,
                prompt_seed_index=USER_PROMPT_BASE + k * m + u,
                target_prompt_tokens=shared.prefix_tokens + p.target_prompt_tokens,
            )
        )
    return out


# --------------------------------------------------------------------------------------------- trace


@dataclass(frozen=True)
class TraceRow:
    """One line of a JSONL trace."""

    arrival_s: float  # offset from the trace's start, seconds
    output_tokens: int
    prompt: str | None = None  # the prompt text, or
    prompt_tokens: int | None = None  # its length in tokens (generated text of that length)
    conversation_id: str | None = None
    line: int = 0  # the line of the file it came from (1-based; 0: unknown)


def _field(raw: dict[str, Any], key: str, kind: type, where: str, *, required: bool = True) -> Any:
    value = raw.get(key)
    if value is None and not required:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        want = {int: "an integer", float: "a number", str: "a string"}[kind]
        raise HarnessError(
            f"{where}: {key} = {value!r}: expected {want}", hint="see docs/capacity.md for the format"
        )
    return value


def parse_trace(text: str, where: str = "trace") -> list[TraceRow]:
    """Rows of a JSONL trace, in arrival order; an invalid line is an error naming it, and so is an
    offset smaller than the line's before (a trace is written in arrival order: a decreasing offset is a
    broken or concatenated file, not an order to guess)."""
    rows: list[TraceRow] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{where}:{number}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise HarnessError(f"{at}: not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise HarnessError(f"{at}: expected a JSON object per line")
        prompt = _field(raw, "prompt", str, at, required=False)
        tokens = _field(raw, "prompt_tokens", int, at, required=False)
        if (prompt is None) == (tokens is None):
            raise HarnessError(f"{at}: give exactly one of prompt (text) and prompt_tokens (a length)")
        row = TraceRow(
            arrival_s=_field(raw, "arrival_s", float, at),
            output_tokens=_field(raw, "output_tokens", int, at),
            prompt=prompt,
            prompt_tokens=tokens,
            conversation_id=_field(raw, "conversation_id", str, at, required=False),
            line=number,
        )
        if not math.isfinite(row.arrival_s):  # json reads NaN and Infinity: no schedule can hold them
            raise HarnessError(f"{at}: arrival_s = {row.arrival_s}: expected a finite number of seconds >= 0")
        if row.arrival_s < 0 or row.output_tokens < 1 or (tokens is not None and tokens < 1):
            raise HarnessError(f"{at}: arrival_s must be >= 0 and token counts >= 1 ({raw})")
        if rows and row.arrival_s < rows[-1].arrival_s:
            raise HarnessError(
                f"{at}: arrival_s = {row.arrival_s:g} is before line {rows[-1].line}'s "
                f"{rows[-1].arrival_s:g}: offsets must not decrease (a trace is in arrival order)"
            )
        rows.append(row)
    if not rows:
        raise HarnessError(f"{where}: no requests in the trace")
    return rows


def read_trace(path: Path) -> list[TraceRow]:
    try:
        return parse_trace(path.read_text(), str(path))
    except OSError as exc:
        raise HarnessError(f"cannot read trace {path}: {exc}") from exc


def plan_trace(workload: WorkloadConfig, rows: Sequence[TraceRow], *, scale: float) -> list[PlannedRequest]:
    """The trace's first ``warmup_requests`` rows warm up, the next ``num_requests`` are measured
    (``run.scale`` applies; the trace is cycled, its offsets continued, if it is shorter). Arrivals are
    the rows' offsets divided by ``speed``, from each phase's start; speed 0 keeps the profile's mode."""
    assert workload.data is not None
    measured, warmup = scaled_counts(workload, scale)
    speed = workload.data.speed
    span = rows[-1].arrival_s + (rows[-1].arrival_s - rows[0].arrival_s) / max(len(rows) - 1, 1)
    out: list[PlannedRequest] = []
    for phase_start, count in ((0, warmup), (warmup, measured)):
        origin: float | None = None
        for i in range(phase_start, phase_start + count):
            row = rows[i % len(rows)]
            offset = row.arrival_s + span * (i // len(rows))
            origin = offset if origin is None else origin
            arrival = (offset - origin) / speed if speed > 0 else None
            out.append(
                PlannedRequest(
                    index=i,
                    warmup=i < warmup,
                    target_prompt_tokens=row.prompt_tokens or 0,
                    max_tokens=row.output_tokens,
                    arrival_s=arrival,
                    fixed_prompt=row.prompt,
                )
            )
    if speed <= 0 and workload.mode == "open":
        generated = plan_requests(replace(workload, data=None, num_requests=measured, warmup_requests=warmup))
        out = [replace(p, arrival_s=g.arrival_s) for p, g in zip(out, generated, strict=True)]
    return out


def too_long(
    rows: Sequence[TraceRow],
    path: Path,
    max_model_len: int | None,
    report: Callable[[str, str], None],
    *,
    most: int = 3,
) -> None:
    """Report (value, allowed) for the trace lines whose prompt plus output tokens exceed the context
    (at most ``most`` of them, then how many more): the server would refuse each one with a 400, and
    the sweep would read that as the candidate failing requests."""
    if not max_model_len:
        return
    long = [
        r for r in rows if r.prompt_tokens is not None and r.prompt_tokens + r.output_tokens > max_model_len
    ]
    for r in long[:most]:
        assert r.prompt_tokens is not None
        report(
            f"{path}:{r.line}: prompt_tokens {r.prompt_tokens} + output_tokens {r.output_tokens} = "
            f"{r.prompt_tokens + r.output_tokens}",
            f"at most service.max_model_len ({max_model_len}) tokens per request"
            + (f" ({len(long) - most} more lines beyond it)" if len(long) > most else ""),
        )


# ------------------------------------------------------------------------------------------ sharegpt


@dataclass(frozen=True)
class Turn:
    """One question of a conversation, the exchanges before it, and the file's answer to it."""

    conversation: str
    history: tuple[tuple[str, str], ...]  # (role, content) of the previous exchanges
    question: str
    answer: str


def parse_sharegpt(data: Any, *, max_turns: int, where: str = "sharegpt") -> list[Turn]:
    """Turns of every conversation (up to ``max_turns`` each), conversation by conversation.

    A conversation's human/gpt messages must alternate from a human one; a trailing question without an
    answer is dropped (its output length is unknown), as are conversations that yield no turn.
    """
    if not isinstance(data, list):
        raise HarnessError(f"{where}: expected a JSON list of conversations")
    turns: list[Turn] = []
    for n, conv in enumerate(data):
        messages = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(messages, list):
            raise HarnessError(f"{where}[{n}]: expected an object with a 'conversations' list")
        cid = str(conv.get("id", n))
        history: list[tuple[str, str]] = []
        for k in range(0, min(len(messages) - 1, 2 * max_turns), 2):
            q, a = messages[k], messages[k + 1]
            roles = [SHAREGPT_ROLES.get(str(m.get("from"))) if isinstance(m, dict) else None for m in (q, a)]
            if roles != ["user", "assistant"] or not all(isinstance(m.get("value"), str) for m in (q, a)):
                raise HarnessError(f"{where}[{n}] message {k}: expected a human message then a gpt answer")
            turns.append(Turn(cid, tuple(history), q["value"], a["value"]))
            history += [("user", q["value"]), ("assistant", a["value"])]
    if not turns:
        raise HarnessError(f"{where}: no complete human/gpt exchange")
    return turns


def read_sharegpt(path: Path, max_turns: int = 1) -> list[Turn]:
    try:
        return parse_sharegpt(json.loads(path.read_text()), max_turns=max_turns, where=str(path))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read ShareGPT file {path}: {exc}") from exc


def plan_sharegpt(workload: WorkloadConfig, turns: Sequence[Turn], *, scale: float) -> list[PlannedRequest]:
    """Turns in file order, cycled; output length is the file answer's token count (counted later)."""
    measured, warmup = scaled_counts(workload, scale)
    generated = plan_requests(
        replace(workload, data=None, num_requests=measured, warmup_requests=warmup), scale=1.0
    )
    out = []
    for p in generated:
        turn = turns[p.index % len(turns)]
        out.append(replace(p, fixed_prompt=turn.question, history=turn.history, output_text=turn.answer))
    return out


def source_problems(
    name: str,
    wl: WorkloadConfig,
    prompts_dir: Path,
    where: Callable[[Sequence[str]], str],
    *,
    max_model_len: int | None = None,
) -> list[ConfigProblem]:
    """Problems of a profile's shared_prefix and data settings (checked with the rest of the config);
    ``where(path)`` names the file that set a key. With ``max_model_len`` (the service's context), a
    trace line whose ``prompt_tokens + output_tokens`` exceeds it is a problem too (the first few are
    named; a text prompt's token count is not known before the server tokenizes it)."""
    out: list[ConfigProblem] = []

    def bad(path: Sequence[str], value: object, allowed: str) -> None:
        out.append(ConfigProblem(where(path), f"workloads.{name}." + ".".join(path), value, allowed))

    shared = wl.shared_prefix
    if shared is not None:
        for key in ("system_prompts", "users", "prefix_tokens"):
            if getattr(shared, key) < 1:
                bad(["shared_prefix", key], getattr(shared, key), "an integer >= 1")
    data = wl.data
    if data is None:
        return out
    if data.kind not in SOURCE_KINDS:
        bad(["data", "kind"], data.kind, f"one of {', '.join(SOURCE_KINDS)}")
    path = data_path(data, prompts_dir)
    if not path.is_file():
        bad(["data", "file"], data.file, f"an existing file ({path} is missing)")
    elif data.kind in SOURCE_KINDS:
        # Read it now: a broken line or an empty data set is refused before anything starts, never
        # found mid-sweep and blamed on a server (issue 21).
        try:
            if data.kind == "trace":
                too_long(read_trace(path), path, max_model_len, lambda v, a: bad(["data", "file"], v, a))
            else:
                read_sharegpt(path, max(data.max_turns, 1))
        except HarnessError as exc:
            bad(["data", "file"], data.file, f"a valid {data.kind} file: {exc.message}")
    if not (math.isfinite(data.speed) and data.speed >= 0):
        bad(["data", "speed"], data.speed, ">= 0 (0 = the profile's own mode and rate)")
    if data.max_turns < 1:
        bad(["data", "max_turns"], data.max_turns, "an integer >= 1")
    if shared is not None:
        bad(["shared_prefix"], "set", "null when data is set (a profile has one source)")
    return out
