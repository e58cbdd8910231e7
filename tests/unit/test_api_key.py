"""The served API's key: named in the config, read from the environment, sent, never written."""

from __future__ import annotations

import pytest

from contracts.errors import LaunchError
from contracts.schema import CandidateConfig, HostConfig, ServiceConfig
from launch.command import auth_headers, child_env
from launch.spec import LaunchSpec, render_spec

HOST = HostConfig(name="h", gpu_count=1)
CAND = CandidateConfig(name="c")


def spec(**service: object) -> LaunchSpec:
    return render_spec(ServiceConfig(model="m", served_model_name="m", **service), CAND, HOST)  # type: ignore[arg-type]


def test_a_spec_without_a_key_is_written_and_fingerprinted_as_before() -> None:
    plain = spec()
    assert "api_key_env" not in plain.to_json()
    assert plain.api_key({"ANY": "x"}) is None and auth_headers(plain, {}) == {}
    assert LaunchSpec.from_json(plain.to_json()) == plain


def test_a_key_is_read_from_the_named_variable_and_handed_to_the_server_as_vllm_api_key() -> None:
    keyed = spec(api_key_env="MY_KEY")
    environ = {"MY_KEY": "sk-123", "PATH": "/bin"}
    assert child_env(keyed, environ)["VLLM_API_KEY"] == "sk-123"
    assert auth_headers(keyed, environ) == {"Authorization": "Bearer sk-123"}
    text = keyed.to_json()
    assert '"api_key_env": "MY_KEY"' in text and "sk-123" not in text
    assert keyed.fingerprint != spec().fingerprint  # requiring a key is part of the launch
    assert LaunchSpec.from_json(text) == keyed


@pytest.mark.parametrize("environ", [{}, {"MY_KEY": ""}])
def test_a_missing_key_is_refused_naming_the_variable(environ: dict[str, str]) -> None:
    with pytest.raises(LaunchError, match="MY_KEY, which is not set"):
        child_env(spec(api_key_env="MY_KEY"), environ)
