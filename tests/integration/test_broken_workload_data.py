"""Issue 21: broken workload data is refused by ``plan`` and by the sweep before anything starts (no
server, nothing measured), with the file, the line, the field, the value and what is allowed; never
found under load and blamed on the candidate's server."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import sweep_helpers as h

ROOT = Path(__file__).resolve().parents[2]


def cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def row(arrival: float, prompt_tokens: int = 100, output_tokens: int = 16) -> str:
    return json.dumps({"arrival_s": arrival, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens})


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([row(0.0), '{"arrival_s": 0.5, "prompt_tokens": 100', row(1.0)], ":2: not JSON"),
        ([row(0.0), row(-0.5)], ":2: arrival_s must be >= 0"),
        ([row(0.0), row(math.nan)], ":2: arrival_s = nan: expected a finite number of seconds >= 0"),
        ([row(0.0), row(math.inf)], ":2: arrival_s = inf: expected a finite number of seconds >= 0"),
        ([row(0.0), row(2.0), row(1.0)], ":3: arrival_s = 1 is before line 2's 2: offsets must not decrease"),
        (["", "  "], ": no requests in the trace"),
        (
            [row(0.0), row(0.1, prompt_tokens=131072, output_tokens=64)],
            ":2: prompt_tokens 131072 + output_tokens 64 = 131136': at most service.max_model_len (131072)",
        ),
    ],
)
def test_plan_refuses_a_broken_trace_naming_file_line_and_field(
    tmp_path: Path, lines: list[str], expected: str
) -> None:
    trace = tmp_path / "broken.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    done = cli(["plan", "workload@workloads.short=trace_example", f"workloads.short.data.file={trace}"])
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"workloads.short.data.file = '{trace}" in done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_the_sweep_refuses_a_broken_trace_before_anything_starts(tmp_path: Path, port: int) -> None:
    trace = tmp_path / "broken.jsonl"
    trace.write_text(row(0.0) + "\n{not json\n")
    sweeps = tmp_path / "sweeps"
    done = cli(
        [
            "-m",
            "candidate=spec_probabilistic",
            "workload@workloads.short=trace_example",
            f"workloads.short.data.file={trace}",
            f"service.port={port}",
            f"run.sweeps_dir={sweeps}",
        ]
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"workloads.short.data.file = '{trace}': a valid trace file: {trace}:2: not JSON" in done.stderr
    assert h.sim_servers(port) == []  # no server started
    # nothing measured: at most the sweep's opening record (written before the jobs are composed)
    written = [f.name for f in sweeps.rglob("*") if f.is_file()] if sweeps.exists() else []
    assert set(written) <= {"opening.json"}, written
    assert "server died" not in done.stdout + done.stderr
