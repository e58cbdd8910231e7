"""/metrics of the simulator parses as Prometheus text with vLLM's names and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from launch.sim.engine import Host
from launch.sim.metrics import render_metrics
from launch.sim.model import check_startup
from tests.unit.sim_fixtures import BASE as CFG
from tests.unit.sim_fixtures import PROFILE


def test_metrics_after_traffic() -> None:
    memory = check_startup(PROFILE, CFG)
    host = Host(PROFILE, CFG, memory)
    for i in range(6):
        host.add(
            host.new_request(
                f"r{i}",
                prompt_tokens=100,
                digest=str(i),
                max_tokens=50,
                min_tokens=50,
                ignore_eos=True,
                arrival=0.0,
            )
        )
    while (end := host.next_end() or host.next_start()) is not None:
        host.advance(end)
    text = render_metrics(host, "served", memory)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples
    }

    def total(name: str, **labels: str) -> float:
        return sum(
            v
            for (n, ls), v in samples.items()
            if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
        )

    assert total("vllm:prompt_tokens_total") == 600
    assert total("vllm:generation_tokens_total") == 300
    assert total("vllm:request_success_total", finished_reason="length") == 6
    assert total("vllm:num_preemptions_total") == 0
    assert total("vllm:time_to_first_token_seconds_count") == 6
    assert total("vllm:e2e_request_latency_seconds_count") == 6
    assert total("vllm:num_requests_running") == 0
    assert total("vllm:spec_decode_num_drafts_total") > 0
    assert {dict(ls)["engine"] for (n, ls) in samples if n == "vllm:num_requests_waiting"} == {
        "0",
        "1",
        "2",
        "3",
    }
    assert all(dict(ls)["model_name"] == "served" for (n, ls) in samples if n.startswith("vllm:num_"))
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["gpu_memory_utilization"] == "0.81"
    assert info["cache_dtype"] == "fp8"
    assert int(info["num_gpu_blocks"]) == memory.num_gpu_blocks
    assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    assert families["vllm:num_preemptions"].type == "counter"
