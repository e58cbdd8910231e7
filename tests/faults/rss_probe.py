"""Run one profile against a server; print what it kept and the runner's peak RSS.

A subprocess of the load test, so the peak is the runner's own:
``python -m tests.faults.rss_probe BASE_URL OUT_DIR CONCURRENCY REQUESTS``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from contracts.files import read_jsonl
from contracts.results import RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from load import run_profile

SIM_TIME_SCALE = 50.0  # as tests.faults.conftest (not imported: this process carries only the runner)


def peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM; ru_maxrss would carry the forking parent's across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> None:
    base_url, out, concurrency, requests = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    before_kib = peak_rss_kib()
    wl = WorkloadConfig(
        name="streams",
        concurrency=concurrency,
        num_requests=requests,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=64),
        output_tokens=LengthConfig(kind="fixed", mean=32),
        ignore_eos=True,
        seed=5,
        time_limit_s=300,
        request_timeout_s=120,
    )
    started = time.monotonic()
    summary = run_profile(
        base_url,
        "deepseek-v4-flash",
        wl,
        candidate="baseline",
        fingerprint="sha256:" + "0" * 64,
        repeat=0,
        out_dir=out,
        backend="sim",
        host="sim",
        time_scale=SIM_TIME_SCALE,
        progress=False,
    )
    wall_s = time.monotonic() - started
    records = read_jsonl(out / "records.jsonl", RequestRecord)
    peak_kib = peak_rss_kib()
    print(
        json.dumps(
            {
                "records": len(records),
                "completed": summary.completed,
                "errors": summary.errors,
                "peak_rss_mib": peak_kib / 1024,
                "rss_before_run_mib": before_kib / 1024,
                "wall_s": wall_s,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
