"""An ``lm_eval`` profile inside a sweep, on the simulator: run against the baseline's and the candidate's
launched servers, its per-document scores written to each launch's folder, judged by the
``lm_eval_accuracy`` gate, shown in verdicts.json and the report; an lm-eval that cannot run leaves the
candidate INCOMPLETE naming the profile, never REJECT.

lm-eval itself needs torch and datasets; here its stand-in (``lm_eval_sim/fake_lm_eval.py``) takes the same
command line, asks the simulator's chat endpoint every document of the local task and writes lm-eval
0.4.x's samples file. The simulator answers the arithmetic items by its stated model: greedy decoding right
on 90%, probabilistic draft sampling wrong on a further 25% (docs/simulator.md, "Labelled items").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from contracts.layout_lmeval import lm_eval_paths
from contracts.lmeval import LmEvalRun
from contracts.lmeval_sweep import LmEvalFailure
from tests.integration import sweep_helpers as h

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "lm_eval_sim"
PROFILE = (HERE / "profile.yaml").relative_to(h.ROOT)


def _interpreter(tmp_path: Path, body: str) -> Path:
    """An executable standing for lm_eval.python (the sweep runs it as ``PY -m lm_eval ...``)."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _sweep(tmp_path: Path, port: int, python: Path) -> tuple[int, str, Path]:
    return h.run_sweep(
        [
            "-m",
            "candidate=spec_probabilistic",
            f"lm_eval.profiles=[{PROFILE}]",
            f"lm_eval.python={python}",
            "gates.enabled=[lm_eval_accuracy]",
            "run.interleave=false",
            "run.retained_after_sweep=stop",
        ],
        sweeps=tmp_path / "sweeps",
        port=port,
    )


def _verdict(sweep: Path, name: str) -> dict[str, object]:
    verdicts = json.loads((sweep / "verdicts.json").read_text())["verdicts"]
    (found,) = [v for v in verdicts if v["candidate"] == name]
    return dict(found)


def _gate(verdict: dict[str, object]) -> dict[str, object]:
    gates = verdict["gates"]
    assert isinstance(gates, list)
    (gate,) = [g for g in gates if g["gate"] == "lm_eval_accuracy"]
    return dict(gate)


def test_lm_eval_profile_in_a_sweep_is_judged_by_the_accuracy_rule(tmp_path: Path, port: int) -> None:
    fake = _interpreter(tmp_path, f'exec {sys.executable} {HERE / "fake_lm_eval.py"} "$@"')
    code, out, sweep = _sweep(tmp_path, port, fake)
    assert code == 0, out[-3000:]
    runs = {
        name: LmEvalRun.read(lm_eval_paths(sweep / "candidates" / name, "arith").record)
        for name in ("baseline", "spec_probabilistic")
    }
    assert {len(r.docs) for r in runs.values()} == {40}
    right = {name: sum(d.right for d in r.docs) for name, r in runs.items()}
    assert right["spec_probabilistic"] < right["baseline"] - 4, right
    verdict = _verdict(sweep, "spec_probabilistic")
    gate = _gate(verdict)
    assert (verdict["decision"], gate["status"]) == ("reject", "fail"), gate["message"]
    assert "lm_eval profile 'arith'" in str(gate["message"])
    report = (sweep / "report.md").read_text()
    assert "answer accuracy (lm-eval)" in report and "lm_eval profile 'arith'" in report


def test_lm_eval_that_cannot_run_leaves_the_candidate_incomplete(tmp_path: Path, port: int) -> None:
    missing = _interpreter(tmp_path, 'echo "$0: No module named lm_eval" >&2; exit 1')
    code, out, sweep = _sweep(tmp_path, port, missing)
    assert code == 8, out[-3000:]
    failure = LmEvalFailure.read(lm_eval_paths(sweep / "candidates" / "spec_probabilistic", "arith").error)
    assert failure.fault == "harness" and "lm_eval.python" in failure.message, failure
    verdict = _verdict(sweep, "spec_probabilistic")
    gate = _gate(verdict)
    assert (verdict["decision"], gate["status"]) == ("incomplete", "not_run"), gate["message"]
    assert "lm_eval profile 'arith'" in str(gate["message"]) and "not the candidate's" in str(gate["message"])
