"""The report's search section: the search's estimate beside the confirmation's verdict, the trials, the
infeasible region and the winner's candidate file.

Pipeline position: part of the report, read from ``search/trials.json`` (:mod:`contracts.trials`),
``search/winner.yaml`` and ``verdicts.json``; it decides nothing. A trial's figure is labelled as the
search's estimate; the winner's verdict is the gates' on its confirmation, and only a KEEP is called a
recommendation. Without a search the section is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.layout import SweepPaths
from contracts.results import CapacityResult, read_model
from contracts.trials import SearchRecord, TrialRecord, read_search
from contracts.verdicts import DECISION_LABELS, SweepVerdict


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _values(values: list[float] | None) -> str:
    return ", ".join(f"{v:.4g}" for v in values or []) or "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _trial_row(trial: TrialRecord) -> str:
    why = trial.why if trial.state != "complete" or trial.same_as is not None else ""
    value = _values(trial.values)
    if trial.state == "pruned":
        value = f"{value} (screen)"
    return (
        f"| {trial.number} | {_cell(_params(trial.params))} | {trial.state} | {trial.fidelity} | {value} | "
        f"{trial.launches} | {trial.wall_s:.1f} | {_cell(why)} |"
    )


def search_section(sweep_dir: Path, verdicts: SweepVerdict) -> str:
    """The search's section of report.md ("" when the sweep ran no search)."""
    record = read_search(sweep_dir)
    if record is None:
        return ""
    out = ["", "## Search", ""]
    size = record.space_size if record.space_size is not None else "a continuous space of"
    stopped = record.stopped or "still running, or interrupted: the record is partial"
    out.append(
        f"Search **{record.name}** ({record.objective}, {', '.join(record.directions)}): launched "
        f"{record.distinct_launched} of {size} configurations, {record.launches} launch(es) of "
        f"{record.max_launches} ({stopped}). Each trial's figure is the search's **estimate** from one "
        "launch; the verdict is the confirmation's: the winner measured again against the baseline on "
        "fresh runs."
    )
    out += ["", *_winner(sweep_dir, record, verdicts)]
    out += ["", "### Trials", ""]
    out.append("| trial | point | state | fidelity | estimate | launches | wall s | why |")
    out.append("|---|---|---|---|---|---|---|---|")
    out += [_trial_row(t) for t in record.trials]
    out += ["", "### Infeasible region", ""]
    out += _infeasible(record)
    winner = SweepPaths(sweep_dir).winner
    if record.winner is not None and winner.exists():
        out += ["", f"### The winner as a candidate file (`{record.winner.yaml_file}`)", ""]
        out += ["```yaml", winner.read_text().rstrip(), "```"]
    return "\n".join(out) + "\n"


def _winner(sweep_dir: Path, record: SearchRecord, verdicts: SweepVerdict) -> list[str]:
    if record.winner is None:
        return ["No trial was measured fully: nothing was confirmed, the baseline stays."]
    name = record.winner.name
    verdict = next((v for v in verdicts.verdicts if v.candidate == name), None)
    decision = (
        DECISION_LABELS.get(verdict.decision, verdict.decision) if verdict is not None else "not judged"
    )
    cap = SweepPaths(sweep_dir).candidate(name).capacity
    measured = "-"
    if cap.exists():
        found = read_model(cap, CapacityResult).capacity
        measured = f"{found:g}" if found is not None else "below the lowest level"
    rows = [
        "| | figure | verdict |",
        "|---|---|---|",
        f"| search's estimate (trial {record.winner.trial}, one launch) | {_values(record.winner.estimate)} "
        "| - |",
        f"| confirmation ({name} measured again, the gates) | {measured} | {decision} |",
    ]
    if record.baseline is not None:
        rows.append(f"| baseline ({verdicts.baseline}) | {record.baseline:g} | retained |")
    advice = (
        f"**Recommended**: `{record.winner.yaml_file}` (drop it into `conf/candidate/`)."
        if verdict is not None and verdict.decision == "keep"
        else "Not recommended: only a KEEP is; the baseline stays."
    )
    where = " Why: the decision table's row of the winner." if verdict is not None else ""
    return [*rows, "", f"{advice}{where}"]


def _infeasible(record: SearchRecord) -> list[str]:
    lines = [f"- pruned before start: {_cell(_params(p.params))}: {p.why}" for p in record.pruned]
    lines += [
        f"- trial {t.number} ({_cell(_params(t.params))}): {t.why}"
        for t in record.trials
        if t.state == "infeasible" and t.same_as is None
    ]
    return lines or ["Every point tried started."]
