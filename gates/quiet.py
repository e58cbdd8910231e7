"""Quiet signals: what a KEEP must not pass over in silence.

Pipeline position: :func:`gates.verdict.decide` asks :func:`heard` after the rules on the gates' results
(docs/verdicts.md, "Quiet signals in a KEEP"):

- **a requirement that passes with a comparison left inconclusive** (today the ``answer_accuracy`` gate's
  FLAGGED greedy agreement: a candidate that claims lossless decoding answers differently beyond noise)
  makes a KEEP or a NEUTRAL **INCONCLUSIVE**: a KEEP is acted on (the search recommends it, a person
  deploys it), and a correctness question no gate settles is no reason to act;
- **a slow minority that recurs after the confirmation runs**: a run the candidate measured as a
  confirmation run (:mod:`gates.confirm`: a profile's runs beyond the fixed repeats) is itself set aside
  as a slow outlier (:func:`gates.set_aside.set_aside_runs`). The confirmation runs were to show the slow runs
  rare; a slow one among them says they recur, a finding about the candidate (or the host) that the
  comparison of its other runs hides: a KEEP becomes **INCONCLUSIVE**, a NEUTRAL names it (the baseline
  stays either way). Two slow runs among the fixed repeats that the confirmation runs outnumber are the
  noise the rule sets aside;
- **runs set aside** are named in a KEEP's reason (which run, which figure, how much slower).

Pure: reads the gate results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contracts.sweepdir import Results
from contracts.verdicts import Comparison, GateResult, SetAside, Verdict, decision_label
from gates.evidence import Expected
from gates.sequential import SequentialPlan
from gates.set_aside import SET_ASIDE_FACTOR

#: profile -> the repeat numbers of the candidate's confirmation runs of it.
Confirmations = Mapping[str, frozenset[int]]


def confirmation_runs(
    candidate: Results, plan: SequentialPlan | None, expected: Expected | None
) -> Confirmations:
    """The candidate's confirmation runs, by profile: each profile's runs beyond its fixed repeats (the
    plan's most: ``run.repeats``, or an adaptive loop's ``max_repeats``, after which a loop run to its end
    is confirmed), in repeat order. Empty when neither the plan nor the expectations are known."""
    fixed = plan.max_repeats if plan is not None else None
    if fixed is None and expected is not None:
        fixed = expected.max_repeats or expected.candidate_repeats
    if fixed is None:
        return {}
    return {
        profile: frozenset(sorted(rep.summary.repeat for rep in reps)[fixed:])
        for profile, reps in candidate.profiles.items()
    }


def flagged(results: Sequence[GateResult]) -> list[tuple[GateResult, Comparison]]:
    """Requirement gates that pass while holding an inconclusive comparison, with that comparison (not
    one the client's lag left undecidable: that is a gap of its own, :func:`gates.verdict.lag_gaps`)."""
    return [
        (g, c)
        for g in results
        if g.role == "requirement" and g.status == "pass"
        for c in g.comparisons
        if c.status == "inconclusive" and c.undecidable is None
    ]


def recurring(results: Sequence[GateResult], confirmations: Confirmations) -> dict[str, list[SetAside]]:
    """profile -> the candidate's runs set aside there, where one of them is a confirmation run."""
    out: dict[str, list[SetAside]] = {}
    for g in results:
        for c in g.comparisons:
            mine = [r for r in c.set_aside if r.side == "candidate"]
            if any(r.repeat in confirmations.get(c.profile, ()) for r in mine):
                known = out.setdefault(c.profile, [])
                known += [r for r in mine if all(k.repeat != r.repeat for k in known)]
    return out


def _runs(runs: Sequence[SetAside]) -> str:
    return ", ".join(f"r{r.repeat} {r.factor:.1f}x" for r in runs)


def set_aside_words(results: Sequence[GateResult]) -> str:
    """Every run set aside, by side, profile and run, with the figures it was slow on; "" when none.

    >>> run = SetAside(side="candidate", repeat=3, value=0.9, factor=2.6)
    >>> c = Comparison(metric="ttft_p50", profile="short", status="pass", observed=1, baseline=1,
    ...                set_aside=[run])
    >>> gate = GateResult(gate="g", role="gain", status="pass", message="", comparisons=[c])
    >>> said = set_aside_words([gate])
    >>> said.split(": ", 1)[1]
    'candidate short r3 (ttft_p50 2.6x slower)'
    """
    found: dict[tuple[str, str, int], list[str]] = {}
    for g in results:
        for c in g.comparisons:
            for run in c.set_aside:
                key = (run.side, c.profile, run.repeat)
                said = f"{c.metric} {run.factor:.1f}x slower"
                if said not in found.setdefault(key, []):
                    found[key].append(said)
    if not found:
        return ""
    parts = [f"{side} {profile} r{k} ({', '.join(said)})" for (side, profile, k), said in found.items()]
    return (
        f"runs set aside as slow outliers (beyond {SET_ASIDE_FACTOR:g}x the median of their side's other "
        f"runs): {'; '.join(parts)}"
    )


def flag_words(results: Sequence[GateResult]) -> list[str]:
    """Each flagged comparison (:func:`flagged`) in words."""
    return [
        f"{g.gate} passed with {c.profile} {c.metric} unsettled ({c.message}): a question of correctness "
        "no gate settles; check the candidate (its decoding, for a lossless claim) before acting on it, "
        "more repeats will not settle it"
        for g, c in flagged(results)
    ]


def recurrence_words(results: Sequence[GateResult], confirmations: Confirmations | None) -> list[str]:
    """Each profile whose slow runs came back in the candidate's confirmation runs (:func:`recurring`)."""
    return [
        f"the candidate's {profile} runs {_runs(sorted(runs, key=lambda r: r.repeat))} (slower than the "
        f"median of its other runs) were set aside as slow outliers, and slow runs came back in its "
        "confirmation runs: a slow minority that recurs is a finding about the candidate or the host, "
        "not noise; measure again on a quiet host, or find why those runs were slow"
        for profile, runs in recurring(results, confirmations or {}).items()
    ]


def heard(
    verdict: Verdict, results: Sequence[GateResult], confirmations: Confirmations | None = None
) -> Verdict:
    """``verdict`` with its quiet signals heard (``confirmations``: the candidate's confirmation runs,
    :func:`confirmation_runs`): a flagged comparison makes a KEEP or a NEUTRAL INCONCLUSIVE; slow runs
    that recur make a KEEP INCONCLUSIVE and are named in a NEUTRAL's reason (it keeps the baseline either
    way); each says why and what the verdict would have been. A KEEP names the runs it set aside."""
    recurs = recurrence_words(results, confirmations)
    found = [*flag_words(results), *(recurs if verdict.decision == "keep" else [])]
    if verdict.decision in ("keep", "neutral") and found:
        return verdict.model_copy(
            update={
                "decision": "inconclusive",
                "reason": f"{decision_label('inconclusive')}: {'; '.join(found)} (without "
                f"{'them' if len(found) > 1 else 'it'}: {verdict.reason})",
                "more_repeats": None,
                "settle": None,
            }
        )
    if verdict.decision == "neutral" and recurs:
        return verdict.model_copy(update={"reason": f"{verdict.reason}; {'; '.join(recurs)}"})
    aside = set_aside_words(results)
    if verdict.decision == "keep" and aside:
        return verdict.model_copy(update={"reason": f"{verdict.reason}; {aside}"})
    return verdict
