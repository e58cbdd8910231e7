"""Builders the load runner's unit tests share: a small workload profile and a request record."""

from __future__ import annotations

from typing import Any

from contracts.results import RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig


def workload(**kw: Any) -> WorkloadConfig:
    """Ten measured requests after two warmup ones, 64 prompt and 16 output tokens; ``kw`` overrides."""
    base: dict[str, Any] = dict(
        name="t",
        num_requests=10,
        warmup_requests=2,
        seed=3,
        prompt_tokens=LengthConfig(kind="fixed", mean=64),
        output_tokens=LengthConfig(kind="fixed", mean=16),
    )
    base.update(kw)
    return WorkloadConfig(**base)


def record(index: int, **kw: Any) -> RequestRecord:
    """A completed measured request sent at ``index`` s: four chunks, 100 prompt and 10 output tokens."""
    base: dict[str, Any] = dict(
        index=index,
        warmup=False,
        target_prompt_tokens=100,
        target_output_tokens=10,
        scheduled_s=float(index),
        sent_s=float(index),
        ttft_s=0.1,
        first_visible_s=0.5,
        end_s=1.0,
        chunk_offsets_s=[0.1, 0.3, 0.5, 1.0],
        prompt_tokens=100,
        completion_tokens=10,
        finish_reason="length",
        http_status=200,
    )
    base.update(kw)
    return RequestRecord(**base)
