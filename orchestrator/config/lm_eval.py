"""The ``lm_eval`` section of a sweep's configuration, checked before anything starts.

Pipeline position: called by :func:`orchestrator.config.validate.validate` with the rest of the
configuration's checks: every file of ``lm_eval.profiles`` is read and validated as an ``lm_eval`` profile
(:func:`contracts.lmeval_profile.profile_problems`: each problem names the file, the field, the value and
what is allowed), their names are unique, ``lm_eval.python`` is an interpreter that exists, and no load
profile the sweep runs is named as the launch's lm_eval folder. Whether that interpreter has lm-eval is
found when it runs (a harness error naming ``lm_eval.python``, the verdict incomplete).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import yaml

from contracts.errors import ConfigProblem
from contracts.layout_lmeval import LM_EVAL_RUNS_DIR
from contracts.lmeval_profile import profile_problems
from contracts.schema import GauntletConfig


def lm_eval_problems(cfg: GauntletConfig, where: Callable[[str], str]) -> list[ConfigProblem]:
    """Every problem of ``cfg.lm_eval`` (paths relative to the current directory); ``where(dotted)``: the
    file or override that set a top-level value."""
    section, problems = cfg.lm_eval, []
    names: dict[str, str] = {}
    for file in section.profiles:
        path = Path(file)
        if not path.is_file():
            allowed = f"an lm_eval profile's YAML file ({path.absolute()} is not a file)"
            problems.append(ConfigProblem(where("lm_eval.profiles"), "lm_eval.profiles", file, allowed))
            continue
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            allowed = f"a readable YAML file ({exc})"
            problems.append(ConfigProblem(where("lm_eval.profiles"), "lm_eval.profiles", file, allowed))
            continue
        profile, found = profile_problems(raw, file, path.parent)
        problems.extend(found)
        if profile is not None and profile.name in names:
            allowed = f"profiles of distinct names ({names[profile.name]} is named {profile.name!r} too)"
            problems.append(ConfigProblem(file, "name", profile.name, allowed))
        elif profile is not None:
            names[profile.name] = file
    python = section.python
    if python is not None and not (Path(python).is_file() and os.access(python, os.X_OK)):
        allowed = "an interpreter with lm-eval (an executable file, e.g. .venv-vllm/bin/python), or null"
        problems.append(ConfigProblem(where("lm_eval.python"), "lm_eval.python", python, allowed))
    if section.profiles and LM_EVAL_RUNS_DIR in cfg.run.profiles:
        allowed = f"a load profile not named {LM_EVAL_RUNS_DIR!r} (a launch's lm_eval runs have that folder)"
        problems.append(ConfigProblem(where("run.profiles"), "run.profiles", LM_EVAL_RUNS_DIR, allowed))
    return problems
