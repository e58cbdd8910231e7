"""The accuracy gate on an lm-eval workload: the two sides' documents paired by task and ``doc_id``.

Pipeline position: reads two :class:`~contracts.lmeval.LmEvalRun` records (``lm_eval.json``, one per
side, :mod:`load.lm_eval`) and judges them as the ``answer_accuracy`` gate judges a labelled set
(:mod:`gates.answer_accuracy`): each document right or wrong on each side, the drop's Tango score interval
on the paired documents (:func:`gates.noninferiority.paired_drop`) decided by the gate's own
non-inferiority rule (:func:`gates.answer_accuracy.accuracy_status`) against ``gates.accuracy.tolerance``,
McNemar's exact p on the discordant ones said beside it (:func:`gates.significance.mcnemar`); fewer than
``gates.accuracy.min_items`` documents is ``not_run``. The result carries the gate's name: it is the
accuracy gate's verdict on this workload, not a second gate.

Two runs pair only on the same documents: a document one side has and the other lacks, or one whose
``doc_hash`` differs (another dataset revision), makes the comparison ``not_run`` naming it (the runs are
not comparable; run both with the same profile).

In a sweep the same judgement is the ``lm_eval_accuracy`` gate's (:mod:`gates.lm_eval_gate`), once per
``lm_eval`` profile the sweep ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.lmeval import LmEvalDoc, LmEvalRun
from contracts.schema import GatesConfig
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.answer_accuracy import AnswerAccuracy, accuracy_status, drop_words
from gates.noninferiority import PairedDrop, paired_drop
from gates.registry import Gate
from gates.significance import clopper_pearson, mcnemar

Key = tuple[str, int]


@dataclass(frozen=True)
class Paired:
    """Each document scored on both sides: (task, doc_id) -> (baseline right, candidate right)."""

    scores: dict[Key, tuple[bool, bool]]

    @property
    def lost(self) -> list[Key]:
        return [k for k, (b, c) in self.scores.items() if b and not c]

    @property
    def won(self) -> list[Key]:
        return [k for k, (b, c) in self.scores.items() if c and not b]


def pair_docs(baseline: Sequence[LmEvalDoc], candidate: Sequence[LmEvalDoc]) -> Paired | str:
    """The documents of both sides paired by (task, doc_id), or why they cannot be (pure)."""
    base = {(d.task, d.doc_id): d for d in baseline}
    cand = {(d.task, d.doc_id): d for d in candidate}
    for side, mine, other in (("candidate", base, cand), ("baseline", cand, base)):
        missing = sorted(set(mine) - set(other))
        if missing:
            shown = ", ".join(f"{t}/{i}" for t, i in missing[:5]) + (" ..." if len(missing) > 5 else "")
            return (
                f"{len(missing)} document(s) scored on one side only, missing for the {side}: {shown}; "
                "run both sides with the same profile (tasks, limit)"
            )
    changed = sorted(
        k
        for k in base
        if None not in (base[k].doc_hash, cand[k].doc_hash) and base[k].doc_hash != cand[k].doc_hash
    )
    if changed:
        task, doc = changed[0]
        return (
            f"{len(changed)} document(s) differ between the sides (doc_hash), first {task}/{doc}: the runs "
            "read different datasets; run both with the same data"
        )
    scorers = {(d.task, d.filter, d.metric) for d in [*baseline, *candidate]}
    per_task: dict[str, set[tuple[str, str]]] = {}
    for task, filt, metric in scorers:
        per_task.setdefault(task, set()).add((filt, metric))
    mixed = sorted(t for t, s in per_task.items() if len(s) > 1)
    if mixed:
        both = sorted(per_task[mixed[0]])
        return f"task {mixed[0]!r} was scored with different filters or metrics on the two sides: {both}"
    return Paired({k: (base[k].right, cand[k].right) for k in sorted(base)})


def _accuracy(k: int, n: int, confidence: float) -> str:
    low, high = clopper_pearson(k, n, confidence)
    return f"{k}/{n} ({k / n:.0%}, {confidence:.0%} exact interval [{low:.0%}, {high:.0%}])"


def _per_task(paired: Paired) -> str:
    tasks = sorted({t for t, _ in paired.scores})
    parts = []
    for task in tasks:
        rows = [v for (t, _), v in paired.scores.items() if t == task]
        parts.append(f"{task} {sum(c for _, c in rows)}/{len(rows)} vs {sum(b for b, _ in rows)}/{len(rows)}")
    return "; ".join(parts)


def paired_decision(paired: Paired, cfg: GatesConfig) -> tuple[GateStatus, PairedDrop]:
    """The accuracy gate's rule on the paired documents: the drop's upper bound against
    ``gates.accuracy.tolerance`` (:func:`gates.answer_accuracy.accuracy_status`, non-inferiority)."""
    drop = paired_drop(len(paired.scores), len(paired.lost), len(paired.won), confidence=cfg.confidence)
    return accuracy_status(drop, cfg.accuracy.tolerance), drop


def judge_lm_eval(
    baseline: LmEvalRun, candidate: LmEvalRun, cfg: GatesConfig, *, gate: Gate | None = None
) -> GateResult:
    """The accuracy gate's result for ``candidate`` against ``baseline`` on one lm_eval profile, under
    ``gate``'s name (default: ``answer_accuracy``'s; in a sweep: ``lm_eval_accuracy``,
    :mod:`gates.lm_eval_gate`)."""
    gate = gate or AnswerAccuracy()
    where = f"lm_eval profile {candidate.profile!r}"

    def result(status: GateStatus, message: str, **fields: object) -> GateResult:
        return GateResult.model_validate(
            {
                "gate": gate.name,
                "failure": gate.failure,
                "role": gate.role,
                "status": status,
                "message": message,
                **fields,
            }
        )

    if baseline.profile != candidate.profile:
        return result("not_run", f"{where}: the baseline ran profile {baseline.profile!r}: not comparable")
    paired = pair_docs(baseline.docs, candidate.docs)
    if isinstance(paired, str):
        return result("not_run", f"{where}: {paired}")
    n = len(paired.scores)
    if n < cfg.accuracy.min_items:
        return result(
            "not_run",
            f"{where}: {n} document(s) scored on both sides: fewer than gates.accuracy.min_items = "
            f"{cfg.accuracy.min_items} (raise the profile's limit)",
        )
    status, drop = paired_decision(paired, cfg)
    exact = mcnemar(n, len(paired.lost), len(paired.won), confidence=cfg.confidence)
    k_c = sum(c for _, c in paired.scores.values())
    k_b = sum(b for b, _ in paired.scores.values())
    scorer = sorted({f"{d.task}: {d.metric} ({d.filter})" for d in baseline.docs})
    message = (
        f"{where} (lm-eval; {', '.join(scorer)}): accuracy {_accuracy(k_c, n, cfg.confidence)} vs "
        f"{_accuracy(k_b, n, cfg.confidence)} on {n} documents ({_per_task(paired)}); "
        f"{len(paired.lost)} document(s) lost, {len(paired.won)} gained (McNemar exact one-sided p "
        f"{exact.p_value:.2g}); {drop_words(drop, cfg.accuracy.tolerance)}"
    )
    if status == "inconclusive":
        message += " (here: more documents, the profile's limit)"
    if paired.lost:
        message += "; lost: " + ", ".join(f"{t}/{i}" for t, i in paired.lost[:10])
    comparison = Comparison(
        metric="answer_accuracy",
        profile=candidate.profile,
        status=status,
        observed=k_c / n,
        baseline=k_b / n,
        ratio=(k_c / k_b) if k_b else None,
        threshold=k_b / n - cfg.accuracy.tolerance,
        unit="accuracy",
        method="lm-eval per-document scores paired by task and doc_id; exact (Clopper-Pearson) intervals; "
        "non-inferiority: the drop's Tango score interval on the paired documents; McNemar's exact p beside",
        n_candidate=n,
        n_baseline=n,
        message=message,
    )
    return result(
        status,
        message,
        observed=k_c / n,
        baseline=k_b / n,
        threshold=comparison.threshold,
        unit="accuracy",
        comparisons=[comparison],
    )
