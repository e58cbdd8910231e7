"""The lm_eval workload's folders: what one lm-eval run leaves, and what the command writes around them.

Pipeline position: the layout's part for the lm_eval workload (as :mod:`contracts.layout_search` is the
search's): every name below comes from here, read as the typed paths' attributes
(``LmEvalPaths(out).record``), so the load stage that writes a run and the command that reads it cannot
disagree on a name::

    OUT/                              python -m orchestrator.lm_eval ... --out OUT
    ├── lm_eval_verdict.json          the accuracy gate's result (a GateResult)
    └── <side>/<profile>/             one run against one server (LmEvalPaths)
        ├── lm_eval.json              the run's record: every document's score (contracts.lmeval.LmEvalRun)
        ├── lm_eval.log               lm-eval's output
        └── lm_eval_output/           lm-eval's --output_path: results_<date>.json and, in a folder named
                                      for the model, samples_<task>_<date>.jsonl (--log_samples)

In a sweep (``lm_eval.profiles``, :mod:`contracts.lmeval_sweep`) each launch measured keeps its runs in its
own folder (``launch_lm_eval``)::

    candidates/<name>/lm_eval/<profile>/
        ├── lm_eval.json              as above; or, when lm-eval left no scores:
        ├── lm_eval_error.json        whose fault and lm-eval's words (contracts.lmeval_sweep.LmEvalFailure)
        ├── lm_eval.log
        └── lm_eval_output/
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The record of one lm-eval run, in its folder.
LM_EVAL_RUN_FILE = "lm_eval.json"
#: lm-eval's own output (stdout and stderr), in the run's folder.
LM_EVAL_LOG = "lm_eval.log"
#: lm-eval's ``--output_path``, in the run's folder.
LM_EVAL_OUTPUT_DIR = "lm_eval_output"
#: A run that left no scores: whose fault and why, in the run's folder (a sweep's launch).
LM_EVAL_ERROR_FILE = "lm_eval_error.json"
#: A launch's lm_eval runs, one folder per profile, in the launch's folder.
LM_EVAL_RUNS_DIR = "lm_eval"
#: The accuracy gate's result on the two sides, in the command's output folder.
LM_EVAL_VERDICT_FILE = "lm_eval_verdict.json"


@dataclass(frozen=True)
class LmEvalPaths:
    """One lm-eval run's folder."""

    root: Path

    @property
    def record(self) -> Path:
        return self.root / LM_EVAL_RUN_FILE

    @property
    def log(self) -> Path:
        return self.root / LM_EVAL_LOG

    @property
    def output(self) -> Path:
        return self.root / LM_EVAL_OUTPUT_DIR

    @property
    def error(self) -> Path:
        return self.root / LM_EVAL_ERROR_FILE


def launch_lm_eval_root(launch_root: Path) -> Path:
    """A launch's folder of lm_eval runs (``<launch>/lm_eval/``)."""
    return launch_root / LM_EVAL_RUNS_DIR


def lm_eval_paths(launch_root: Path, profile: str) -> LmEvalPaths:
    """One lm_eval profile's run on a launch (``<launch>/lm_eval/<profile>/``)."""
    return LmEvalPaths(launch_lm_eval_root(launch_root) / profile)


@dataclass(frozen=True)
class LmEvalOutPaths:
    """The command's output folder: each side's run, and the verdict."""

    root: Path

    @property
    def verdict(self) -> Path:
        return self.root / LM_EVAL_VERDICT_FILE

    def run(self, side: str, profile: str) -> LmEvalPaths:
        return LmEvalPaths(self.root / side / profile)
