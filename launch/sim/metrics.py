"""``/metrics`` of the simulator: Prometheus text with vLLM's metric names and labels.

Pipeline position: the server renders this from the engine's per-replica :class:`EngineStats`; gauntlet's
metrics scraper reads it exactly as it reads a real vLLM's. Labels: ``model_name`` and ``engine`` (the DP
rank). Durations are simulated seconds.
"""

from __future__ import annotations

from launch.sim.engine import Histogram, Host
from launch.sim.model import MemoryPlan


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return "{" + inner + "}"


def _num(value: float) -> str:
    return repr(float(value))


class _Family:
    def __init__(self, out: list[str], name: str, kind: str, help_text: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        self.out = out
        self.name = name

    def sample(self, value: float, suffix: str = "", **labels: str) -> None:
        self.out.append(f"{self.name}{suffix}{_labels(**labels)} {_num(value)}")

    def histogram(self, hist: Histogram, **labels: str) -> None:
        for bound, count in zip(hist.buckets, hist.cumulative(), strict=True):
            self.sample(count, "_bucket", **labels, le=repr(float(bound)))
        self.sample(hist.n, "_bucket", **labels, le="+Inf")
        self.sample(hist.n, "_count", **labels)
        self.sample(hist.total, "_sum", **labels)


def render_metrics(host: Host, model_name: str, memory: MemoryPlan, first_rank: int = 0) -> str:
    """The whole /metrics body; ``engine`` labels from ``first_rank`` (a node's first DP rank when each node
    serves its own ranks, as vLLM's hybrid and external load balancing do)."""
    out: list[str] = []
    replicas = host.replicas
    cfg = host.cfg
    engines = [str(first_rank + r.index) for r in replicas]

    def family(name: str, kind: str, help_text: str) -> _Family:
        return _Family(out, name, kind, help_text)

    def from_stats(kind: str, rows: list[tuple[str, str, str]]) -> None:
        """A family per (name, help, EngineStats attribute): per engine, the counter or its histogram."""
        for name, help_text, attr in rows:
            fam = family(name, kind, help_text)
            for r, e in zip(replicas, engines, strict=True):
                value = getattr(r.stats, attr)
                if kind == "histogram":
                    fam.histogram(value, model_name=model_name, engine=e)
                else:
                    fam.sample(value, model_name=model_name, engine=e)

    running = family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
    for r, e in zip(replicas, engines, strict=True):
        running.sample(len(r.running), model_name=model_name, engine=e)
    waiting = family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
    for r, e in zip(replicas, engines, strict=True):
        waiting.sample(len(r.waiting), model_name=model_name, engine=e)
    kv = family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
    for r, e in zip(replicas, engines, strict=True):
        kv.sample(r.kv_usage(), model_name=model_name, engine=e)
    counters = [
        ("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", "preemptions"),
        ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "prompt_tokens"),
        ("vllm:generation_tokens_total", "Number of generation tokens processed.", "generation_tokens"),
    ]
    from_stats("counter", counters)
    success = family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for r, e in zip(replicas, engines, strict=True):
        for reason in ("stop", "length", "abort", "error", "repetition"):
            success.sample(
                r.stats.success.get(reason, 0), model_name=model_name, engine=e, finished_reason=reason
            )
    if cfg.speculative_method:
        spec_counters = [
            ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "spec_drafts"),
            ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "spec_draft_tokens"),
            ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "spec_accepted"),
        ]
        from_stats("counter", spec_counters)
        per_pos = family(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "counter",
            "Accepted tokens per draft position.",
        )
        for r, e in zip(replicas, engines, strict=True):
            for pos, count in enumerate(r.stats.spec_accepted_per_pos):
                per_pos.sample(count, model_name=model_name, engine=e, position=str(pos))
    histograms = [
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", "queue"),
    ]
    from_stats("histogram", histograms)
    info = family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    for e in engines:
        info.sample(
            1.0,
            block_size=str(memory.block_size),
            cache_dtype=cfg.kv_cache_dtype,
            enable_prefix_caching="False",
            gpu_memory_utilization=str(cfg.gpu_memory_utilization),
            num_cpu_blocks="None",
            num_gpu_blocks=str(memory.num_gpu_blocks),
            num_gpu_blocks_override="None",
            engine=e,
            simulated="True",
        )
    return "\n".join(out) + "\n"
