"""Load at fleet scale: open-loop pacing at high request rates, thousands of streams over worker processes.

Both modes start the reference server (``benchmarks/sse_server.py``) pinned to its core(s) and run the
gauntlet client (``load.run_profile``, in a child process pinned to the client core(s), worker processes
included) against it, then print one line per point with the machine's load average before and after, since
a shared machine's other jobs show up in every figure.

``open``: Poisson arrivals of short requests (16-token prompt, 4-token answer) at each ``--rates`` target
for ``--seconds``; prints the send rate achieved (measured sends over their span) against the target, the
send lateness p50/p99/max the summary reports (sent - scheduled, per request, against the absolute
schedule), the server-side arrival rate, errors, client CPU and whether the run flagged itself late or
saturated.

``streams``: ``--streams`` concurrent streams (one wave, closed loop) of ``--chunks`` chunks each, split over
``--workers`` processes; the server stamps every chunk with its send time, so the receive lag of every
chunk is exact (CLOCK_MONOTONIC is system-wide). Prints errors, receive lag p50/p99/max, the client's
CPU per chunk and resident memory per stream (``client.rss_per_stream_bytes``).

    .venv/bin/python benchmarks/fleet.py open --rates 1000 2000 5000 --seconds 5
    .venv/bin/python benchmarks/fleet.py streams --streams 4096 --workers 2 --chunks 64 --interval-ms 50
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ref_server import RefServer, pinned  # noqa: E402 - after the path: the script runs from anywhere
from contracts import metrics  # noqa: E402
from contracts.layout import RepeatPaths  # noqa: E402


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    value = metrics.percentile(values, q)
    return math.nan if value is None else value


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_client(cores: str | None, spec: dict[str, Any], out: Path) -> dict[str, Any]:
    """Run one profile in a pinned child (``--child``); returns its summary as a dict."""
    argv = [sys.executable, __file__, "--child", json.dumps(spec), str(out)]
    subprocess.run(pinned(cores, argv), check=True, timeout=1800, capture_output=True, text=True)
    summary: dict[str, Any] = json.loads(RepeatPaths(out).summary.read_text())
    return summary


def child(spec_text: str, out: str) -> None:
    """The client's side: one run_profile in this (pinned) process; worker processes inherit the pinning."""
    from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig  # noqa: PLC0415
    from load import run_profile  # noqa: PLC0415 - only in the pinned child

    spec = json.loads(spec_text)
    workload = WorkloadConfig(
        name="fleet",
        mode=spec["mode"],
        rate=spec.get("rate"),
        concurrency=spec["concurrency"],
        num_requests=spec["requests"],
        warmup_requests=spec.get("warmup", 0),
        prompt_tokens=LengthConfig(kind="fixed", mean=spec["prompt"]),
        output_tokens=LengthConfig(kind="fixed", mean=spec["output"]),
        ignore_eos=True,
        seed=1,
        time_limit_s=spec.get("time_limit_s", 900),
        request_timeout_s=spec.get("time_limit_s", 900),
    )
    run_profile(
        spec["url"],
        "ref-model",
        workload,
        candidate="fleet",
        fingerprint="fleet",
        repeat=0,
        out_dir=Path(out),
        backend="sim",
        host="bench",
        salt="bench",
        progress=False,
        load=LoadConfig(workers=spec.get("workers", 1), max_send_lateness_s=spec.get("bound", 0.001)),
    )


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in RepeatPaths(out).records.read_text().splitlines()]


def open_mode(args: argparse.Namespace, work: Path) -> None:
    print(f"open loop: {args.seconds:g} s per point, workers {args.workers}; "
          f"server cores {args.server_cores}, client cores {args.client_cores}; "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'target/s':>8} {'sent/s':>8} {'server/s':>8} {'done/s':>8} {'late p50':>8} {'p99 ms':>7} "
          f"{'max ms':>7} {'errors':>6} {'CPU %':>6} {'flags':<16} load before -> after")  # fmt: skip
    for rate in args.rates:
        server = RefServer(args.server_cores, "--interval-ms", str(args.interval_ms), "--record-arrivals",
                           "--no-role-chunk", "--no-metrics", stderr=subprocess.PIPE)  # fmt: skip
        before = loadavg()
        out = work / f"open-{int(rate)}"
        try:
            spec = dict(url=server.url, mode="open", rate=rate, concurrency=args.concurrency,
                        requests=max(1, round(rate * args.seconds)), warmup=min(200, round(rate / 10)),
                        prompt=16, output=4, workers=args.workers, bound=args.bound)  # fmt: skip
            summary = run_client(args.client_cores, spec, out)
            arrivals = sorted(server.get("/arrivals"))
        finally:
            server.close()
        measured = [r for r in records(out) if not r["warmup"]]
        sent = sorted(r["sent_s"] for r in measured)
        span = sent[-1] - sent[0] if len(sent) > 1 else 0.0
        sent_rate = (len(sent) - 1) / span if span > 0 else 0.0
        tail = arrivals[-len(measured) :]
        server_rate = (
            (len(tail) - 1) / ((tail[-1] - tail[0]) / 1e9) if len(tail) > 1 and tail[-1] > tail[0] else 0.0
        )
        client = summary["client"]
        flags = ",".join(f for f in ("late", "saturated") if client.get(f)) or "-"
        done = summary["completed"] / summary["duration_s"] if summary["duration_s"] else 0.0
        late = [client[f"dispatch_lag_{q}_s"] * 1e3 for q in ("p50", "p99", "max")]
        print(f"{rate:8.0f} {sent_rate:8.0f} {server_rate:8.0f} {done:8.0f} {late[0]:8.3f} {late[1]:7.3f} "
              f"{late[2]:7.2f} {summary['failed']:6d} {client['client_cpu_percent']:6.0f} {flags:<16} "
              f"{before} -> {loadavg()}  pacer={client.get('pacer')}", flush=True)  # fmt: skip


def streams_mode(args: argparse.Namespace, work: Path) -> None:
    print(f"streams: {args.streams} concurrent x {args.chunks} chunks every {args.interval_ms:g} ms, "
          f"workers {args.workers}; server cores {args.server_cores}, "
          f"client cores {args.client_cores}")  # fmt: skip
    server = RefServer(args.server_cores, "--interval-ms", str(args.interval_ms), "--record-stamps",
                       "--no-role-chunk", stderr=subprocess.PIPE)  # fmt: skip
    before = loadavg()
    out = work / "streams"
    cpu0 = child_cpu()
    try:
        spec = dict(url=server.url, mode="closed", concurrency=args.streams, requests=args.streams,
                    prompt=32, output=args.chunks, workers=args.workers, bound=None)  # fmt: skip
        summary = run_client(args.client_cores, spec, out)
        stamps: dict[str, list[int]] = server.get("/stamps")
    finally:
        server.close()
    cpu = child_cpu() - cpu0
    t0 = json.loads(RepeatPaths(out).metrics.read_text())["t0_monotonic_ns"]
    lags: list[float] = []
    for record in records(out):
        for offset, stamp in zip(
            record["chunk_offsets_s"], stamps.get(f"bench-{record['index']}", []), strict=False
        ):
            lags.append((t0 + round((record["sent_s"] + offset) * 1e9) - stamp) / 1e9)
    client = summary["client"]
    per_stream = client.get("rss_per_stream_bytes")
    all_stamps = sorted(s for v in stamps.values() for s in v)
    rate = len(all_stamps) / ((all_stamps[-1] - all_stamps[0]) / 1e9) if len(all_stamps) > 1 else 0.0
    print(f"completed {summary['completed']}/{summary['num_requests']}, errors {summary['errors'] or 0}; "
          f"chunks matched {len(lags)} of {args.streams * args.chunks}, "
          f"server sent {rate:.0f} chunks/s")  # fmt: skip
    print(f"receive lag p50 {pct(lags, 50) * 1e3:.2f} ms, p99 {pct(lags, 99) * 1e3:.2f} ms, "
          f"max {max(lags, default=math.nan) * 1e3:.2f} ms")  # fmt: skip
    print(f"client CPU (server excluded: client process and workers) {client['client_cpu_percent']:.0f}% "
          f"(per worker {client.get('worker_cpu_percent')}), all children incl. server "
          f"{cpu / max(1, len(lags)) * 1e6:.1f} us/chunk")  # fmt: skip
    print(
        f"memory per stream: {per_stream / 1024:.1f} KiB"
        if per_stream is not None
        else "memory: not measured"
    )
    print(f"client notes: {client['notes']}; load {before} -> {loadavg()}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["open", "streams"])
    parser.add_argument("--rates", type=float, nargs="+", default=[1000, 2000, 5000])
    parser.add_argument("--seconds", type=float, default=5.0, help="open: measured seconds per point")
    parser.add_argument("--concurrency", type=int, default=2048, help="open: cap on requests in flight")
    parser.add_argument("--bound", type=float, default=0.001, help="open: load.max_send_lateness_s")
    parser.add_argument("--streams", type=int, default=4096)
    parser.add_argument("--chunks", type=int, default=64, help="streams: chunks per stream")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--interval-ms", type=float, default=None, help="server tick (open: 1; streams: 50)")
    parser.add_argument("--server-cores", default="0", help="taskset list for the server ('' = unpinned)")
    parser.add_argument("--client-cores", default="1", help="taskset list for the client and its workers")
    args = parser.parse_args()
    if args.interval_ms is None:
        args.interval_ms = 1.0 if args.mode == "open" else 50.0
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="gauntlet-fleet-") as tmp:
        (open_mode if args.mode == "open" else streams_mode)(args, Path(tmp))


if __name__ == "__main__":
    main()
