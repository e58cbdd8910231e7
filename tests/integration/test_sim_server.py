"""The simulator as the launcher sees it: a real subprocess, real HTTP, real exit codes."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from contracts.labelled import parse_labelled
from gates.answers import correct
from launch.sim.answers import answer_text
from launch.sim.client import sim_gpu_memory
from launch.spec import render_spec
from load.sse import EventParser
from orchestrator.config.compose import load

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"Starting vLLM API server 0 on http://127\.0\.0\.1:(\d+)")


def candidate_argv(candidate: str, *extra: str) -> list[str]:
    """The shipped candidate's simulator argv with port 0 (the server prints the port it got)."""
    cfg, _ = load([f"candidate={candidate}", "host=sim"])
    argv = list(render_spec(cfg.service, cfg.candidate, cfg.host).argv[3:])
    argv[argv.index("--port") + 1] = "0"
    return [sys.executable, "-m", "launch.sim", *argv, "--sim-startup-s", "0.1", *extra]


@dataclass
class Server:
    proc: subprocess.Popen[str]
    lines: queue.Queue[str | None]
    seen: list[str] = field(default_factory=list)
    base_url: str = ""

    def wait_line(self, pattern: re.Pattern[str], timeout_s: float = 60.0) -> re.Match[str] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                return None
            self.seen.append(line)
            if match := pattern.search(line):
                return match
        return None

    def wait_exit(self, timeout_s: float = 60.0) -> int:
        code = self.proc.wait(timeout=timeout_s)
        while (line := self.lines.get(timeout=5)) is not None:
            self.seen.append(line)
        return code


@contextmanager
def start(argv: list[str], *, ready: bool = True) -> Iterator[Server]:
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    pump_thread = threading.Thread(target=pump, daemon=True)
    pump_thread.start()
    server = Server(proc, lines)
    try:
        if ready:
            match = server.wait_line(READY)
            assert match, f"server never became ready: {server.seen[-10:]}"
            server.base_url = f"http://127.0.0.1:{match.group(1)}"
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        pump_thread.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def chat_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "count these seven words for me please"}],
        "max_tokens": 300,
        "min_tokens": 300,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_salt": "run-1",
    }
    body.update(overrides)
    return body


def stream_events(client: httpx.Client, body: dict[str, object]) -> list[dict[str, object] | str]:
    events: list[dict[str, object] | str] = []
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert "simulated" in response.headers["server"]
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def metric_total(text: str, name: str, **labels: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_baseline_serves_like_vllm() -> None:
    with start(candidate_argv("baseline", "--sim-time-scale", "20")) as server:
        assert server.seen[0].startswith("[sim] ")
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            assert client.get("/health").status_code == 200
            model = client.get("/v1/models").json()["data"][0]
            assert model["id"] == "deepseek-v4-flash" and model["max_model_len"] == 131072
            assert "simulated" in model["owned_by"] and "simulated" in model["root"]
            assert "sim" in client.get("/version").json()["version"]

            body = chat_body()
            counted = client.post(
                "/tokenize", json={"model": "deepseek-v4-flash", "messages": body["messages"]}
            ).json()
            events = stream_events(client, body)
            chunks = [e for e in events if isinstance(e, dict)]
            first = chunks[0]["choices"][0]  # type: ignore[index]
            assert first["delta"] == {"role": "assistant", "content": ""}
            deltas = [c["choices"][0]["delta"] for c in chunks[1:] if c["choices"]]  # type: ignore[index]
            first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
            assert deltas[0].get("reasoning")
            assert not any(d.get("reasoning") for d in deltas[first_content + 1 :])
            finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]  # type: ignore[index]
            assert finish[-1] == "length" and set(finish[:-1]) == {None}
            usage = chunks[-1]["usage"]
            assert chunks[-1]["choices"] == []
            assert usage == {
                "prompt_tokens": counted["count"],
                "completion_tokens": 300,
                "total_tokens": counted["count"] + 300,
            }  # type: ignore[comparison-overlap]
            assert events[-1] == "[DONE]"

            plain = client.post(
                "/v1/chat/completions", json=chat_body(stream=False, stream_options=None)
            ).json()
            assert plain["usage"]["completion_tokens"] == 300
            assert plain["choices"][0]["message"]["content"]

            for bad, needle in [
                ({"cache_salt": "a/b"}, "cache_salt"),
                ({"cache_salt": ""}, "cache_salt"),
                ({"stream": False}, "Stream options can only be defined when `stream=True`."),
                ({"min_tokens": 500}, "min_tokens must be less than or equal to max_tokens"),
                ({"temperature": -1}, "temperature must be non-negative"),
                ({"max_tokens": 200_000}, "maximum context length is 131072 tokens"),
            ]:
                response = client.post("/v1/chat/completions", json=chat_body(**bad))
                assert response.status_code == 400, bad
                assert needle in response.json()["error"]["message"]
            missing = client.post("/v1/chat/completions", json=chat_body(model="other"))
            assert missing.status_code == 404

            text = client.get("/metrics").text
            assert metric_total(text, "vllm:generation_tokens_total") == 600
            assert metric_total(text, "vllm:prompt_tokens_total") == 2 * counted["count"]
            assert metric_total(text, "vllm:request_success_total", finished_reason="length") == 2
            assert metric_total(text, "vllm:time_to_first_token_seconds_count") == 2
            assert metric_total(text, "vllm:cache_config_info", gpu_memory_utilization="0.81") == 4

        gpus = sim_gpu_memory(server.base_url)
        assert len(gpus) == 8 and all(0.9 <= g.free_gib <= 1.1 for g in gpus)
        # The power model's counter: every GPU drew at least its idle power since the start, the replicas
        # that ran the requests' steps more (docs/accuracy-and-cost.md).
        reading = httpx.get(server.base_url + "/sim/energy", timeout=10).json()
        idle_mj = 70.0 * reading["virtual_s"] * 1000
        assert len(reading["gpus_mj"]) == 8 and all(mj >= idle_mj - 1 for mj in reading["gpus_mj"])
        assert max(reading["gpus_mj"]) > idle_mj and reading["model"].startswith("simulated: ")
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait_exit() == 0


INIT_FAILED = "RuntimeError: Engine core initialization failed. See root cause above."


@pytest.mark.parametrize(
    ("candidate", "extra", "code", "needles"),
    [
        ("mega_moe", [], 1, ["DeepGEMM MegaMoE requires SM100 GPUs.", INIT_FAILED]),
        ("eplb", [], 1, ["EPLB is not supported", INIT_FAILED]),
        ("baseline", ["--gpu-memory-utilization", "0.9"], 1, ["CUDA out of memory", INIT_FAILED]),
        ("baseline", ["--bogus-flag"], 2, ["error: unrecognized arguments: --bogus-flag"]),
    ],
)
def test_refused_candidates_exit_like_vllm(
    candidate: str, extra: list[str], code: int, needles: list[str]
) -> None:
    with start(candidate_argv(candidate, *extra), ready=False) as server:
        assert server.wait_exit() == code
        output = "\n".join(server.seen)
        for needle in needles:
            assert needle in output
        assert "Starting vLLM API server" not in output


def test_fault_injection() -> None:
    argv = candidate_argv("baseline", "--sim-time-scale", "50", "--sim-crash-after-requests", "2")
    with (
        start([*argv, "--sim-error-rate", "0.5"]) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        statuses = []
        while statuses.count(200) < 2:
            response = client.post(
                "/v1/chat/completions",
                json=chat_body(stream=False, stream_options=None, max_tokens=20, min_tokens=20),
            )
            statuses.append(response.status_code)
            assert len(statuses) < 50
        assert 500 in statuses
        assert server.wait_exit() == 1
        assert any("EngineDeadError" in line for line in server.seen)


def test_stalled_stream_and_hung_health() -> None:
    argv = candidate_argv(
        "baseline", "--sim-time-scale", "50", "--sim-stall-stream-after-chunks", "2", "--sim-hang-health", "0"
    )
    with start(argv) as server, httpx.Client(base_url=server.base_url, timeout=httpx.Timeout(2.0)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.get("/health")
        with (
            pytest.raises(httpx.ReadTimeout),
            client.stream("POST", "/v1/chat/completions", json=chat_body()) as response,
        ):
            for _ in response.iter_lines():
                pass


def test_the_simulator_answers_a_labelled_item_streamed_and_not() -> None:
    """A labelled item gets its worked answer in content (the load runner's parser keeps it), the same on
    both paths and on every request; probabilistic drafts change the stated share (launch/sim/answers.py)."""
    item = parse_labelled((ROOT / "conf" / "workload" / "accuracy_set.jsonl").read_text(), "set")[2]
    body = chat_body(
        messages=[{"role": "user", "content": item.prompt}], max_tokens=4096, min_tokens=0, ignore_eos=False
    )
    texts = []
    with start(candidate_argv("baseline", "--sim-time-scale", "50")) as server:
        client = httpx.Client(base_url=server.base_url, timeout=30)
        for _ in range(2):
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                raw = b"".join(response.iter_bytes())
            outcome = EventParser([(0, raw)], complete=True, keep_text=True).run()
            assert outcome.finish_reason == "stop" and outcome.error is None
            texts.append(outcome.text)
        plain = client.post("/v1/chat/completions", json={**body, "stream": False, "stream_options": None})
        client.close()
    expected = answer_text(item.prompt, seed=0, draft_sample_method="greedy")
    assert texts == [expected, expected] and plain.json()["choices"][0]["message"]["content"] == expected
    assert expected is not None and expected.endswith(f"#### {item.answer}") and correct(expected, item)
