"""A secret read through ``${oc.env:...}``: written ``<from $NAME>``, refused in names and argv, handed
to the server through its environment only (docs/reliability.md, "secret via interpolation")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contracts.errors import ConfigError, LaunchError, SpecError
from contracts.paths import CONF_DIR
from contracts.schema import CandidateConfig, HostConfig, ServiceConfig
from launch.command import child_env
from launch.spec import LaunchSpec, render_spec
from tests.unit.composed import load

TOKEN = "hf_secret_4d1f9c"  # the value no message may show


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("MY_HUB", TOKEN)  # a secret by pass_env, not by its name
    monkeypatch.setenv("GAUNTLET_TEST_PLAIN", "plain-value")
    monkeypatch.delenv("GAUNTLET_TEST_UNSET_TOKEN", raising=False)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("candidate.name=${oc.env:HF_TOKEN}", "candidate.name"),
        ("candidate.name=c-${oc.env:HF_TOKEN}", "candidate.name"),
        ("baseline.name=${oc.env:HF_TOKEN}", "baseline.name"),
        ("+candidate.extra_args.hf-token=${oc.env:HF_TOKEN}", "candidate.extra_args.hf-token"),
        ("+service.extra_args.x={a: '${oc.env:HF_TOKEN}'}", "service.extra_args.x.a"),
        ("+candidate.sim_args.x=${oc.env:HF_TOKEN}", "candidate.sim_args.x"),
        ("service.model=${oc.env:HF_TOKEN}", "service.model"),
        ("service.served_model_name=${oc.env:HF_TOKEN}", "service.served_model_name"),
        ("host.entrypoint=[python,'${oc.env:HF_TOKEN}','{model}']", "host.entrypoint.1"),
        ("run.sweeps_dir=/tmp/${oc.env:HF_TOKEN}", "run.sweeps_dir"),
        ("+service.pass_env=[MY_HUB]", None),  # the control: pass_env alone is fine ...
        # ... and makes MY_HUB a secret, whatever its name
        ("candidate.name=${oc.env:MY_HUB}", "candidate.name"),
        # another env value read through an interpolation is a value of the env still
        ("candidate.name=${candidate.env.A}", "candidate.name"),
    ],
)
def test_a_secret_outside_an_env_value_is_refused_naming_field_variable_and_override(
    override: str, field: str | None
) -> None:
    extra = ["+candidate.env.A=${oc.env:HF_TOKEN}"] if "candidate.env.A" in override else []
    extra += ["+service.pass_env=[HF_TOKEN,MY_HUB]"] if "MY_HUB}" in override else []
    overrides = ["candidate=baseline", *extra, override]
    if field is None:
        load(overrides)
        return
    with pytest.raises(ConfigError) as info:
        load(overrides)
    text = str(info.value)
    variable = "MY_HUB" if "MY_HUB" in override else "HF_TOKEN"
    assert f"command-line override {override!r}: {field} = " in text, text
    assert f"no value of ${variable}, a secret" in text
    assert "pass it through the server's environment (service.pass_env / env" in text
    assert TOKEN not in text


def test_a_secret_in_a_candidate_file_names_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "candidate" / "leaky.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: leaky\nextra_args:\n  hf-token: ${oc.env:HF_TOKEN}\n"
    )
    with pytest.raises(ConfigError) as info:
        load(["candidate=leaky"], config_dir=conf)
    text = str(info.value)
    assert "candidate/leaky.yaml: candidate.extra_args.hf-token = '<from $HF_TOKEN>'" in text
    assert TOKEN not in text


def test_a_secret_in_env_is_written_by_name_and_handed_to_the_server_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    overrides = ["candidate=baseline", "+candidate.env.MY_AUTH=Bearer ${oc.env:HF_TOKEN}"]
    cfg, _ = load(overrides)
    assert cfg.candidate.env["MY_AUTH"] == "Bearer <from $HF_TOKEN>"
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert TOKEN not in spec.to_json() + spec.env_line() + spec.command_line()
    assert "MY_AUTH='Bearer <from $HF_TOKEN>'" in spec.env_line()
    assert child_env(spec, {"HF_TOKEN": TOKEN})["MY_AUTH"] == f"Bearer {TOKEN}"
    assert LaunchSpec.from_json(spec.to_json()) == spec
    # the fingerprint hashes the variable's name: another value, the same launch
    monkeypatch.setenv("HF_TOKEN", "hf_another_value")
    again, _ = load(overrides)
    assert render_spec(again.service, again.candidate, again.host).fingerprint == spec.fingerprint


def test_variables_that_are_not_secrets_resolve_as_in_omegaconf() -> None:
    cfg, _ = load(
        [
            "candidate=baseline",
            "+candidate.extra_args.plain=${oc.env:GAUNTLET_TEST_PLAIN}",
            # an unset secret with a default takes the default, as OmegaConf's resolver does
            "+candidate.extra_args.fallback=${oc.env:GAUNTLET_TEST_UNSET_TOKEN,none-given}",
        ]
    )
    assert cfg.candidate.extra_args == {"plain": "plain-value", "fallback": "none-given"}


HOST = HostConfig(name="h", gpu_count=1)
SERVICE = ServiceConfig(model="m", served_model_name="m")


@pytest.mark.parametrize(
    "candidate",
    [
        CandidateConfig(name="c", extra_args={"hf-token": "<from $HF_TOKEN>"}),
        CandidateConfig(name="c", sim_args={"x": "a<from $HF_TOKEN>"}),
    ],
)
def test_a_spec_refuses_a_command_line_that_would_carry_a_secret(candidate: CandidateConfig) -> None:
    sim = HostConfig(name="s", kind="sim", gpu_count=1)
    with pytest.raises(SpecError, match=r"command line would carry the value of \$HF_TOKEN"):
        render_spec(SERVICE, candidate, sim)


def test_a_secret_named_variable_may_take_its_value_from_the_environment() -> None:
    spec = render_spec(SERVICE, CandidateConfig(name="c", env={"HF_TOKEN": "<from $HF_TOKEN>"}), HOST)
    assert child_env(spec, {"HF_TOKEN": TOKEN})["HF_TOKEN"] == TOKEN
    with pytest.raises(SpecError, match="HF_TOKEN looks like a secret"):
        render_spec(SERVICE, CandidateConfig(name="c", env={"HF_TOKEN": "x<from $HF_TOKEN>"}), HOST)


def test_a_variable_missing_at_launch_is_refused_naming_it() -> None:
    spec = render_spec(SERVICE, CandidateConfig(name="c", env={"MY_AUTH": "<from $HF_TOKEN>"}), HOST)
    with pytest.raises(LaunchError, match=r"MY_AUTH takes its value from \$HF_TOKEN, which is not set"):
        child_env(spec, {"PATH": "/bin"})
