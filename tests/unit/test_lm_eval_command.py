"""``python -m orchestrator.lm_eval``: both sides run, judged, the verdict written, the exit code said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import HarnessError, LoadError
from contracts.layout_lmeval import LmEvalOutPaths
from contracts.lmeval import LmEvalDoc, LmEvalRun
from contracts.lmeval_profile import LmEvalProfile
from orchestrator.lm_eval import main


def _fake(rights: dict[str, list[bool]], error: Exception | None = None) -> Any:
    calls: list[tuple[str, str]] = []

    def run(url: str, model: str, profile: LmEvalProfile, *, candidate: str, out_dir: Path,
            python: str | None) -> LmEvalRun:  # fmt: skip
        calls.append((candidate, url))
        if error is not None and candidate == "candidate":
            raise error
        docs = [
            LmEvalDoc(task="gsm8k", doc_id=i, doc_hash=str(i), filter="none", metric="exact_match",
                      score=float(r), target="1", response="1")
            for i, r in enumerate(rights[candidate])
        ]  # fmt: skip
        return LmEvalRun(profile=profile.name, candidate=candidate, base_url=url, model=model, argv=[],
                         tasks=profile.tasks, docs=docs, wall_s=1.0)  # fmt: skip

    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize(
    ("candidate", "error", "code", "status"),
    [
        ([True] * 30, None, 0, "pass"),
        ([False] * 30, None, 1, "fail"),
        ([True] * 10, None, 8, "not_run"),
        ([True] * 30, LoadError("lm_eval profile 'gsm': the server failed"), 5, None),
        ([True] * 30, HarnessError("lm_eval profile 'gsm': lm-eval is not installed"), 5, None),
    ],
    ids=["pass", "fail", "not-paired", "server", "harness"],
)
def test_both_sides_are_run_and_judged(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    candidate: list[bool],
    error: Exception | None,
    code: int,
    status: str | None,
) -> None:
    profile = tmp_path / "gsm.yaml"
    profile.write_text("kind: lm_eval\nname: gsm\ntasks: [gsm8k]\n")
    run = _fake({"baseline": [True] * 30, "candidate": candidate}, error)
    argv = [str(profile), "--baseline", "http://b:1", "--candidate", "http://c:1", "--model", "m",
            "--out", str(tmp_path / "out"), "--tolerance", "0.15"]  # fmt: skip
    # 30 documents can show non-inferiority at 15 points (upper bound 11.3 with none lost), not at 2
    assert main(argv, run=run) == code
    assert run.calls == [("baseline", "http://b:1"), ("candidate", "http://c:1")]
    verdict = LmEvalOutPaths(tmp_path / "out").verdict
    if status is None:
        assert not verdict.exists() and "'gsm'" in capsys.readouterr().err
    else:
        assert json.loads(verdict.read_text())["status"] == status
        assert f"answer_accuracy: {status.upper()}" in capsys.readouterr().out


def test_a_bad_profile_starts_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "gsm.yaml"
    profile.write_text("kind: lm_eval\nname: gsm\ntasks: []\n")
    run = _fake({})
    assert main([str(profile), "--baseline", "b", "--candidate", "c", "--model", "m"], run=run) == 2
    assert run.calls == [] and f"{profile}: tasks = []" in capsys.readouterr().err
