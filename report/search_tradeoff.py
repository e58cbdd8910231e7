"""The search's finalists and trade-off in report.md: each finalist's verdict, the recommendation or the
honest answer, and what the search found (the best estimate, the requirement it breaks by how much, what
to relax; the best point that met every requirement and its gain).

Pipeline position: the report stage, reading ``search/trials.json`` (:mod:`contracts.trials`: the
finalists and the trade-off the search recorded) and the judge's verdicts; it decides nothing (the
recommendation is the KEEP the gates retain, as the console's last lines and ``promote`` say). Which
requirement each trial broke at its screen is the trials table's (:mod:`report.search_table`), and the
feasible region the plot's.
"""

from __future__ import annotations

from contracts.metrics import fmt_estimate
from contracts.trials import SearchRecord, best_keep
from contracts.verdicts import SweepVerdict, decision_label
from report.search import current_best_sentence


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _sizes(sizes: dict[str, float]) -> str:
    broken = sorted(((k, v) for k, v in sizes.items() if v > 0), key=lambda kv: -kv[1])
    return ", ".join(f"{name} {size:+.1%}" for name, size in broken)


def tradeoff_section(
    record: SearchRecord | None,
    verdicts: SweepVerdict,
) -> str:
    """``### Constraints and trade-off`` of report.md ("" when the sweep ran no search); the recommendation
    is the gates' retained KEEP (:func:`contracts.trials.best_keep`), as the console's and ``promote``'s."""
    if record is None:
        return ""
    decided = {v.candidate: v.decision for v in verdicts.verdicts}
    out = ["", "### Constraints and trade-off", ""]
    if record.best_is_baseline:  # nothing confirmed, nothing to adopt: the console's words, and no more
        return "\n".join([*out, current_best_sentence(record)]) + "\n"
    finalists = record.finalists or ([record.winner] if record.winner is not None else [])
    if finalists:
        out += [_row(["finalist", "search's estimate", "confirmation"]), "|---|---|---|"]
        for w in finalists:
            verdict = decision_label(decided[w.name]) if w.name in decided else "not measured"
            out.append(_row([w.name, fmt_estimate(w.estimate, at_least=w.at_least), verdict]))
        out.append("")
    best = best_keep(finalists, decided, verdicts.retained)  # as the console's recommendation
    if best is not None:
        out.append(f"Recommended: **{best.name}** (KEEP).")
    else:
        out.append("No configuration beats the baseline on every profile: the baseline stays.")
    trade = record.tradeoff
    if trade is not None and trade.best_name is not None:
        out.append(
            f"The best estimate, {trade.best_name} ({fmt_estimate([trade.best_estimate or 0.0])} at its "
            f"screen), breaks {_sizes(trade.best_broken)} beyond the gates' limits; to take it, relax "
            + "; ".join(trade.relax)
            + "."
        )
    if trade is not None and trade.feasible_name is not None:
        gain = f", {trade.feasible_gain:.2f}x the baseline's" if trade.feasible_gain else ""
        out.append(
            f"The best point that met every constraint: {trade.feasible_name} (estimate "
            f"{fmt_estimate([trade.feasible_estimate or 0.0])}{gain})."
        )
    return "\n".join(out) + "\n"
