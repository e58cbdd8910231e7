"""doctor's real probes on a fake installation: the version from its dist-info, --help run once and cached
per version, a model found in the Hugging Face cache, the port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from contracts.errors import LaunchError
from launch.preflight import real_probes

USAGE = "usage: vllm serve [-h] [--max-num-seqs MAX_NUM_SEQS] [model_tag]\\n"


def fake_install(root: Path, version: str) -> Path:
    """A venv-shaped folder whose ``bin/vllm`` prints a usage and counts its runs in ``runs``."""
    program = root / "venv" / "bin" / "vllm"
    program.parent.mkdir(parents=True)
    program.write_text(f'#!/bin/sh\necho run >> "{root}/runs"\nprintf "{USAGE}"\n')
    program.chmod(0o755)
    (root / "venv" / "lib" / "python3.11" / "site-packages" / f"vllm-{version}.dist-info").mkdir(parents=True)
    return program


def test_help_is_read_once_per_version_and_cached(tmp_path: Path) -> None:
    program = fake_install(tmp_path, "0.32.1")
    probes = real_probes(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)})
    resolved = probes.resolve([str(program), "serve"])
    version = probes.version(resolved)
    assert version == "0.32.1"
    first = probes.help_text(resolved, version)
    again = probes.help_text(resolved, version)
    assert first == again and "--max-num-seqs" in first
    assert (tmp_path / "runs").read_text().count("run") == 1  # the second answer came from the cache
    assert len(list((tmp_path / "cache" / "gauntlet" / "server-help").iterdir())) == 1
    probes.help_text(resolved, "0.32.2")  # another version: asked again
    assert (tmp_path / "runs").read_text().count("run") == 2


def test_a_program_that_does_not_answer_help_is_an_error_with_its_output(tmp_path: Path) -> None:
    program = tmp_path / "broken"
    program.write_text("#!/bin/sh\necho 'ImportError: no torch' >&2\nexit 1\n")
    program.chmod(0o755)
    probes = real_probes(tmp_path, {"HOME": str(tmp_path)})
    with pytest.raises(LaunchError, match="exit code 1") as err:
        probes.help_text([str(program)], None)
    assert err.value.evidence == ["ImportError: no torch"]
    with pytest.raises(LaunchError, match="does not exist"):
        probes.resolve(["missing/bin/vllm", "serve"])


def test_a_model_in_the_hugging_face_cache_is_found(tmp_path: Path) -> None:
    snapshot = tmp_path / "hf" / "hub" / "models--org--model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    probes = real_probes(tmp_path, {"HF_HOME": str(tmp_path / "hf")})
    assert probes.hf_snapshot("org/model") == str(snapshot)
    assert probes.hf_snapshot("org/other") is None
    assert probes.read_file(f"{snapshot}/config.json") == "{}"


def test_the_port_probe_sees_a_listener() -> None:
    probes = real_probes(Path.cwd(), {})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert probes.port_in_use("127.0.0.1", port)
    assert not probes.port_in_use("127.0.0.1", port)
