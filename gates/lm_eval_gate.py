"""The ``lm_eval_accuracy`` gate: a sweep's lm_eval profiles, each judged by the accuracy gate's rule.

Pipeline position: reads each launch's lm_eval runs (:class:`contracts.sweepdir.Results`' ``lm_eval``:
per profile, lm-eval's per-document scores or why it left none, :mod:`contracts.lmeval_sweep`) of the
baseline and one candidate, and judges every profile the baseline ran with
:func:`gates.lm_eval_accuracy.judge_lm_eval` (documents paired by task and ``doc_id``, non-inferiority
against ``gates.accuracy.tolerance``). :func:`lm_eval_result` is pure: a table of outcomes in, one
:class:`~contracts.verdicts.GateResult` out.

A run lm-eval could not score (lm-eval missing, a task it cannot find, its crash, a run past its
``timeout_s``; or the server failing its requests) is no evidence against the candidate: the gate is
``not_run`` naming the profile and the side, and the verdict is incomplete, never a reject. A sweep with
no lm_eval profile (``lm_eval.profiles`` empty) has nothing to judge by design (``not_applicable``).
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts.lmeval_sweep import LmEvalFailure, LmEvalOutcome
from contracts.schema import GatesConfig
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.lm_eval_accuracy import judge_lm_eval
from gates.registry import Gate, GateContext, register

#: When profiles disagree, the gate's status is the first of these any profile has: a measured loss is a
#: finding whatever else is missing; a profile not judged leaves the verdict incomplete.
PRECEDENCE: tuple[GateStatus, ...] = ("fail", "not_run", "inconclusive", "pass")
#: Why the gate has nothing to judge in a sweep that ran no lm_eval profile.
NOT_ASKED = "the sweep ran no lm_eval profile (lm_eval.profiles)"

_FAULT_WORDS = {"harness": "lm-eval's or the machine's fault, not the candidate's", "server": "the server's"}


def _failed(profile: str, side: str, failure: LmEvalFailure) -> str:
    return (
        f"lm_eval profile {profile!r}: lm-eval left no scores on the {side} ({_FAULT_WORDS[failure.fault]}): "
        f"{failure.message.splitlines()[0] if failure.message else '-'}"
    )


def _one(
    profile: str, base: LmEvalOutcome | None, cand: LmEvalOutcome | None, cfg: GatesConfig, gate: Gate
) -> tuple[GateStatus, str, list[Comparison], GateResult | None]:
    """One profile's status, words, comparisons and (when judged) the accuracy rule's full result."""
    if isinstance(base, LmEvalFailure):
        return "not_run", _failed(profile, "baseline", base), [], None
    if isinstance(cand, LmEvalFailure):
        return "not_run", _failed(profile, "candidate", cand), [], None
    if base is None or cand is None:
        side = "baseline" if base is None else "candidate"
        return (
            "not_run",
            f"lm_eval profile {profile!r}: the {side} has no lm-eval run (its server was lost or the sweep "
            "stopped before it ran)",
            [],
            None,
        )
    judged = judge_lm_eval(base, cand, cfg, gate=gate)
    return judged.status, judged.message, list(judged.comparisons), judged


def lm_eval_result(
    baseline: Mapping[str, LmEvalOutcome],
    candidate: Mapping[str, LmEvalOutcome],
    cfg: GatesConfig,
    gate: Gate,
) -> GateResult:
    """The gate's result on every lm_eval profile of either side (pure)."""

    def result(status: GateStatus, message: str, **fields: object) -> GateResult:
        return GateResult.model_validate(
            {"gate": gate.name, "failure": gate.failure, "role": gate.role, "status": status,
             "message": message, **fields}
        )  # fmt: skip

    if not baseline and not candidate:
        return result("not_run", f"not run: {NOT_ASKED}", not_applicable=NOT_ASKED)
    outcomes = [
        _one(profile, baseline.get(profile), candidate.get(profile), cfg, gate)
        for profile in sorted({*baseline, *candidate})
    ]
    status = next(s for s in PRECEDENCE if any(o[0] == s for o in outcomes))
    if len(outcomes) == 1 and outcomes[0][3] is not None:
        return outcomes[0][3]  # one profile judged: the accuracy rule's result as it is
    return result(
        status,
        "; ".join(o[1] for o in outcomes),
        comparisons=[c for o in outcomes for c in o[2]],
    )


@register
class LmEvalAccuracy(Gate):
    """Answer accuracy on lm-eval's tasks: each lm_eval profile's documents, paired, non-inferiority."""

    name = "lm_eval_accuracy"
    order = 36  # beside answer_accuracy (35): the same requirement on lm-eval's documents
    requirement = "answer accuracy on lm-eval-harness tasks (lm_eval profiles)"
    failure = "answer accuracy (lm-eval)"

    def evaluate(self, ctx: GateContext) -> GateResult:
        return lm_eval_result(ctx.baseline.lm_eval, ctx.candidate.lm_eval, ctx.cfg, self)
