"""The lm_eval workload inside a sweep: its configuration section, and what each launch's runs left.

Pipeline position: ``lm_eval`` in the composed configuration (:class:`LmEvalConfig`, a field of
:class:`contracts.schema.GauntletConfig`) names ``lm_eval`` profiles (their YAML files,
:mod:`contracts.lmeval_profile`) that the sweep runs once against every launched server it measures (the
baseline and each candidate, after their load profiles: :mod:`orchestrator.measure.lm_eval_runs`). Each
run leaves, in the launch's folder (:func:`contracts.layout_lmeval.launch_lm_eval`), its record
(:class:`contracts.lmeval.LmEvalRun`) or, when lm-eval could not score the server, an
:class:`LmEvalFailure`; :func:`read_launch_lm_eval` reads them back for the gates
(:class:`contracts.sweepdir.Results`' ``lm_eval``), validated on read::

    lm_eval:
      profiles: [examples/lm_eval/gsm8k.yaml]    # relative to the directory the sweep starts in
      python: .venv-vllm/bin/python              # the interpreter with lm-eval installed
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from contracts.errors import ResultFileError
from contracts.layout_lmeval import launch_lm_eval_root, lm_eval_paths
from contracts.lmeval import LmEvalRun


@dataclass
class LmEvalConfig:
    """The sweep's ``lm_eval`` profiles and the interpreter that runs lm-eval (docs/lm-eval.md)."""

    # lm_eval profiles (YAML files, kind: lm_eval), run once against the baseline's and each candidate's
    # server after their load profiles and judged by the lm_eval_accuracy gate; relative paths: to the
    # directory the sweep starts in. Empty: none.
    profiles: list[str] = field(default_factory=list)
    # The interpreter with lm-eval installed (the vLLM environment's: .venv-vllm/bin/python); null: each
    # profile's own `python`, else the one running gauntlet (which usually lacks lm-eval).
    python: str | None = None


#: Whose fault a failed lm-eval run was (:mod:`load.lm_eval`): lm-eval's or the machine's, or the server's.
Fault = Literal["harness", "server"]


class LmEvalFailure(BaseModel):
    """An lm-eval run that left no scores: the profile, the side, whose fault and lm-eval's words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str
    candidate: str
    fault: Fault
    message: str  # the error, naming the profile, its file, the side and the tasks
    evidence: list[str] = []  # the last lines of lm-eval's output

    def write(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> LmEvalFailure:
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValidationError) as exc:
            raise ResultFileError(f"{path}: not a readable lm-eval failure record: {exc}") from exc


#: One lm_eval profile's outcome on one launch: its scores, or why there are none.
LmEvalOutcome = LmEvalRun | LmEvalFailure


def read_launch_lm_eval(launch_root: Path) -> dict[str, LmEvalOutcome]:
    """Profile name -> its run's record or failure, for every lm_eval run below a launch's folder (none:
    an empty mapping). A folder with both files holds the record (a later run that succeeded)."""
    root = launch_lm_eval_root(launch_root)
    found: dict[str, LmEvalOutcome] = {}
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        paths = lm_eval_paths(launch_root, folder.name)
        if paths.record.exists():
            found[folder.name] = LmEvalRun.read(paths.record)
        elif paths.error.exists():
            found[folder.name] = LmEvalFailure.read(paths.error)
    return found
