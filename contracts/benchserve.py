"""``bench_serve.json``: one profile run in ``vllm bench serve``'s result shape, for tools built on it.

Pipeline position: a second view of what the load runner measured, next to ``summary.json``. It is a pure
function of the run's records and summary (:func:`bench_serve_result`), written by the load runner's one
writer (:func:`load.write.write_results`) and rebuilt from the same two files at any time
(:func:`bench_serve_from_files`), so a sweep directory always holds both views of the same requests.

Field names and meanings follow ``vllm/benchmarks/serve.py`` (``benchmark()``'s ``result`` dict and the
settings ``main`` adds to it), checked at vLLM commit ``009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1``:
``completed``/``failed`` and every token total over the successful requests; throughputs over
``duration``; ``mean_/median_/std_/p<q>_<metric>_ms`` in milliseconds with numpy's default (linear)
percentile and population std; TPOT = (latency - TTFT) / (output tokens - 1) for requests with two or
more tokens; ITL = every gap between consecutive streamed chunks; E2EL = request latency. The run is
written as if by ``--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99``. Where vLLM
writes 0 for an empty sample this writes ``null`` (nothing was measured). gauntlet's own identity
(candidate, profile, repeat, fingerprint, host, time scale) rides along as vLLM's ``--metadata KEY=VALUE``
keys do: top-level strings and numbers. Durations are host seconds (simulated seconds on the simulator,
see ``time_scale``). Once the sweep has read the run's energy (``run.json``), gauntlet's energy and cost
keys are added (:func:`energy_fields`: ``energy_method``, ``energy_joules``, ``output_tokens_per_joule``,
``avg_gpu_power_w``, ``usd_per_mtok``; null where not measured or not priced). Not written:
``max_output_tokens_per_s`` (it needs per-token times; a streamed chunk may carry several tokens) and the
per-request lists ``--save-detailed`` adds (``records.jsonl`` has them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from contracts.cost import run_usd_per_mtok
from contracts.files import atomic_write_text, read_jsonl, read_model
from contracts.layout import RepeatPaths
from contracts.results import Pricing, ProfileSummary, RequestRecord, RunEnergy

#: The vLLM source the field names were checked against.
VLLM_CHECKED_COMMIT = "009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1"
#: ``--metric-percentiles``: each becomes ``p<q>_<metric>_ms``.
PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
#: ``--percentile-metrics``.
METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
#: vLLM's ``endpoint_type``/``backend`` for the OpenAI chat API the load runner speaks.
ENDPOINT_TYPE = "openai-chat"


def _stat_fields(metric: str, values_s: Sequence[float]) -> dict[str, float | None]:
    """``mean_/median_/std_/p<q>_<metric>_ms`` of a sample in seconds (None for an empty sample)."""
    ms = sorted(v * 1000.0 for v in values_s)
    out: dict[str, float | None] = {}
    if ms:
        mean = math.fsum(ms) / len(ms)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in ms) / len(ms))
    out[f"mean_{metric}_ms"] = mean if ms else None
    out[f"median_{metric}_ms"] = _percentile(ms, 50.0)
    out[f"std_{metric}_ms"] = std if ms else None
    for q in PERCENTILES:
        word = str(int(q)) if int(q) == q else str(q)
        out[f"p{word}_{metric}_ms"] = _percentile(ms, q)
    return out


def _percentile(ordered: Sequence[float], q: float) -> float | None:
    """numpy's default (linear) percentile of an already sorted sample."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _peak_concurrency(ok: Sequence[RequestRecord]) -> int:
    """Most successful requests in flight at once, over half-open [sent, sent + latency) intervals."""
    events = sorted(
        [(r.sent_s, 1) for r in ok] + [(r.sent_s + (r.end_s or 0.0), -1) for r in ok],
        key=lambda e: (e[0], e[1]),
    )
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def _date(started_at: str) -> str:
    """vLLM's ``date`` (``%Y%m%d-%H%M%S``) from the summary's ISO start time (UTC)."""
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        return started_at


def bench_serve_result(summary: ProfileSummary, records: Sequence[RequestRecord]) -> dict[str, object]:
    """The run as ``vllm bench serve --save-result`` would write it (warmup records are left out)::

    result = bench_serve_result(summary, records)
    result["completed"], result["output_throughput"], result["p99_ttft_ms"]
    """
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    duration = summary.duration_s
    total_input = sum(r.prompt_tokens or 0 for r in ok)
    total_output = sum(r.completion_tokens or 0 for r in ok)

    def per_s(amount: float) -> float:
        return amount / duration if duration > 0 else 0.0

    tpots = [
        ((r.end_s or 0.0) - (r.ttft_s or 0.0)) / (r.completion_tokens - 1)
        for r in ok
        if r.completion_tokens is not None and r.completion_tokens > 1 and r.ttft_s is not None
    ]
    itls = [b - a for r in ok for a, b in zip(r.chunk_offsets_s, r.chunk_offsets_s[1:], strict=False)]
    settings = summary.settings
    workload = settings.workload if settings is not None else None
    open_loop = workload is not None and workload.mode == "open"
    result: dict[str, object] = {
        # main()'s settings
        "date": _date(summary.started_at),
        "endpoint_type": ENDPOINT_TYPE,
        "backend": ENDPOINT_TYPE,
        "label": summary.candidate,
        "model_id": settings.served_model if settings is not None else None,
        "tokenizer_id": None,  # the server's tokenizer (usage counts), none on the client
        "num_prompts": summary.num_requests,
        "request_rate": (workload.rate if open_loop and workload and workload.rate else "inf"),
        "burstiness": 1.0,  # open loop: Poisson arrivals
        "max_concurrency": workload.concurrency if workload is not None and not open_loop else None,
        # --metadata: gauntlet's identity of the run
        "candidate": summary.candidate,
        "profile": summary.profile,
        "repeat": summary.repeat,
        "fingerprint": summary.fingerprint,
        "host": summary.host,
        "server_backend": summary.backend,
        "time_scale": summary.time_scale,
        "load_level": summary.load_level,
        "started_at": summary.started_at,
        # benchmark()'s result
        "duration": duration,
        "completed": len(ok),
        "failed": len(measured) - len(ok),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": per_s(len(ok)),
        "request_goodput": summary.slo.goodput_rps if summary.slo is not None else None,
        "output_throughput": per_s(total_output),
        "total_token_throughput": per_s(total_input + total_output),
        "max_concurrent_requests": _peak_concurrency(ok),
        **_stat_fields("ttft", [r.ttft_s for r in ok if r.ttft_s is not None]),
        **_stat_fields("tpot", tpots),
        **_stat_fields("itl", itls),
        **_stat_fields("e2el", [r.end_s for r in ok if r.end_s is not None]),
    }
    spec = summary.server.speculative if summary.server is not None else None
    if spec is not None and spec.acceptance_rate is not None:
        result["spec_decode_acceptance_rate"] = spec.acceptance_rate * 100  # vLLM: a percentage
        result["spec_decode_acceptance_length"] = spec.mean_accepted_length
        result["spec_decode_num_drafts"] = int(spec.drafts)
        result["spec_decode_draft_tokens"] = int(spec.draft_tokens)
        result["spec_decode_accepted_tokens"] = int(spec.accepted_tokens)
    return result


def bench_serve_from_files(run_dir: Path) -> dict[str, object]:
    """Rebuild a run's ``bench_serve.json`` content from its ``summary.json`` and records."""
    summary = read_model(RepeatPaths(run_dir).summary, ProfileSummary)
    return bench_serve_result(summary, read_jsonl(run_dir / summary.records_file, RequestRecord))


def energy_fields(
    energy: RunEnergy, pricing: Pricing | None, output_tps: float, input_tps: float = 0.0
) -> dict[str, object]:
    """gauntlet's energy and cost keys of a run (top level, as ``--metadata`` keys ride): None where the
    energy was not measured or the host has no price; ``energy_method`` ``simulated`` on the simulator;
    ``usd_per_mtok`` the output tokens' price (input tokens priced apart where the host says so)."""
    watts = energy.watts_per_gpu
    return {
        "energy_method": energy.method,
        "energy_joules": energy.joules,
        "output_tokens_per_joule": energy.output_tokens_per_joule,
        "avg_gpu_power_w": math.fsum(watts) / len(watts) if watts else None,
        "usd_per_mtok": (
            run_usd_per_mtok(pricing, output_tps, energy, input_tps=input_tps)
            if pricing is not None
            else None
        ),
    }


def add_energy(run_dir: Path, energy: RunEnergy, pricing: Pricing | None) -> None:
    """Add a run's energy and cost keys (:func:`energy_fields`) to its ``bench_serve.json``, when the load
    runner wrote one; the file is replaced atomically."""
    paths = RepeatPaths(run_dir)
    if not paths.bench_serve.exists() or not paths.summary.exists():
        return
    result = json.loads(paths.bench_serve.read_text())
    summary = read_model(paths.summary, ProfileSummary)
    result.update(energy_fields(energy, pricing, summary.output_tps, summary.prompt_tps))
    atomic_write_text(paths.bench_serve, json.dumps(result, indent=2, allow_nan=False) + "\n")
