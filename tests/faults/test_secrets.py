"""Fault matrix, secrets: an API key named in the config works end to end and is written nowhere.

A sweep on the simulator with ``service.api_key_env`` set: the server requires the key (vLLM's
``--api-key``, handed over as VLLM_API_KEY), the supervisor's health checks, the load runner and the
restore's checks send it, and its value appears in no file of the sweep, in none of the sweep's output
and in no process title. Rows of ``docs/reliability.md``.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.results import RequestRecord, read_jsonl
from tests.integration.sweep_helpers import run_sweep, sim_servers

pytestmark = pytest.mark.integration

KEY_ENV = "GAUNTLET_FAULT_API_KEY"
QUICK = [
    "run.repeats=1",
    "run.profiles=[serial]",
    "run.recovery_profiles=[serial]",
    "gates.accepted_profiles=[serial]",
    "gates.loaded_profiles=[serial]",
    "run.retained_after_sweep=keep",
]


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def test_an_api_key_works_end_to_end_and_its_value_is_written_nowhere(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"sk-gauntlet-{secrets.token_hex(16)}"
    monkeypatch.setenv(KEY_ENV, token)
    sweeps = tmp_path / "sweeps"
    code, out, sweep = run_sweep(
        ["-m", "candidate=baseline", *QUICK, f"service.api_key_env={KEY_ENV}"], sweeps=sweeps, port=port
    )
    assert code == 0, out[-3000:]
    # the key was needed and sent: every request of every profile (recovery included) succeeded
    records = [r for path in sweep.rglob("records.jsonl") for r in read_jsonl(path, RequestRecord)]
    assert records and all(r.error is None for r in records), {r.error_detail for r in records if r.error}
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/v1/models", timeout=5).status_code == 401
    authorized = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert authorized.status_code == 200
    # the value is nowhere gauntlet writes: files of the sweep (logs, journal, specs, report, plots, CSV)
    assert files_containing(sweeps, token.encode()) == []
    assert token not in out
    # ... nor in a process title: the retained server got it through its environment only
    (server,) = sim_servers(port)
    for proc in [server, *server.children(recursive=True)]:
        assert token not in " ".join(proc.cmdline())
    assert psutil.Process(server.pid).environ().get("VLLM_API_KEY") == token


def test_a_missing_api_key_variable_is_refused_before_anything_starts(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    code, out, _ = run_sweep(
        ["-m", "candidate=baseline", *QUICK, f"service.api_key_env={KEY_ENV}"],
        sweeps=tmp_path / "sweeps",
        port=port,
    )
    assert code != 0
    assert f"service.api_key_env names {KEY_ENV}, which is not set" in out
    assert sim_servers(port) == []
