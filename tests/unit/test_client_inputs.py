"""The load client's own inputs are the harness's, never the server's (issue 42, item 9): its TLS files (a
CA bundle, a client certificate and key) and its Authorization header (an API key with a line break, as
read from a file). Refused when the config is composed where that can be known; at run time a
HarnessError naming the file or the header, recorded as a ``harness`` event (the verdict INCOMPLETE),
never ``unhealthy`` (the server blamed) and never the key's value."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.errors import ConfigError, HarnessError
from contracts.schema import LoadConfig, WorkloadConfig
from launch.spec import LaunchSpec
from load.client import RawStreamClient
from load.runner import run_profile
from load.tls import tls_context
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

KEY_VAR = "GAUNTLET_TEST_API_KEY"
KEY = "sk-test-91c0ffee"  # the value no message, record or journal may show


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a client certificate with its key, another key, an encrypted copy of the key, a junk file."""
    if shutil.which("openssl") is None:
        if os.environ.get("GAUNTLET_REQUIRE_OPENSSL") == "1":
            pytest.fail("GAUNTLET_REQUIRE_OPENSSL=1 but the openssl command is missing")
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-pkeyopt", "ec_paramgen_curve:prime256v1"]
    for name in ("ca", "client"):
        _openssl("req", "-x509", "-newkey", "ec", *ec, "-nodes", "-days", "1", "-subj", f"/CN={name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)  # fmt: skip
    _openssl("genpkey", "-algorithm", "EC", *ec, "-out", "other.key", cwd=d)
    _openssl("pkey", "-in", "client.key", "-aes256", "-passout", "pass:hunter2", "-out", "locked.key", cwd=d)
    (d / "junk.pem").write_text("not a certificate\n")
    (d / "folder.pem").mkdir()
    return d


#: (what the load section names, relative to the PKI folder; the field and file the message names).
TLS_FAULTS = [
    pytest.param({"ca_bundle": "junk.pem"}, "load.ca_bundle", "junk.pem", "not a PEM CA bundle",
                 id="ca-junk"),
    pytest.param({"ca_bundle": "none.pem"}, "load.ca_bundle", "none.pem", "cannot be read", id="ca-missing"),
    pytest.param({"ca_bundle": "folder.pem"}, "load.ca_bundle", "folder.pem", "cannot be read",
                 id="ca-folder"),
    pytest.param({"client_cert": "junk.pem"}, "load.client_cert", "junk.pem", "not a PEM certificate",
                 id="cert-junk"),
    pytest.param({"client_cert": "client.pem", "client_key": "other.key"}, "load.client_cert", "client.pem",
                 "not a PEM certificate whose private key is load.client_key", id="key-not-the-certificates"),
    pytest.param({"client_cert": "client.pem", "client_key": "locked.key"}, "load.client_key", "locked.key",
                 "an encrypted private key", id="key-with-a-passphrase"),
    pytest.param({"client_cert": "client.pem", "client_key": "none.key"}, "load.client_key", "none.key",
                 "cannot be read", id="key-missing"),
]  # fmt: skip


def _load_config(pki: Path, files: dict[str, str]) -> LoadConfig:
    return LoadConfig(**{name: str(pki / value) for name, value in files.items()})


@pytest.mark.parametrize(("files", "field", "name", "why"), TLS_FAULTS)
def test_a_tls_file_the_client_cannot_use_is_a_harness_error_naming_field_and_file(
    pki: Path, files: dict[str, str], field: str, name: str, why: str
) -> None:
    with pytest.raises(HarnessError) as info:
        tls_context(_load_config(pki, files))
    assert f"{field} = '{pki / name}': {why}" in str(info.value), str(info.value)
    assert "not the server" in str(info.value)


@pytest.mark.parametrize(("files", "field", "name", "why"), TLS_FAULTS)
def test_a_tls_file_the_client_cannot_use_is_refused_when_the_config_is_composed(
    pki: Path, files: dict[str, str], field: str, name: str, why: str
) -> None:
    overrides = [f"load.{key}={pki / value}" for key, value in files.items()]
    with pytest.raises(ConfigError) as info:
        load(overrides)
    text = str(info.value)
    assert f"{field} = '{pki / name}': a readable PEM file, or null ({why}" in text, text


def test_usable_tls_files_compose_and_make_a_verifying_context(pki: Path) -> None:
    files = {"ca_bundle": "ca.pem", "client_cert": "client.pem", "client_key": "client.key"}
    cfg, _ = load([f"load.{key}={pki / value}" for key, value in files.items()])
    assert tls_context(cfg.load).check_hostname


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        (f"{KEY}\n", "has a trailing newline"),  # `export K="$(cat key)"` strips it; a file read does not
        (f"{KEY}\r\n", "has a trailing newline"),
        (f"{KEY}\nsecond-line", "has a line break"),
        (KEY, None),
    ],
)
def test_an_api_key_with_a_line_break_is_refused_when_the_config_is_composed(
    monkeypatch: pytest.MonkeyPatch, value: str, refused: str | None
) -> None:
    monkeypatch.setenv(KEY_VAR, value)
    overrides = [f"+service.api_key_env={KEY_VAR}"]
    if refused is None:
        cfg, _ = load(overrides)
        assert cfg.service.api_key_env == KEY_VAR
        return
    with pytest.raises(ConfigError) as info:
        load(overrides)
    text = str(info.value)
    assert f"api_key_env = '{KEY_VAR}': the API key in ${KEY_VAR} (service.api_key_env) {refused}" in text
    assert f"export {KEY_VAR}=" in text and KEY not in text


def _spec_with_a_key() -> LaunchSpec:
    return LaunchSpec(candidate="c", host="h", host_kind="sim", argv=("x",), env={}, pass_env=(),
                      config_yaml="", bind_host="127.0.0.1", port=1, served_model_name="m", max_model_len=8,
                      startup_timeout_s=1, shutdown_grace_s=1, gpu_release_timeout_s=1, time_scale=1,
                      api_key_env=KEY_VAR)  # fmt: skip


@pytest.mark.parametrize(
    ("raise_it", "fragment"),
    [
        (
            lambda: RawStreamClient("http://h:1", headers={"Authorization": f"Bearer {KEY}\n"}),
            "'Authorization'",
        ),
        (lambda: RawStreamClient("http://h:1", headers={"X-Api-Key\r": KEY}), "'X-Api-Key\\r'"),
        (
            lambda: _spec_with_a_key().api_key({KEY_VAR: f"{KEY}\n"}),
            f"${KEY_VAR} (service.api_key_env) has a trailing newline",
        ),
    ],
)
def test_a_header_with_a_line_break_is_a_harness_error_naming_the_header_not_its_value(
    raise_it: Callable[[], object], fragment: str
) -> None:
    with pytest.raises(HarnessError) as info:
        raise_it()
    assert fragment in str(info.value) and KEY not in str(info.value), str(info.value)


def test_the_runner_refuses_a_key_with_a_newline_before_any_request(tmp_path: Path) -> None:
    """Over a test transport nothing else would stop it: the key would reach /tokenize and every stream."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500)

    workload = WorkloadConfig(name="serial", concurrency=1, num_requests=1)
    with pytest.raises(HarnessError, match="'Authorization' has a line break"):
        run_profile("http://127.0.0.1:9", "m", workload, candidate="c", fingerprint="f", repeat=1,
                    out_dir=tmp_path / "out", backend="sim", host="h", progress=False,
                    transport=httpx.MockTransport(handler), api_key=f"{KEY}\n")  # fmt: skip
    assert seen == []


def _real_runner(scheme: str) -> Callable[..., Any]:
    """The sweep's load seam as the real load runner, pointed at ``scheme`` (https: the TLS files matter)."""

    def run(base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any) -> Any:
        return run_profile(base_url.replace("http://", scheme), served_model, workload, progress=False, **kw)

    return run


#: (the load section's TLS files, the API key's value, the scheme; what the harness event names).
SWEEP_FAULTS = [
    pytest.param(({"ca_bundle": "junk.pem"}, None, "https://"), "load.ca_bundle = ", id="ca-junk"),
    pytest.param(({"ca_bundle": "none.pem"}, None, "https://"), "load.ca_bundle = ", id="ca-missing"),
    pytest.param(({"client_cert": "client.pem", "client_key": "other.key"}, None, "https://"),
                 "load.client_cert = ", id="key-not-the-certificates"),
    pytest.param(({"client_cert": "client.pem", "client_key": "locked.key"}, None, "https://"),
                 "load.client_key = ", id="key-with-a-passphrase"),
    pytest.param(({}, f"{KEY}\n", "http://"), f"${KEY_VAR} (service.api_key_env) has a trailing newline",
                 id="api-key-trailing-newline"),
    pytest.param(({}, f"{KEY}\r\nx", "http://"), f"${KEY_VAR} (service.api_key_env) has a line break",
                 id="api-key-line-break"),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "fragment"), SWEEP_FAULTS)
def test_a_fault_of_the_clients_own_inputs_under_load_is_the_harness_not_the_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pki: Path,
    inputs: tuple[dict[str, str], str | None, str],
    fragment: str,
) -> None:
    """A file changed after the config was composed, or an environment that differs from the launching
    shell's: the run is a ``harness`` event (INCOMPLETE, measured again on resume), not ``unhealthy``."""
    files, key, scheme = inputs
    cfg, _ = load(["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[serial]"])
    cfg.load = _load_config(pki, files)
    if key is not None:
        cfg.service = replace(cfg.service, api_key_env=KEY_VAR)
        monkeypatch.setenv(KEY_VAR, key)
    seams = fake_seams(FakeSupervisor(), FakeLoad(), [])
    seams.run_profile = _real_runner(scheme)
    ctx = SweepContext.open(cfg, tmp_path / "sweep", seams)
    run = run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    assert [e.kind for e in run.watch] == ["harness"], run.watch
    assert fragment in run.watch[0].detail, run.watch[0].detail
    records = [p for p in (tmp_path / "sweep").rglob("*") if p.suffix in (".json", ".jsonl")]
    written = "".join(p.read_text() for p in records)
    assert "harness" in written and KEY not in written
