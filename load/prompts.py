"""Prompts as the server counts them: ``POST /tokenize`` and ``GET /v1/models``, the planner's one I/O step.

Pipeline position: :func:`prepare_plan` is the first thing :func:`load.runner.run_profile` awaits. It
draws the profile's requests (:func:`load.workload.plan_requests`, pure), builds each prompt with
:class:`load.workload.PromptBuilder` against the server's own token count (chat template included), reads
``max_model_len``, and hands everything to :func:`load.plan.make_plan` (pure). The httpx client is the seam:
tests pass one over ``httpx.MockTransport``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import httpx

from contracts.schema import WorkloadConfig
from load.plan import Plan, make_plan
from load.sources import SYSTEM_PROMPT_BASE, plan_source
from load.workload import (
    BuiltPrompt,
    PlannedRequest,
    PromptBuilder,
    gather_limited,
    load_prompts,
    messages_for,
    tokenizer_fingerprint,
)

_PROBE_TEXT = "The quick brown fox jumps over the lazy dog."


async def prepare_plan(
    aux: httpx.AsyncClient,
    workload: WorkloadConfig,
    *,
    served_model: str,
    scale: float,
    run_salt: str,
    prompts_dir: Path,
) -> Plan:
    """The run's plan: requests drawn from the seed, prompts calibrated with the server, bodies built."""
    planned = plan_source(
        workload, scale=scale, prompts=load_prompts(workload, prompts_dir), prompts_dir=prompts_dir
    )
    notes: list[str] = []
    max_model_len = await read_max_model_len(aux, served_model, notes)
    counter = TokenCounter(aux, served_model)
    builder = PromptBuilder(
        count=counter.count, seed=workload.seed, tokenizer_id=await counter.probe(_PROBE_TEXT)
    )
    planned = await _answer_lengths(planned, counter)
    systems = await _system_prompts(planned, workload, builder)
    prefix = workload.shared_prefix.prefix_tokens if workload.shared_prefix is not None else 0

    async def build(p: PlannedRequest) -> BuiltPrompt:
        system = systems.get(p.system_prompt_index) if p.system_prompt_index is not None else None
        if p.fixed_prompt is not None:
            counted = await counter.count(p.fixed_prompt, history=p.history)
            return BuiltPrompt(p.fixed_prompt, counted)
        seed_index = p.prompt_seed_index if p.prompt_seed_index is not None else p.index
        user = await builder.build(seed_index, max(1, p.target_prompt_tokens - prefix))
        return BuiltPrompt(user.text, user.counted, system=system)

    prompts = await gather_limited([build(p) for p in planned])
    return make_plan(
        workload,
        planned,
        prompts,
        served_model=served_model,
        run_salt=run_salt,
        max_model_len=max_model_len,
        notes=[*notes, *builder.notes, *counter.notes],
    )


async def _system_prompts(
    planned: list[PlannedRequest], workload: WorkloadConfig, builder: PromptBuilder
) -> dict[int, str]:
    """The shared system prompts the plan uses, built once each to ``prefix_tokens``."""
    if workload.shared_prefix is None:
        return {}
    wanted = sorted({p.system_prompt_index for p in planned if p.system_prompt_index is not None})
    target = workload.shared_prefix.prefix_tokens
    built = [await builder.build(SYSTEM_PROMPT_BASE - k, target) for k in wanted]
    return {k: b.text for k, b in zip(wanted, built, strict=True)}


async def _answer_lengths(planned: list[PlannedRequest], counter: TokenCounter) -> list[PlannedRequest]:
    """ShareGPT turns: max_tokens is the file answer's length as the server counts it (template removed)."""
    if not any(p.output_text is not None for p in planned):
        return planned
    overhead = await counter.count("") or 0
    out = []
    for p in planned:
        if p.output_text is None:
            out.append(p)
            continue
        counted = await counter.count(p.output_text)
        tokens = (counted - overhead) if counted is not None else round(len(p.output_text.split()) * 1.3)
        out.append(replace(p, max_tokens=max(1, tokens)))
    return out


async def read_max_model_len(aux: httpx.AsyncClient, served_model: str, notes: list[str]) -> int | None:
    """``max_model_len`` of ``served_model`` from ``/v1/models``; None (and a note) when unknown."""
    try:
        response = await aux.get("/v1/models")
        response.raise_for_status()
        models = response.json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        notes.append(f"/v1/models unreadable ({type(exc).__name__}): max_tokens not checked")
        return None
    for model in models:
        if isinstance(model, dict) and model.get("id") == served_model:
            value = model.get("max_model_len")
            return value if isinstance(value, int) else None
    notes.append(f"/v1/models does not list {served_model!r}")
    return None


class TokenCounter:
    """``POST /tokenize`` with the chat template applied (falls back to the bare prompt form)."""

    def __init__(self, aux: httpx.AsyncClient, model: str) -> None:
        self.aux = aux
        self.model = model
        self.form: Literal["messages", "prompt", "none"] = "messages"
        self.notes: list[str] = []

    async def _call(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        try:
            response = await self.aux.post("/tokenize", json=payload)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) and isinstance(data.get("count"), int) else None

    async def _tokenize(self, text: str, history: tuple[tuple[str, str], ...] = ()) -> dict[str, Any] | None:
        if self.form == "messages":
            messages = messages_for(text, history=history)
            data = await self._call(
                {"model": self.model, "messages": messages, "add_generation_prompt": True}
            )
            if data is not None:
                return data
            self.form = "prompt"
            self.notes.append("/tokenize has no chat form here: the chat template is not in the count")
        if self.form == "prompt":
            data = await self._call({"model": self.model, "prompt": text})
            if data is not None:
                return data
            self.form = "none"
        return None

    async def probe(self, text: str) -> str:
        """The tokenizer's identity (prompt caches are shared by it); empty when it cannot count."""
        data = await self._tokenize(text)
        if data is None:
            return ""
        tokens = data.get("tokens")
        ids = tokens if isinstance(tokens, list) else [data["count"]]
        return f"{self.model}:{self.form}:{tokenizer_fingerprint(ids)}"

    async def count(self, text: str, history: tuple[tuple[str, str], ...] = ()) -> int | None:
        """Tokens of ``text`` as one user message after ``history`` (chat template included)."""
        data = await self._tokenize(text, history)
        return None if data is None else int(data["count"])
