"""A sweep's summary records the run's salt and the exact load settings, and ``python -m load`` runs the
same profile again from them against a real streaming server (benchmarks/sse_server.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.errors import ResultFileError
from contracts.files import read_jsonl, read_model, write_model
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from load import run_profile
from load.__main__ import main as load_main
from load.__main__ import recorded_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[str]:
    argv = [sys.executable, str(ROOT / "benchmarks" / "sse_server.py"), "--port", "0", "--interval-ms", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on"), line
    yield f"http://127.0.0.1:{int(line.split()[-1])}"
    proc.terminate()
    proc.wait(timeout=10)
    proc.stdout.close()


WORKLOAD = WorkloadConfig(
    name="rerun",
    concurrency=4,
    num_requests=8,
    warmup_requests=1,
    prompt_tokens=LengthConfig(kind="uniform", mean=200, min=100, max=300),
    output_tokens=LengthConfig(kind="fixed", mean=8),
    ignore_eos=True,
    seed=11,
    time_limit_s=60,
)


def first_run(url: str, out: Path, *, salt: str | None = None) -> ProfileSummary:
    return run_profile(
        url, "ref-model", WORKLOAD, candidate="tp4_dp2", fingerprint="sha256:abc", repeat=2, out_dir=out,
        backend="sim", host="loopback", time_scale=1.0, scale=0.5, salt=salt, progress=False,
    )  # fmt: skip


def test_the_summary_records_the_salt_and_every_setting(server: str, tmp_path: Path) -> None:
    summary = first_run(server, tmp_path / "a", salt="gauntlet-feed")
    on_disk = read_model(tmp_path / "a" / "summary.json", ProfileSummary)
    assert on_disk.settings is not None and on_disk.settings == summary.settings
    settings = on_disk.settings
    assert settings.salt == "gauntlet-feed"
    assert (settings.base_url, settings.served_model, settings.scale) == (server, "ref-model", 0.5)
    assert settings.workload == WORKLOAD
    drawn = first_run(server, tmp_path / "b")
    assert drawn.settings is not None and drawn.settings.salt.startswith("gauntlet-")
    assert drawn.settings.salt != "gauntlet-feed"


def test_python_m_load_runs_the_recorded_profile_again(server: str, tmp_path: Path) -> None:
    first_run(server, tmp_path / "sweep", salt="gauntlet-feed")
    summary_file = tmp_path / "sweep" / "summary.json"
    code = load_main(
        [str(summary_file), "--base-url", server, "--out", str(tmp_path / "again"), "--no-progress"]
    )
    assert code == 0
    again = read_model(tmp_path / "again" / "summary.json", ProfileSummary)
    original = read_model(summary_file, ProfileSummary)
    assert again.settings is not None and original.settings is not None
    assert again.settings.workload == original.settings.workload  # the same profile, field by field
    assert (again.candidate, again.profile, again.repeat) == ("tp4_dp2", "rerun", 2)
    assert again.settings.salt != "gauntlet-feed"  # fresh by default: no shared prefix cache
    assert (again.num_requests, again.completed) == (original.num_requests, original.completed)
    targets = [
        r.target_prompt_tokens for r in read_jsonl(tmp_path / "again" / "records.jsonl", RequestRecord)
    ]
    recorded = [
        r.target_prompt_tokens for r in read_jsonl(tmp_path / "sweep" / "records.jsonl", RequestRecord)
    ]
    assert targets == recorded  # the same seeded requests
    same = load_main(
        [
            str(summary_file),
            "--base-url",
            server,
            "--out",
            str(tmp_path / "same"),
            "--same-salt",
            "--no-progress",
        ]
    )
    assert same == 0
    replay = read_model(tmp_path / "same" / "summary.json", ProfileSummary)
    assert replay.settings is not None and replay.settings.salt == "gauntlet-feed"


def test_a_summary_without_settings_names_the_file(server: str, tmp_path: Path) -> None:
    summary = first_run(server, tmp_path / "old")
    old = summary.model_copy(update={"settings": None})
    write_model(tmp_path / "old" / "summary.json", old)
    with pytest.raises(ResultFileError, match="no recorded load settings"):
        recorded_settings(tmp_path / "old" / "summary.json")
    assert load_main([str(tmp_path / "old" / "summary.json"), "--no-progress"]) == ResultFileError.exit_code
