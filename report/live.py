"""What is live and what is recommended, as two facts, from the sweep's records: the report's words for it.

Pipeline position: beside :mod:`report.markdown` and :mod:`report.html`, which call it for the terminal's
line, the "Retained configuration and recovery" section and the page's card. Pure: a
:class:`~report.model.ReportModel` in, text out. The facts: the gates' pick (``verdicts.json``:
``retained``, a recommendation while it is a KEEP), the sweep's own restore (``recovery/validation.json``)
and the promotions after it (``promotions/<stamp>/``, read as :mod:`contracts.promotion` reads them: the
newest promoted one decides what is live; a failed one says what was restored and whether it validated; an
unfinished one that the retained configuration did not change). A sweep whose report was rendered before a
promotion is rendered again after it (the sweep with ``run.promote_keep``, ``promote``), and ``python -m
orchestrator report SWEEP`` reads the same records, so every copy says the same.
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.promotion import LiveFacts, PromotionRecord, baseline_state, live_facts
from contracts.results import RecoveryValidation
from report.model import ReportModel

#: How a name is set off: Markdown's emphasis, or nothing (the terminal, the HTML page's escaped text).
Mark = Callable[[str], str]


def _plain(name: str) -> str:
    return name


def facts(report: ReportModel) -> LiveFacts:
    return live_facts(report.promotions)


def baseline_cell(report: ReportModel) -> str:
    """The decision table's cell for the baseline: ``recommended: X`` until a promotion makes X live."""
    return baseline_state(report.baseline, report.retained, facts(report).promoted_name)


def recovery_state(rec: RecoveryValidation | None) -> str:
    return "NOT RUN" if rec is None else ("PASSED" if rec.ok else f"FAILED: {rec.reason}")


def _why_failed(record: PromotionRecord) -> str:
    """Why a failed promotion's candidate is not live: its validation's reason, or where it stopped."""
    validation = record.validation
    if validation is not None and not validation.ok:
        return validation.reason
    if validation is not None:
        return "stopped after its validation passed (interrupted or an error), before it was made retained"
    return "stopped before its validation (interrupted or an error)"


def promotion_sentence(record: PromotionRecord, previous: str, mark: Mark = _plain) -> str:
    """A promotion in a sentence: live and validated, failed (what was restored, validated or not), or
    not finished (the retained configuration unchanged)."""
    name = mark(record.candidate)
    if record.outcome == "promoted":
        assert record.validation is not None
        return f"live: {name} (promoted {record.when}, validation PASSED)"
    if record.outcome == "unfinished":
        return (
            f"the promotion of {name} ({record.when}) did not finish (interrupted, or running now): the "
            f"retained configuration is still {mark(previous)}; `python -m orchestrator rollback SWEEP` "
            "restores it"
        )
    head = f"the promotion of {name} failed ({record.when}: {_why_failed(record)})"
    back = record.restored
    if back is None:
        return (
            f"{head}; the previous configuration {mark(previous)} was not restored (its restore did not "
            "finish): `python -m orchestrator rollback SWEEP` restores it"
        )
    return f"{head}; the previous configuration {mark(back.candidate)} was restored, validation " + (
        "PASSED" if back.ok else f"FAILED: {back.reason}"
    )


def _restored_by_sweep(report: ReportModel) -> str:
    rec = report.recovery
    return report.baseline if rec is None else rec.candidate


def _recommended_clause(report: ReportModel, promoted: str | None, mark: Mark) -> str:
    """The gates' KEEP: live by a promotion, or not live, with the step that adopts it."""
    if report.retained == promoted:
        return f"the gates' KEEP: {mark(report.retained)} ({report.retained_reason})"
    return (
        f"recommended: {mark(report.retained)} ({report.retained_reason}), not live: "
        f"`python -m orchestrator promote SWEEP {report.retained}` adopts it"
    )


def live_lines(report: ReportModel, mark: Mark = _plain) -> list[str] | None:
    """The facts after the sweep's promotions, one a line; None when it was never promoted (what the sweep
    restored is then what is live: :func:`retained_line`'s words)."""
    if not report.promotions:
        return None
    found = facts(report)
    restored = _restored_by_sweep(report)
    lines: list[str] = []
    if found.promoted is not None:
        lines.append(promotion_sentence(found.promoted, restored, mark))
    if found.after is not None:
        lines.append(promotion_sentence(found.after, found.promoted_name or restored, mark))
    if report.retained != report.baseline:
        lines.append(_recommended_clause(report, found.promoted_name, mark))
    lines.append(
        f"restored after the sweep, before its promotion: {mark(restored)}, recovery validation "
        f"{recovery_state(report.recovery)}"
    )
    return lines


def retained_line(report: ReportModel) -> str:
    """What the gates retain, what the sweep restored and what a promotion made live, as separate facts:
    a KEEP is the gates' recommendation, while the restore after the sweep relaunched the baseline and only
    a promotion (``promote``, ``run.promote_keep``) makes the KEEP live, so the line never reads as if the
    kept candidate were serving when it is not, nor as if it were not when a promotion made it live."""
    after = live_lines(report)
    if after is not None:
        return "; ".join(after)
    rec = report.recovery
    recovery = recovery_state(rec)
    if report.retained == report.baseline or (rec is not None and rec.candidate == report.retained):
        return f"retained: {report.retained} ({report.retained_reason}); recovery validation {recovery}"
    return (
        f"recommended: {report.retained} ({report.retained_reason}), not live; restored after the sweep: "
        f"{_restored_by_sweep(report)}, recovery validation {recovery}"
    )


def promotion_details(report: ReportModel) -> list[str]:
    """Each promotion's record, oldest first (Markdown): its folder, outcome and validation, and the
    previous configuration's restore when it failed."""
    lines = ["Promotions (each in its `promotions/<stamp>/`):", ""]
    for record in report.promotions:
        validation = record.validation
        said = {"promoted": "promoted, validation PASSED", "failed": "FAILED", "unfinished": "did not finish"}
        line = f"- `{record.stamp}` ({record.when}): **{record.candidate}** {said[record.outcome]}"
        if validation is not None:
            line += f": {validation.reason}"
        elif record.outcome == "failed":
            line += f": {_why_failed(record)}"
        back = record.restored
        if back is not None:
            line += f"; the previous configuration **{back.candidate}** restored, validation "
            line += "PASSED" if back.ok else f"FAILED: {back.reason}"
        lines.append(line)
    return lines


def live_card(report: ReportModel) -> tuple[str, str]:
    """The HTML page's first card: what is live (promoted, or restored by the sweep) or recommended."""
    found = facts(report)
    if found.promoted is not None and found.after is None:
        return "live (promoted)", found.promoted.candidate
    if found.after is not None:
        return "last promotion", f"{found.after.candidate}: {found.after.outcome.upper()}"
    rec = report.recovery
    if report.retained != report.baseline and (rec is None or rec.candidate != report.retained):
        return "recommended (not live)", report.retained
    return "retained", report.retained
