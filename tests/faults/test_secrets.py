"""Fault matrix, secrets: an API key named in the config, or a secret an ``env`` value reads through
``${oc.env:...}``, works end to end and is written nowhere.

A sweep on the simulator with ``service.api_key_env`` set: the server requires the key (vLLM's
``--api-key``, handed over as VLLM_API_KEY), the supervisor's health checks, the load runner and the
restore's checks send it, and its value appears in no file of the sweep, in none of the sweep's output
and in no process title. Rows of ``docs/reliability.md``.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.files import read_jsonl
from contracts.results import RequestRecord
from orchestrator.ledger.lock import LOCK_DIR_ENV
from tests.integration.sweep_helpers import run_cli, run_sweep, sim_servers, start, sweep_dir

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


def command_lines() -> set[str]:
    """Every process's command line, as ``ps -eo args`` shows it."""
    found = set()
    for proc in psutil.process_iter(["cmdline"]):
        found.add(" ".join(proc.info["cmdline"] or []))
    return found


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


def test_a_secret_read_through_oc_env_reaches_the_servers_environment_and_nothing_else(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"hf_{secrets.token_hex(16)}"
    monkeypatch.setenv("HF_TOKEN", token)
    locks = tmp_path / "locks"
    monkeypatch.setenv(LOCK_DIR_ENV, str(locks))
    sweeps = tmp_path / "sweeps"
    from_env = "${oc.env:HF_TOKEN}"
    proc = start(
        [
            "-m",
            "candidate=twin",
            *QUICK,
            f"+candidate.env.MY_AUTH={from_env}",
            f"+baseline.env.MY_AUTH={from_env}",
        ],
        sweeps=sweeps,
        port=port,
    )
    outputs: list[str] = []
    reader = threading.Thread(target=lambda: outputs.append(proc.communicate(timeout=300)[0]))
    reader.start()
    titles: set[str] = set()
    while reader.is_alive():  # the process table while the sweep runs: servers, load workers, the sweep
        titles |= command_lines()
        reader.join(timeout=0.1)
    titles |= command_lines()  # and after: the retained server
    (out,) = outputs
    assert proc.returncode in (0, 8), out[-3000:]  # 8: a one-repeat verdict may be incomplete
    sweep = sweep_dir(sweeps)
    (server,) = sim_servers(port)
    assert " ".join(server.cmdline()) in titles
    # the servers got the value through their environment ...
    assert psutil.Process(server.pid).environ().get("MY_AUTH") == token
    # ... and every file, directory name and message has the variable's name instead
    assert '"MY_AUTH": "<from $HF_TOKEN>"' in (sweep / "candidates" / "twin" / "spec.json").read_text()
    assert files_containing(sweeps, token.encode()) == []
    assert files_containing(locks, token.encode()) == []
    assert [p for p in [*sweeps.rglob("*"), *locks.rglob("*")] if token in p.name] == []
    assert token not in out
    assert [title for title in titles if token in title] == []


def test_plan_shows_a_secret_by_name_and_refuses_it_in_names_and_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"hf_{secrets.token_hex(16)}"
    monkeypatch.setenv("HF_TOKEN", token)
    shown = run_cli(["plan", "candidate=baseline", "+candidate.env.MY_AUTH=${oc.env:HF_TOKEN}"])
    assert shown.returncode == 0, shown.stderr
    assert "MY_AUTH='<from $HF_TOKEN>'" in shown.stdout
    refused = run_cli(
        [
            "plan",
            "candidate=baseline",
            "candidate.name=${oc.env:HF_TOKEN}",
            "+candidate.extra_args.hf-token=${oc.env:HF_TOKEN}",
        ]
    )
    assert refused.returncode == 2
    for field in ("candidate.name", "candidate.extra_args.hf-token"):
        assert f"{field} = '<from $HF_TOKEN>': no value of $HF_TOKEN, a secret" in refused.stderr
    assert "pass it through the server's environment (service.pass_env / env" in refused.stderr
    assert token not in shown.stdout + shown.stderr + refused.stdout + refused.stderr
