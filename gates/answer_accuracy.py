"""Answer accuracy on a labelled set: is the candidate right as often as the baseline on the same items?

Pipeline position: reads the labelled profile's records of both sides (``gates.accuracy.profile``: a
``.jsonl`` prompts file, :mod:`contracts.labelled`, sent at temperature 0; each record keeps its visible
answer) and the set itself from the path the runs recorded. Each item is scored right or wrong on each side
(:mod:`gates.answers`; a side's first finished answer of the item). An item a side did not answer is
told by whose fault (:func:`cause`): the server's (a 4xx, a timeout, no record) counts against the
candidate (wrong) where the baseline answered it; an item the baseline did not answer has no reference
and is left out on both sides; the load client's (``client``: it could not send the request) is a
``harness`` gap naming the items (the verdict is incomplete), and an interrupted run's (``cancelled``) is
left out (its ``interrupted`` gap says so). The message always says "k of N items unanswered" per side.
The items scored are compared:

- **accuracy** of each side with its exact (Clopper-Pearson) interval;
- **the paired comparison** (non-inferiority, :mod:`gates.noninferiority`): the accuracy drop (the
  baseline's minus the candidate's, item by item) with Tango's unconditional score interval. The gate
  passes only when the drop's upper bound is at or below ``gates.accuracy.tolerance``, fails when its lower
  bound is above it, and is inconclusive between (a larger set would settle it); McNemar's exact one-sided
  p is said beside it; fewer than ``gates.accuracy.min_items`` items scored is a gap (the verdict is
  incomplete);
- **truncation** (:mod:`gates.truncation`): each side's answers cut at ``max_tokens`` (``finish_reason``
  ``length``) are counted and said; above ``gates.accuracy.max_truncated`` of a side's answers the gate
  does not judge (``not_run``: the verdict is incomplete), naming the profile and advising a larger
  ``max_tokens``;
- **greedy agreement**: of the items answered on both sides, those whose visible answer is identical
  (same text, same completion tokens). A candidate that claims lossless decoding (no speculative
  decoding, or greedy draft sampling with lossless rejection sampling, vLLM's defaults), on a layout
  vLLM promises batch-invariant and split as the baseline's (:mod:`gates.agreement`; else the figure is
  reported, not judged), and agrees less than noise allows is flagged: below the baseline's
  own repeat-to-repeat agreement by Fisher's one-sided exact test, or, with one baseline repeat, any item
  that differs. A flagged comparison makes a KEEP or a NEUTRAL verdict INCONCLUSIVE (:mod:`gates.quiet`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from contracts.errors import HarnessError
from contracts.labelled import LabelledItem, is_labelled, parse_labelled
from contracts.results import RequestRecord
from contracts.sweepdir import Repeat
from contracts.verdicts import Comparison, Evidence, Gap, GateResult, GateStatus
from gates.answers import correct
from gates.noninferiority import PairedDrop, items_needed, noninferiority, paired_drop
from gates.registry import Gate, GateContext, register
from gates.significance import clopper_pearson, compare_rates, mcnemar
from gates.truncation import count_truncated, counts_words, truncation_finding


def accuracy_status(paired: PairedDrop, tolerance: float) -> GateStatus:
    """The decision on the paired items (:func:`gates.noninferiority.noninferiority`): pass when the drop's
    upper bound is at or below the tolerance, fail when its lower bound is above it, inconclusive between."""
    return noninferiority(paired, tolerance)


def drop_words(paired: PairedDrop, tolerance: float) -> str:
    """The drop, its upper bound and the tolerance, in points, and what the bound shows:
    ``drop +0.5 points, upper bound +2.3 (95% Tango score interval [-1.1, +2.3]) above the 2-point
    tolerance: non-inferiority not shown``."""
    low, high = paired.interval
    tol = f"{tolerance * 100:g}-point tolerance"
    words = (
        f"drop {paired.drop * 100:+.1f} points, upper bound {high * 100:+.1f} ({paired.confidence:.0%} Tango "
        f"score interval [{low * 100:+.1f}, {high * 100:+.1f}])"
    )
    status = noninferiority(paired, tolerance)
    if status == "fail":
        return f"{words}: lower bound above the {tol}, worse than allowed beyond noise"
    if status == "pass":
        return f"{words} within the {tol}: non-inferior"
    need = items_needed(tolerance, paired.confidence)
    least = f"; at least {need} items even with none lost" if need is not None and need > paired.items else ""
    return (
        f"{words} above the {tol}: non-inferiority not shown, within noise: a larger labelled set would "
        f"settle it{least}"
    )


Side = Literal["candidate", "baseline"]

#: Why an item has no answer when the server is not to blame: the request error -> whose fault, in words.
NOT_THE_SERVERS: dict[str, str] = {
    "client": "the load client could not send it",  # a harness fault (load.harness): a gap
    "cancelled": "the run was interrupted",  # Ctrl-C or stop: the interrupted gap (gates.evidence)
}


@dataclass(frozen=True)
class Scored:
    """One side's answers on the labelled set: item -> its answers in repeat order (finished ones only),
    and item -> its failed requests (with their records files)."""

    answers: dict[int, list[RequestRecord]]
    files: dict[int, str]  # item -> the records file of its first answer
    failures: dict[int, list[tuple[RequestRecord, str]]]

    def first(self, item: int) -> RequestRecord:
        return self.answers[item][0]

    def unanswered(self, size: int) -> list[int]:
        """The items of a ``size``-item set with no finished answer."""
        return [i for i in range(size) if i not in self.answers]


def score_side(repeats: Sequence[Repeat], size: int) -> Scored:
    """Each item's finished answers and failed requests (record ``i`` asked item ``i % size``), in repeat
    order."""
    answers: dict[int, list[RequestRecord]] = {}
    files: dict[int, str] = {}
    failures: dict[int, list[tuple[RequestRecord, str]]] = {}
    for rep in repeats:
        for record in rep.records:
            item = record.index % size
            if record.ok and record.output_text is not None:
                answers.setdefault(item, []).append(record)
                files.setdefault(item, rep.records_file)
            elif not record.ok:
                failures.setdefault(item, []).append((record, rep.records_file))
    return Scored(answers, files, failures)


def cause(side: Scored, item: int) -> str:
    """Why ``side`` has no answer to ``item``: ``client`` or ``cancelled`` when any of its requests failed
    so (:data:`NOT_THE_SERVERS`), else the first failed request's error class (the server's;
    ``unfinished``: no error and no finish), or ``no record`` (none was recorded: a run cut short)."""
    errors = [str(record.error or "unfinished") for record, _ in side.failures.get(item, [])]
    return next((e for e in NOT_THE_SERVERS if e in errors), errors[0] if errors else "no record")


def unanswered_words(side: str, items: Sequence[int], side_scored: Scored, size: int) -> str:
    """``candidate: 15 of 40 items unanswered (http_4xx 10, timeout 5)``: always said, 0 included."""
    counts: dict[str, int] = {}
    for i in items:
        counts[cause(side_scored, i)] = counts.get(cause(side_scored, i), 0) + 1
    detail = f" ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})" if counts else ""
    return f"{side}: {len(items)} of {size} items unanswered{detail}"


def harness_gap(
    side: Literal["candidate", "baseline"], scored: Scored, items: Sequence[int], path: str
) -> Gap:
    """The labelled ``items`` the load client could not send to ``side``: a ``harness`` gap naming them."""
    unsent = [(r, f) for i in items for r, f in scored.failures.get(i, []) if r.error == "client"]
    return Gap(
        kind="harness",
        side=side,
        message=f"{path}: item(s) {', '.join(map(str, items))} (0-based) unanswered by the {side}: the load "
        f"client could not send them ({unsent[0][0].error_detail or 'no detail'}), the harness's fault, "
        "not the server's; measuring again fills it",
        file=unsent[0][1],
    )


def identical(a: RequestRecord, b: RequestRecord) -> bool:
    """Token-identical outputs as the records show them: the same visible text and completion tokens."""
    return a.output_text == b.output_text and a.completion_tokens == b.completion_tokens


def labelled_set(repeats: Sequence[Repeat]) -> tuple[list[LabelledItem], str] | str:
    """The labelled set the runs sent (read from the path their settings recorded) and its path, or why it
    cannot be read."""
    paths = set()
    for rep in repeats:
        settings = rep.summary.settings
        if settings is None or not is_labelled(settings.workload.prompts_file):
            return f"{rep.summary_file}: the run records no labelled set (prompts_file ending in .jsonl)"
        paths.add(Path(settings.prompts_dir) / str(settings.workload.prompts_file))
    if len(paths) != 1:
        return f"the runs sent different labelled sets: {', '.join(sorted(map(str, paths)))}"
    path = paths.pop()
    try:
        items = parse_labelled(path.read_text(), str(path))
    except (OSError, HarnessError) as exc:
        return f"cannot read the labelled set {path}: {exc}"
    sent = {rep.summary.num_requests for rep in repeats}
    if sent != {len(items)}:
        return f"{path} has {len(items)} items, the runs sent {', '.join(map(str, sorted(sent)))}: it changed"
    return items, str(path)


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _accuracy(k: int, n: int, confidence: float) -> str:
    low, high = clopper_pearson(k, n, confidence)
    return f"{k}/{n} ({_pct(k / n)}, {confidence:.0%} exact interval [{_pct(low)}, {_pct(high)}])"


def self_agreement(side: Scored) -> tuple[int, int]:
    """(identical, pairs): each item's first answer against its later repeats' (the side's own noise)."""
    pairs = [(a[0], b) for a in side.answers.values() for b in a[1:]]
    return sum(identical(a, b) for a, b in pairs), len(pairs)


def agreement_flag(
    agree: tuple[int, int],
    noise: tuple[int, int],
    claim: str | None,
    confidence: float,
    unpromised: str | None = None,
) -> tuple[GateStatus | None, str]:
    """The greedy-agreement figure judged against noise when the candidate claims lossless decoding and vLLM
    promises its greedy outputs identical to the baseline's (``unpromised``: why not, :mod:`gates.agreement`):
    (None: not judged, pass, or inconclusive: flagged) and the words."""
    (k, n), (ks, ns) = agree, noise
    figure = f"greedy agreement with the baseline {k}/{n} ({_pct(k / n)}) token-identical"
    if not claim:
        why = "unknown decoding (no spec.json)" if claim is None else "no lossless claim"
        return None, f"{figure} ({why}: not judged)"
    if unpromised:
        return None, f"{figure} ({claim}, but {unpromised}: not judged)"
    alpha = (1 - confidence) / 2
    if ns:
        p = compare_rates((k, n), (ks, ns), confidence=confidence).p_value
        own = f"the baseline's own repeat-to-repeat agreement {ks}/{ns} (Fisher one-sided p {p:.2g})"
        if p <= alpha:
            return "inconclusive", f"FLAGGED: {figure}, below {own} although it claims {claim}"
        return "pass", f"{figure}, within noise of {own} ({claim})"
    if k < n:
        return "inconclusive", (
            f"FLAGGED: {figure} although it claims {claim} (greedy outputs expected identical; the "
            "baseline's repeat-to-repeat agreement not measured: one repeat)"
        )
    return "pass", f"{figure} ({claim})"


@register
class AnswerAccuracy(Gate):
    """Accuracy on a labelled set (non-inferiority of the paired drop), greedy agreement with the baseline."""

    name = "answer_accuracy"
    order = 35
    requirement = "answer accuracy on a labelled set"
    failure = "answer accuracy"

    def evaluate(self, ctx: GateContext) -> GateResult:
        acc = ctx.cfg.accuracy
        profile = acc.profile
        cand, base = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile)
        if not cand or not base:
            side = "baseline" if not base else "candidate"
            return self._result(
                "not_run" if not base else "inconclusive",
                f"labelled profile {profile!r} not measured for the {side}",
                not_applicable=ctx.not_asked([profile]) if not base else "",
            )
        found = labelled_set([*base, *cand])
        if isinstance(found, str):
            return self._result("not_run", found)
        items, path = found
        size = len(items)
        c_side, b_side = score_side(cand, size), score_side(base, size)
        c_none, b_none = c_side.unanswered(size), b_side.unanswered(size)
        unanswered = (
            f"{unanswered_words('candidate', c_none, c_side, size)}; "
            f"{unanswered_words('baseline', b_none, b_side, size)}"
        )
        sides: tuple[tuple[Side, Scored, list[int]], ...] = (
            ("candidate", c_side, c_none),
            ("baseline", b_side, b_none),
        )
        gaps = [
            harness_gap(side, scored, client, path)
            for side, scored, none in sides
            if (client := [i for i in none if cause(scored, i) == "client"])
        ]
        # Scored: the baseline answered it, and the candidate answered it or failed it by the server's
        # fault (wrong). The baseline's own failures leave no reference; the client's or an interrupt's
        # are not the candidate's (a gap; the interrupted gap).
        paired = [
            i
            for i in range(size)
            if i in b_side.answers and (i in c_side.answers or cause(c_side, i) not in NOT_THE_SERVERS)
        ]
        if len(paired) < acc.min_items:
            return self._result(
                "not_run",
                f"{len(paired)} of {size} items of {path} scored (the baseline's answer, and the candidate's "
                f"or its failure by the server; {unanswered}): fewer than gates.accuracy.min_items = "
                f"{acc.min_items}",
                gaps=gaps,
            )
        right_c = {i: i in c_side.answers and correct(c_side.first(i).output_text, items[i]) for i in paired}
        right_b = {i: correct(b_side.first(i).output_text, items[i]) for i in paired}
        lost = [i for i in paired if right_b[i] and not right_c[i]]
        won = [i for i in paired if right_c[i] and not right_b[i]]
        n, confidence = len(paired), ctx.cfg.confidence
        rates = mcnemar(n, len(lost), len(won), confidence=confidence)
        paired_rates = paired_drop(n, len(lost), len(won), confidence=confidence)
        status = accuracy_status(paired_rates, acc.tolerance)
        k_c, k_b = sum(right_c.values()), sum(right_b.values())
        failed = sum(i not in c_side.answers for i in paired)
        counted = f" ({failed} unanswered by the candidate's server, counted wrong)" if failed else ""
        paired_words = (
            f"{len(lost)} item(s) lost{counted}, {len(won)} gained (McNemar exact one-sided p "
            f"{rates.p_value:.2g}); {drop_words(paired_rates, acc.tolerance)}"
        )
        accuracy = Comparison(
            metric="answer_accuracy",
            profile=profile,
            status=status,
            observed=k_c / n,
            baseline=k_b / n,
            ratio=(k_c / k_b) if k_b else None,
            threshold=k_b / n - acc.tolerance,
            unit="accuracy",
            method="exact (Clopper-Pearson) intervals; non-inferiority on the paired drop by Tango's "
            "score interval (its upper bound at or below the tolerance); McNemar's exact test on the "
            "discordant items",
            n_candidate=n,
            n_baseline=n,
            drop_interval=paired_rates.interval,
            message=f"accuracy {_accuracy(k_c, n, confidence)} vs {_accuracy(k_b, n, confidence)} on "
            f"{n} items; {unanswered}; {paired_words}",
        )
        both = [i for i in paired if i in c_side.answers]
        differ = [i for i in both if not identical(c_side.first(i), b_side.first(i))]
        comparisons = [accuracy]
        flag: GateStatus | None = None
        agreement_words = "greedy agreement not measured (no item answered on both sides)"
        if both:
            agree = len(both) - len(differ)
            flag, agreement_words = agreement_flag(
                (agree, len(both)),
                self_agreement(b_side),
                ctx.candidate_claim,
                confidence,
                ctx.agreement_unpromised,
            )
        if flag is not None:
            comparisons.append(
                Comparison(
                    metric="greedy_agreement",
                    profile=profile,
                    status=flag,
                    observed=agree / len(both),
                    baseline=1.0,
                    ratio=agree / len(both),
                    unit="agreement",
                    method="token-identical visible answers (text and completion tokens), item by item",
                    n_candidate=len(both),
                    n_baseline=len(both),
                    message=agreement_words,
                )
            )
        cut = (count_truncated("candidate", cand), count_truncated("baseline", base))
        finding = truncation_finding(cut, profile, acc.max_truncated)
        if finding is not None:  # the budget, not the candidate, would be judged: incomplete
            return self._result(
                "not_run",
                f"{finding}; as measured, not judged: {accuracy.message}; {counts_words(cut)}",
                evidence=[e for t in cut for e in t.evidence],
                gaps=gaps,
            )
        evidence = _evidence(c_side, sorted({*lost, *(differ if flag == "inconclusive" else [])}))
        return self._result(
            status,
            f"{accuracy.message}; {counts_words(cut)}; {agreement_words}",
            observed=k_c / n,
            baseline=k_b / n,
            threshold=accuracy.threshold,
            comparisons=comparisons,
            evidence=evidence,
            gaps=gaps,
        )

    def _result(self, status: GateStatus, message: str, **fields: Any) -> GateResult:
        unit = "accuracy" if "observed" in fields else ""
        return GateResult(gate=self.name, role=self.role, status=status, message=message, unit=unit, **fields)


def _evidence(side: Scored, items: Sequence[int]) -> list[Evidence]:
    """The records files and request indices of ``items``' first answers on ``side`` (an unanswered item:
    its failed requests)."""
    by_file: dict[str, list[int]] = {}
    for i in items:
        if i in side.answers:
            by_file.setdefault(side.files[i], []).append(side.first(i).index)
        for record, file in side.failures.get(i, []) if i not in side.answers else []:
            by_file.setdefault(file, []).append(record.index)
    return [Evidence(file=f, requests=sorted(set(r))) for f, r in by_file.items()]
