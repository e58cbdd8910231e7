"""How late a closed loop's opening wave leaves the load client: one wave of N against the reference server.

Starts the reference SSE server (``benchmarks/sse_server.py``) and runs a closed-loop profile of N requests
at concurrency N (no warmup: the measured phase is one wave, as decode_heavy's 128 are) through the load
runner (:func:`load.runner.run_profile`) ``--runs`` times, then the same number of raw socket sends on N
open connections for comparison (the floor: the writes alone). Prints each run's send lateness
(``sent_s - scheduled_s``) at the median, p90 and max. Not a test: the figures depend on the machine's
load; copy them with the command, machine and date into docs/measurements/load-client.md.

    .venv/bin/python benchmarks/burst_lateness.py --streams 128 --runs 3
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ref_server import RefServer  # noqa: E402 - after the path: the script runs from anywhere
from contracts.layout import RepeatPaths  # noqa: E402
from contracts.results import RequestRecord, read_jsonl  # noqa: E402
from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig  # noqa: E402
from load.runner import run_profile  # noqa: E402


def _figures(late_ms: list[float]) -> str:
    late_ms = sorted(late_ms)
    p90 = late_ms[min(len(late_ms) - 1, int(0.9 * len(late_ms)))]
    return f"median {statistics.median(late_ms):.3f} ms, p90 {p90:.3f} ms, max {late_ms[-1]:.3f} ms"


def client_wave(url: str, streams: int, seed: int, workers: int) -> str:
    """One closed-loop wave through the load runner: its requests' lateness."""
    workload = WorkloadConfig(
        name="wave",
        concurrency=streams,
        num_requests=streams,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=100),
        output_tokens=LengthConfig(kind="fixed", mean=8),
        ignore_eos=True,
        seed=seed,
        time_limit_s=60,
    )
    out = Path(tempfile.mkdtemp(prefix="burst-"))
    run_profile(
        url, "ref-model", workload, candidate="c", fingerprint="f", repeat=seed, out_dir=out,
        backend="sim", host="loopback", progress=False,
        load=LoadConfig(workers=workers) if workers > 1 else None,
    )  # fmt: skip
    records = [r for r in read_jsonl(RepeatPaths(out).records, RequestRecord) if not r.warmup]
    return _figures([(r.sent_s - r.scheduled_s) * 1e3 for r in records])


def raw_wave(url: str, streams: int) -> str:
    """The same number of requests written on open sockets in a plain loop: the writes alone."""
    host, port = url.removeprefix("http://").split(":")
    body = b'{"model":"ref-model","messages":[{"role":"user","content":"' + b"x" * 400 + b'"}],"stream":true}'
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\n\r\n"
    socks = [socket.create_connection((host, int(port))) for _ in range(streams)]
    for sock in socks:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    time.sleep(0.2)
    start, sent = time.monotonic_ns(), []
    for sock in socks:
        sock.sendall(head.encode() + body)
        sent.append(time.monotonic_ns())
    time.sleep(0.5)
    for sock in socks:
        sock.close()
    return _figures([(t - start) / 1e6 for t in sent])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=128, help="requests in the wave")
    parser.add_argument("--runs", type=int, default=3, help="waves of each kind")
    parser.add_argument("--workers", type=int, default=1, help="load.workers")
    parser.add_argument("--cores", default=None, help="pin the server to these cores (taskset)")
    args = parser.parse_args()
    server = RefServer(args.cores, "--interval-ms", "20", stderr=subprocess.DEVNULL)
    try:
        for run in range(args.runs):
            figures = client_wave(server.url, args.streams, run, args.workers)
            print(f"load client, wave of {args.streams}, run {run + 1}: {figures}")
        for run in range(args.runs):
            print(f"raw sends,   wave of {args.streams}, run {run + 1}: {raw_wave(server.url, args.streams)}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
