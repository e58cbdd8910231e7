"""How many streamed output tokens per second the simulator serves on one core.

Starts ``python -m launch.sim`` (the baseline candidate's flags) pinned to one core with ``taskset -c 0``
and drives ``--streams`` concurrent closed-loop streams from a minimal raw-asyncio SSE reader pinned to
another core. Prints wall-clock figures: output tokens/s (from the usage chunks), chunks/s, and the
server's CPU use. Not a test: run it by hand and copy the figures into docs/simulator.md.

    .venv/bin/python benchmarks/sim_throughput.py --time-scale 1 4 --streams 128 --requests 256
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(rb"Starting vLLM API server 0 on http://127\.0\.0\.1:(\d+)")
USAGE = re.compile(rb'"completion_tokens":(\d+)')
BASELINE = [
    "--model", "deepseek-ai/DeepSeek-V4-Flash", "--served-model-name", "deepseek-v4-flash",
    "--host", "127.0.0.1", "--port", "0", "--tensor-parallel-size", "2", "--data-parallel-size", "4",
    "--enable-expert-parallel",
    "--speculative-config", '{"draft_sample_method":"greedy","method":"dspark","num_speculative_tokens":7}',
    "--moe-backend", "auto", "--gpu-memory-utilization", "0.81", "--max-num-batched-tokens", "16384",
    "--max-model-len", "131072", "--kv-cache-dtype", "fp8", "--reasoning-parser", "deepseek_v4",
    "--seed", "0", "--trust-remote-code", "--sim-profile", "h100x8_deepseek_v4_flash",
    "--sim-startup-s", "0.2",
]  # fmt: skip


def start_server(time_scale: float, core: int | None) -> tuple[subprocess.Popen[bytes], int]:
    argv = [sys.executable, "-m", "launch.sim", *BASELINE, "--sim-time-scale", str(time_scale)]
    if core is not None and shutil.which("taskset"):
        argv = ["taskset", "-c", str(core), *argv]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if match := READY.search(line):
            return proc, int(match.group(1))
    proc.kill()
    raise SystemExit("the simulator did not become ready")


async def one_stream(port: int, body: bytes, stats: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await reader.readuntil(b"\r\n\r\n")
    tail = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        stats["chunks"] += data.count(b"data: ")
        tail = (tail + data)[-4096:]
        if tail.endswith(b"0\r\n\r\n") and b"[DONE]" in tail:
            break
    writer.close()
    match = USAGE.search(tail)
    stats["tokens"] += int(match.group(1)) if match else 0
    stats["done"] += 1


async def drive(port: int, streams: int, requests: int, max_tokens: int) -> dict[str, float]:
    prompt = " ".join(["word"] * 250)
    stats = {"tokens": 0, "chunks": 0, "done": 0}
    queue = list(range(requests))

    async def worker() -> None:
        while queue:
            i = queue.pop()
            body = json.dumps(
                {
                    "model": "deepseek-v4-flash",
                    "messages": [{"role": "user", "content": f"{i} {prompt}"}],
                    "max_tokens": max_tokens,
                    "min_tokens": max_tokens,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
            ).encode()
            await one_stream(port, body, stats)

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(streams)))
    wall = time.monotonic() - start
    return {"wall_s": wall, **{k: float(v) for k, v in stats.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--streams", type=int, default=128)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and args.client_core is not None:
        os.sched_setaffinity(0, {args.client_core})
    print(
        f"{args.streams} streams, {args.requests} requests x {args.max_tokens} output tokens; server on core "
        f"{args.server_core}, client on core {args.client_core}"
    )
    print(
        f"{'scale':>6} {'wall s':>8} {'out tok/s (wall)':>17} {'chunks/s':>9} {'tok/chunk':>9} "
        f"{'server CPU %':>12} {'sim tok/s':>10}"
    )
    for scale in args.time_scale:
        proc, port = start_server(scale, args.server_core)
        ps = psutil.Process(proc.pid)
        try:
            cpu0 = ps.cpu_times()
            result = asyncio.run(drive(port, args.streams, args.requests, args.max_tokens))
            cpu1 = ps.cpu_times()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / result["wall_s"] * 100
        tps = result["tokens"] / result["wall_s"]
        chunks_per_s = result["chunks"] / result["wall_s"]
        print(
            f"{scale:>6g} {result['wall_s']:>8.2f} {tps:>17,.0f} {chunks_per_s:>9,.0f} "
            f"{result['tokens'] / max(result['chunks'], 1):>9.2f} {cpu:>12.0f} {tps / scale:>10,.0f}"
        )
        assert result["done"] == args.requests and result["tokens"] == args.requests * args.max_tokens


if __name__ == "__main__":
    main()
