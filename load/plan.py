"""The plan of one profile run: every request ready to send, with its body, cache salt and arrival (pure).

Pipeline position: the first step of :func:`load.runner.run_profile`. :func:`load.workload.plan_requests`
draws the profile's lengths and arrivals from its seed; :mod:`load.prompts` asks the server to count the
prompts (the one step with I/O); :func:`make_plan` here turns both into the :class:`Plan` the dispatcher
sends: one :class:`Request` per planned request, its JSON body already encoded and its typed values (the
target prompt tokens the records report, the ``max_tokens`` after clipping) carried alongside, so nothing
downstream parses a body back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contracts.labelled import is_labelled
from contracts.schema import WorkloadConfig
from load.sources import shares_prefix
from load.workload import BuiltPrompt, PlannedRequest, make_salt, messages_for

#: Seeds of sampled requests: ``workload.seed * SEED_STRIDE + index`` (distinct per request and profile).
SEED_STRIDE = 100_003


@dataclass(frozen=True)
class Request:
    """One request of the run as it goes on the wire, and the values its record reports."""

    index: int  # position in the profile (warmup first)
    warmup: bool
    target_prompt_tokens: int  # the server's count for a fixed prompt, else the planned target
    max_tokens: int  # after clipping to max_model_len
    arrival_s: float | None  # open loop: host seconds after its phase starts; closed loop: None
    cache_salt: str
    body: bytes  # the JSON of POST /v1/chat/completions
    keep_text: bool = False  # its record keeps the visible answer's text (a labelled set's item)


@dataclass(frozen=True)
class Plan:
    """Every request of one run, warmup first, and what planning had to say about them."""

    requests: tuple[Request, ...]
    notes: tuple[str, ...] = ()

    @property
    def warmup(self) -> list[Request]:
        return [r for r in self.requests if r.warmup]

    @property
    def measured(self) -> list[Request]:
        return [r for r in self.requests if not r.warmup]


def request_body(
    workload: WorkloadConfig,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    cache_salt: str,
    index: int,
    system: str | None = None,
    history: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """The streaming chat request: usage in the stream, the profile's sampling, its salt; a shared system
    prompt and earlier exchanges before the prompt for data workloads (:mod:`load.sources`)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages_for(prompt, system=system, history=history),
        "max_tokens": max_tokens,
        "temperature": workload.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_salt": cache_salt,
    }
    if workload.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    if workload.temperature > 0:
        body["seed"] = workload.seed * SEED_STRIDE + index
    return json.dumps(body, separators=(",", ":")).encode()


def make_plan(
    workload: WorkloadConfig,
    planned: Sequence[PlannedRequest],
    prompts: Sequence[BuiltPrompt],
    *,
    served_model: str,
    run_salt: str,
    max_model_len: int | None,
    notes: Sequence[str] = (),
) -> Plan:
    """Bodies for ``planned`` with their ``prompts`` (same order); ``max_tokens`` clipped to fit the model.

    A fixed prompt's target is the server's count of it (0 when the server cannot count). ``notes`` are
    carried into the plan ahead of the clipping note.
    """
    requests: list[Request] = []
    clipped = 0
    labelled = is_labelled(workload.prompts_file)
    for p, prompt in zip(planned, prompts, strict=True):
        target = p.target_prompt_tokens if p.fixed_prompt is None else (prompt.counted or 0)
        max_tokens = p.max_tokens
        if max_model_len is not None:
            room = max_model_len - (prompt.counted or target)
            if max_tokens > room:
                max_tokens = max(1, room)
                clipped += 1
        # Shared prefixes and conversations share the run's salt: their cache hits are the point.
        salt = run_salt if shares_prefix(workload) else make_salt(run_salt, p.index)
        body = request_body(
            workload,
            model=served_model,
            prompt=prompt.text,
            max_tokens=max_tokens,
            cache_salt=salt,
            index=p.index,
            system=prompt.system,
            history=p.history,
        )
        requests.append(
            Request(
                index=p.index,
                warmup=p.warmup,
                target_prompt_tokens=target,
                max_tokens=max_tokens,
                arrival_s=p.arrival_s,
                cache_salt=salt,
                body=body,
                keep_text=labelled,
            )
        )
    all_notes = list(notes)
    if clipped:
        all_notes.append(f"max_tokens of {clipped} requests clipped to fit max_model_len {max_model_len}")
    return Plan(requests=tuple(requests), notes=tuple(all_notes))
