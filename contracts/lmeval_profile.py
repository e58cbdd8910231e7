"""An ``lm_eval`` profile: the lm-eval-harness tasks run against each server, typed and validated.

Pipeline position: read from its YAML file before anything starts (``python -m orchestrator.lm_eval``,
:func:`read_profile`); the load stage runs it (:mod:`load.lm_eval`) and the accuracy gate judges the two
sides' documents (:mod:`gates.lm_eval_accuracy`). A bad field is a :class:`~contracts.errors.ConfigError`
naming the file, the field, the value and what is allowed, all problems at once::

    kind: lm_eval
    name: gsm8k
    tasks: [gsm8k]              # lm-eval task names, or local task YAML files (relative to this file)
    model: local-completions    # or local-chat-completions
    tokenizer: models/tiny-random
    limit: 200
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts.errors import ConfigError, ConfigProblem

#: The kind field's one value: what tells this file from a load profile.
LM_EVAL_KIND = "lm_eval"
#: lm-eval's OpenAI-compatible models and the endpoint path each one calls.
MODEL_ENDPOINTS: dict[str, str] = {
    "local-completions": "/v1/completions",
    "local-chat-completions": "/v1/chat/completions",
}
#: A task name lm-eval resolves itself (gsm8k, mmlu_pro, leaderboard_math_hard, ...).
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_LOCAL_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LocalTask:
    """A task defined by a YAML file the user has: its name (the file's ``task``) and folder."""

    name: str
    folder: Path  # lm-eval's --include_path, and its working directory (relative data_files resolve here)


@dataclass(frozen=True)
class LmEvalProfile:
    """One ``lm_eval`` profile (fields as in its YAML file; docs/lm-eval.md)."""

    name: str  # the profile's name: the run's folder and the messages name it
    tasks: list[str]  # what lm-eval runs: its task names and the local tasks' names, in the file's order
    local: list[LocalTask] = field(default_factory=list)  # the local tasks among them
    model: str = "local-completions"  # lm-eval's model: local-completions or local-chat-completions
    # local-completions' tokenizer: a folder (relative to the profile's file) or a hub id; None: the
    # served model name
    tokenizer: str | None = None
    metric: str = "exact_match"  # the per-document metric paired (0/1: exact_match, acc)
    filter: str | None = None  # lm-eval's filter scored (strict-match, ...); None: the task's first
    limit: int | None = None  # documents per task (lm-eval's --limit); None: all
    num_fewshot: int | None = None  # lm-eval's --num_fewshot; None: the task's own
    num_concurrent: int = 1  # requests lm-eval keeps in flight
    max_gen_toks: int | None = None  # output token budget per document; None: the task's own
    timeout_s: float = 3600.0  # the longest one lm-eval run may take, in seconds (then: a harness error)
    python: str | None = None  # the interpreter with lm-eval installed; None: the one running gauntlet
    offline: bool = False  # HF_DATASETS_OFFLINE=1 and HF_HUB_OFFLINE=1: no hub download (local tasks)
    source: str = ""  # the file it was read from


_FIELDS = {
    "kind",
    "name",
    "tasks",
    "model",
    "tokenizer",
    "metric",
    "filter",
    "limit",
    "num_fewshot",
    "num_concurrent",
    "max_gen_toks",
    "timeout_s",
    "python",
    "offline",
}


def _positive_int(raw: Mapping[str, Any], key: str, where: str, problems: list[ConfigProblem]) -> None:
    value = raw.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        problems.append(ConfigProblem(where, key, value, "a whole number of at least 1, or null"))


def _local_task(path: Path, where: str, problems: list[ConfigProblem]) -> LocalTask | None:
    """The local task a YAML file defines (its ``task`` key), or None with the problem said."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        problems.append(ConfigProblem(where, "tasks", str(path), f"a readable lm-eval task YAML ({exc})"))
        return None
    name = data.get("task") if isinstance(data, dict) else None
    if not isinstance(name, str) or not _TASK_NAME.match(name):
        problems.append(
            ConfigProblem(where, "tasks", str(path), "an lm-eval task YAML with a 'task: NAME' key")
        )
        return None
    return LocalTask(name=name, folder=path.parent.resolve())


def _tasks(
    raw: Mapping[str, Any], base: Path, where: str, problems: list[ConfigProblem]
) -> tuple[list[str], list[LocalTask]]:
    tasks = raw.get("tasks")
    allowed = "a non-empty list of lm-eval task names (gsm8k, mmlu_pro) or local task YAML files"
    if not isinstance(tasks, list) or not tasks:
        problems.append(ConfigProblem(where, "tasks", tasks, allowed))
        return [], []
    names: list[str] = []
    local: list[LocalTask] = []
    for entry in tasks:
        if not isinstance(entry, str):
            problems.append(ConfigProblem(where, "tasks", entry, allowed))
        elif entry.endswith(_LOCAL_SUFFIXES):
            path = Path(entry) if Path(entry).is_absolute() else base / entry
            if not path.is_file():
                problems.append(
                    ConfigProblem(where, "tasks", entry, f"an existing task YAML ({path} is not)")
                )
            elif (task := _local_task(path, where, problems)) is not None:
                names.append(task.name)
                local.append(task)
        elif _TASK_NAME.match(entry):
            names.append(entry)
        else:
            problems.append(ConfigProblem(where, "tasks", entry, allowed))
    if len({t.folder for t in local}) > 1:
        folders = ", ".join(sorted(str(t.folder) for t in local))
        problems.append(
            ConfigProblem(
                where, "tasks", folders, "local task YAML files in one folder (lm-eval's include path)"
            )
        )
    if len(set(names)) != len(names):
        problems.append(ConfigProblem(where, "tasks", names, "each task once"))
    return names, local


def profile_problems(raw: object, where: str, base: Path) -> tuple[LmEvalProfile | None, list[ConfigProblem]]:
    """The typed profile of a mapping read from ``where`` (local task paths relative to ``base``), or
    None, and every problem found (pure apart from reading the local task files)."""
    if not isinstance(raw, Mapping):
        return None, [ConfigProblem(where, "(file)", type(raw).__name__, "a mapping of the profile's fields")]
    problems = [
        ConfigProblem(where, key, raw[key], f"one of the profile's fields: {', '.join(sorted(_FIELDS))}")
        for key in raw
        if key not in _FIELDS
    ]
    if raw.get("kind") != LM_EVAL_KIND:
        problems.append(ConfigProblem(where, "kind", raw.get("kind"), f"{LM_EVAL_KIND!r}"))
    name = raw.get("name")
    if not isinstance(name, str) or not _TASK_NAME.match(name):
        problems.append(ConfigProblem(where, "name", name, "a name of letters, digits, '_', '-', '.'"))
    names, local = _tasks(raw, base, where, problems)
    model = raw.get("model", "local-completions")
    if model not in MODEL_ENDPOINTS:
        problems.append(ConfigProblem(where, "model", model, f"one of {', '.join(MODEL_ENDPOINTS)}"))
    for key in ("tokenizer", "filter", "python"):
        if raw.get(key) is not None and (not isinstance(raw[key], str) or not raw[key]):
            problems.append(ConfigProblem(where, key, raw[key], "a non-empty string, or null"))
    metric = raw.get("metric", "exact_match")
    if not isinstance(metric, str) or not metric:
        problems.append(
            ConfigProblem(where, "metric", metric, "a per-document 0/1 metric (exact_match, acc)")
        )
    for key in ("limit", "num_concurrent", "max_gen_toks"):
        _positive_int(raw, key, where, problems)
    fewshot = raw.get("num_fewshot")
    if fewshot is not None and (isinstance(fewshot, bool) or not isinstance(fewshot, int) or fewshot < 0):
        problems.append(ConfigProblem(where, "num_fewshot", fewshot, "a whole number of at least 0, or null"))
    timeout = raw.get("timeout_s", 3600.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(ConfigProblem(where, "timeout_s", timeout, "seconds, a number above 0"))
    offline = raw.get("offline", False)
    if not isinstance(offline, bool):
        problems.append(ConfigProblem(where, "offline", offline, "true or false"))
    if problems:
        return None, problems
    python, tokenizer = raw.get("python"), raw.get("tokenizer")
    if tokenizer is not None and not Path(tokenizer).is_absolute() and (base / tokenizer).exists():
        tokenizer = str((base / tokenizer).resolve())  # a folder beside the profile; else a hub id
    return LmEvalProfile(
        name=str(name),
        tasks=names,
        local=local,
        model=str(model),
        tokenizer=tokenizer,
        metric=str(metric),
        filter=raw.get("filter"),
        limit=raw.get("limit"),
        num_fewshot=fewshot,
        num_concurrent=int(raw.get("num_concurrent") or 1),
        max_gen_toks=raw.get("max_gen_toks"),
        timeout_s=float(timeout),
        python=python if python is None or Path(python).is_absolute() else str(base / python),
        offline=bool(offline),
        source=where,
    ), []


def read_profile(path: Path) -> LmEvalProfile:
    """The ``lm_eval`` profile in ``path`` (local tasks relative to its folder), or a ConfigError listing
    every problem."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            [ConfigProblem(str(path), "(file)", str(path), f"a readable YAML file ({exc})")]
        ) from exc
    profile, problems = profile_problems(raw, str(path), path.parent)
    if profile is None:
        raise ConfigError(problems)
    return profile
