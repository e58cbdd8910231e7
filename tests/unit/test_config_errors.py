"""The errors a user meets composing a config (issue 22, item 7): every config group's unknown key lists
its allowed keys with a did-you-mean; a value from the command line is blamed on the command line; a
literal secret is shown masked; ports are range-checked. Composed as a sweep composes (``load``)."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError, ConfigProblem
from tests.unit.composed import load

SECRET = "sk-live-4f9a0c3e1b"


@pytest.mark.parametrize(
    ("override", "field", "expected"),
    [
        ("service.prot=1", "service.prot", "(did you mean 'port'?); allowed keys: model, served_model_name"),
        ("run.repeets=3", "run.repeets", "(did you mean 'repeats'?); allowed keys: profiles, repeats"),
        ("gates.confidance=0.9", "gates.confidance", "(did you mean 'confidence'?); allowed keys:"),
        ("capacity.prfile=x", "capacity.prfile", "(did you mean 'profile'?); allowed keys: profile, start"),
        ("host.gpu_cout=8", "host.gpu_cout", "(did you mean 'gpu_count'?); allowed keys:"),
        ("slo.tfft_s=1", "slo.tfft_s", "(did you mean 'ttft_s'?); allowed keys:"),
        ("candidate.max_num_seq=8", "candidate.max_num_seq", "(did you mean 'max_num_seqs'?)"),
        ("workloads.serial.concurency=2", "workloads.serial.concurency", "(did you mean 'concurrency'?)"),
        ("+run.interleve=false", "run.interleve", "(did you mean 'interleave'?); allowed keys:"),
        ("+service.foo=1", "service.foo", "allowed keys: model,"),  # '+' would have dropped it in silence
    ],
)
def test_an_unknown_key_of_any_group_lists_the_allowed_keys_and_blames_the_command_line(
    override: str, field: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(["candidate=baseline", override])
    (problem,) = info.value.problems
    assert problem.file == f"command-line override {override!r}"
    assert problem.field == field
    assert expected in problem.allowed, problem
    assert problem.allowed.split("allowed keys: ")[1].strip(), "the allowed keys are listed"
    assert info.value.hint == "fix the command-line override named above; nothing was started"


@pytest.mark.parametrize("port", [0, -1, 65536, 99999])
def test_a_port_outside_1_to_65535_is_refused(port: int) -> None:
    with pytest.raises(ConfigError) as info:
        load(["candidate=baseline", f"service.port={port}"])
    assert [str(p) for p in info.value.problems] == [
        f"command-line override 'service.port={port}': service.port = {port}: a TCP port, 1..65535"
    ]


@pytest.mark.parametrize("port", [1, 8000, 65535])
def test_a_port_in_range_is_accepted(port: int) -> None:
    cfg, _ = load(["candidate=baseline", f"service.port={port}"])
    assert cfg.service.port == port


@pytest.mark.parametrize("override", [f"service.api_key={SECRET}", f"+service.api_key={SECRET}"])
def test_a_literal_api_key_is_refused_and_never_echoed(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(["candidate=baseline", override])
    text = str(info.value)
    assert SECRET not in text
    assert f"<secret, {len(SECRET)} characters, not shown>" in text
    assert "service.api_key_env" in text


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("service.api_key", SECRET, False),
        ("candidate.extra_args.api-key", SECRET, False),
        ("service.env.HF_TOKEN", SECRET, False),
        ("service.api_key_env", "GAUNTLET_KEY", True),  # a variable's name, not a secret
        ("service.port", "8000", True),
    ],
)
def test_a_problem_masks_the_values_of_secret_fields(field: str, value: str, shown: bool) -> None:
    problem = ConfigProblem(f"command-line override '{field}={value}'", field, value, "something")
    assert (value in str(problem)) is shown


@pytest.mark.parametrize(
    ("files", "hint"),
    [
        (["conf/candidate/x.yaml"], "fix the file named above; nothing was started"),
        (["command-line override 'a=1'"], "fix the command-line override named above; nothing was started"),
        (
            ["conf/candidate/x.yaml", "command-line override 'a=1'"],
            "fix the files and command-line overrides named above; nothing was started",
        ),
    ],
)
def test_the_hint_says_what_to_fix(files: list[str], hint: str) -> None:
    assert ConfigError([ConfigProblem(f, "a", 1, "b") for f in files]).hint == hint
