"""An lm_eval profile read from YAML: typed, and every bad field refused with file, field, value, allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ConfigError
from contracts.lmeval_profile import LmEvalProfile, profile_problems, read_profile

TASK_YAML = "task: tiny\ndataset_path: json\noutput_type: generate_until\n"


def _base(**fields: Any) -> dict[str, Any]:
    return {"kind": "lm_eval", "name": "acc", "tasks": ["gsm8k"], **fields}


@pytest.mark.parametrize(
    ("fields", "field", "allowed"),
    [
        ({"kind": "load"}, "kind", "'lm_eval'"),
        ({"name": "a b"}, "name", "letters, digits"),
        ({"tasks": []}, "tasks", "non-empty list"),
        ({"tasks": "gsm8k"}, "tasks", "non-empty list"),
        ({"tasks": ["gsm 8k"]}, "tasks", "task names"),
        ({"tasks": ["missing.yaml"]}, "tasks", "an existing task YAML"),
        ({"tasks": ["notask.yaml"]}, "tasks", "'task: NAME' key"),
        ({"tasks": ["gsm8k", "gsm8k"]}, "tasks", "each task once"),
        ({"model": "hf"}, "model", "local-completions, local-chat-completions"),
        ({"limit": 0}, "limit", "at least 1"),
        ({"limit": True}, "limit", "at least 1"),
        ({"num_concurrent": 2.5}, "num_concurrent", "at least 1"),
        ({"num_fewshot": -1}, "num_fewshot", "at least 0"),
        ({"timeout_s": 0}, "timeout_s", "above 0"),
        ({"offline": "yes"}, "offline", "true or false"),
        ({"metric": ""}, "metric", "0/1 metric"),
        ({"tokenizer": ""}, "tokenizer", "non-empty string"),
        ({"max_tokens": 5}, "max_tokens", "one of the profile's fields"),
    ],
    ids=["kind", "name", "no-tasks", "tasks-not-list", "bad-name", "missing-yaml", "yaml-without-task",
         "twice", "model", "limit-0", "limit-bool", "concurrency-float", "fewshot", "timeout", "offline",
         "metric", "tokenizer", "unknown-field"],
)  # fmt: skip
def test_a_bad_field_is_named_with_its_value_and_what_is_allowed(
    tmp_path: Path, fields: dict[str, Any], field: str, allowed: str
) -> None:
    (tmp_path / "notask.yaml").write_text("dataset_path: json\n")
    profile, problems = profile_problems(_base(**fields), "conf/lm.yaml", tmp_path)
    assert profile is None
    assert [p.field for p in problems] == [field], problems
    assert allowed in problems[0].allowed and problems[0].file == "conf/lm.yaml"


@pytest.mark.parametrize(
    ("fields", "tasks", "local", "offline"),
    [
        ({}, ["gsm8k"], 0, False),
        ({"tasks": ["gsm8k", "mmlu_pro"]}, ["gsm8k", "mmlu_pro"], 0, False),
        ({"tasks": ["tasks/tiny.yaml"], "offline": True}, ["tiny"], 1, True),
        ({"tasks": ["gsm8k", "tasks/tiny.yaml"]}, ["gsm8k", "tiny"], 1, False),
    ],
    ids=["hub-task", "two-hub-tasks", "local", "mixed"],
)
def test_a_good_profile_is_typed(
    tmp_path: Path, fields: dict[str, Any], tasks: list[str], local: int, offline: bool
) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tiny.yaml").write_text(TASK_YAML)
    profile, problems = profile_problems(_base(**fields), "p.yaml", tmp_path)
    assert problems == [] and isinstance(profile, LmEvalProfile)
    assert profile.tasks == tasks and len(profile.local) == local and profile.offline is offline
    assert all(t.folder == (tmp_path / "tasks").resolve() for t in profile.local)


def test_read_profile_lists_every_problem_in_one_error(tmp_path: Path) -> None:
    path = tmp_path / "lm.yaml"
    path.write_text("kind: lm_eval\nname: acc\ntasks: []\nmodel: hf\n")
    with pytest.raises(ConfigError) as info:
        read_profile(path)
    text = str(info.value)
    assert "2 problems" in text and f"{path}: tasks = []" in text and f"{path}: model = 'hf'" in text


def test_local_tasks_in_two_folders_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{folder}.yaml").write_text(TASK_YAML.replace("tiny", folder))
    _, problems = profile_problems(_base(tasks=["a/a.yaml", "b/b.yaml"]), "p.yaml", tmp_path)
    assert [p.field for p in problems] == ["tasks"] and "in one folder" in problems[0].allowed


def test_a_relative_python_is_read_from_the_profiles_folder(tmp_path: Path) -> None:
    profile, _ = profile_problems(_base(python=".venv-vllm/bin/python"), "p.yaml", tmp_path)
    assert profile is not None and profile.python == str(tmp_path / ".venv-vllm/bin/python")


@pytest.mark.parametrize(
    ("path", "tasks", "local"),
    [
        ("examples/lm_eval/gsm8k.yaml", ["gsm8k"], False),
        ("tests/e2e/lm_eval_task/profile.yaml", ["gauntlet_tiny"], True),
    ],
)
def test_the_shipped_profiles_read(path: str, tasks: list[str], local: bool) -> None:
    profile = read_profile(Path(__file__).resolve().parents[2] / path)
    assert profile.tasks == tasks and bool(profile.local) is local


@pytest.mark.parametrize(
    ("tokenizer", "expected"),
    [("models/t", "{base}/models/t"), ("org/hub-model", "org/hub-model"), ("/abs/t", "/abs/t")],
    ids=["folder-beside", "hub-id", "absolute"],
)
def test_a_tokenizer_folder_is_read_from_the_profiles_folder(
    tmp_path: Path, tokenizer: str, expected: str
) -> None:
    (tmp_path / "models" / "t").mkdir(parents=True)
    profile, _ = profile_problems(_base(tokenizer=tokenizer), "p.yaml", tmp_path)
    assert profile is not None and profile.tokenizer == expected.format(base=tmp_path.resolve())
