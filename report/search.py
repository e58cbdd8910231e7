"""The report's search section: the search's estimate beside the confirmation's verdict, the trials (one
row per point, a column per field: :mod:`report.search_table`), the infeasible region and the winner's
candidate file.

Pipeline position: part of the report, read from ``search/trials.json`` (:mod:`contracts.trials`),
``search/winner.yaml`` and ``verdicts.json``; it decides nothing. :func:`search_model` builds the section
as data (:class:`SearchSection`, ``report.json``'s ``search``); report.md (:func:`search_section`) and
report.html render that model and take every word from the helpers here, so the three cannot disagree. A
trial's figure is labelled as the search's estimate; the winner's verdict is the gates' on its
confirmation, and only a KEEP is called a recommendation; the screen's estimate is in the objective's
unit, in a column of its own, never the full figure. Without a search there is no section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from contracts.files import read_model
from contracts.layout import PLOT_SEARCH, SweepPaths
from contracts.metrics import fmt_estimate
from contracts.promotion import baseline_state, live_facts, read_promotions
from contracts.results import CapacityResult
from contracts.trials import (
    Confirmation,
    SearchRecord,
    TrialRecord,
    Winner,
    best_keep,
    current_best_words,
    read_search,
)
from contracts.verdicts import Decision, SweepVerdict, decision_label
from report.search_table import (
    TrialRow,
    objective_unit,
    row_cells,
    search_fields,
    trial_rows,
    trials_header,
)

#: The columns of the table that puts the search's estimate beside the confirmation (:func:`winner_header`).
WINNER_HEADER = ("", "figure", "verdict")
#: What the infeasible region says when every point tried started.
ALL_STARTED = "Every point tried started."
#: The sentence under the trials table about the plot (report.html embeds the plot itself).
PLOT_NOTE = (
    f"`{PLOT_SEARCH}`: the objective measured in full against the launches spent (best so far as a line), "
    "the screens' rough estimates on an axis of their own, and the feasible region over the two fields "
    "tried most."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class SearchWinner(_Model):
    """The search's best point: its estimate (one launch), the confirmation's figure, the gates' verdict."""

    name: str
    trial: int
    params: dict[str, Any]
    estimate: list[float]  # the search's estimate from the trial's launch: not a measured verdict
    measured: float | None  # the confirmation's capacity (None: below the lowest level, or not measured)
    measured_text: str  # that figure as the report writes it ("-": not measured)
    decision: Decision | None  # the gates' verdict on the confirmation (None: not judged)
    recommended: bool  # only a KEEP is
    yaml_file: str  # the winner's candidate file, relative to the sweep directory
    yaml: str | None  # its text as written, ready for conf/candidate/ (None: the file is missing)
    at_least: bool = False  # the estimate's first value is a floor (held the SLO at every level tried)
    measured_at_least: bool = False  # the confirmation's capacity is a floor (held at every level tried)


class SearchSection(_Model):
    """What the report says about the sweep's search (``report.json``: ``search``)."""

    name: str
    objective: str
    directions: list[Literal["maximize", "minimize"]]
    unit: str = ""  # the objective's unit, the screen's too ("concurrent", "req/s", "tok/s"); "": unknown
    space_size: int | None  # None: a continuous space
    distinct_launched: int  # configurations launched
    launches: int
    max_launches: int
    stopped: str  # why the search stopped; "": still running or interrupted (the record is partial)
    baseline_name: str
    baseline: float | None  # the baseline's figure the screen was set from, when known
    baseline_state: str  # "retained", "recommended: NAME", or "replaced by NAME (promoted)"
    summary: str  # the section's opening sentence (Markdown emphasis)
    winner: SearchWinner | None  # None: no trial was measured fully
    advice: str  # the recommendation or why there is none (Markdown emphasis and code)
    trials: list[TrialRecord]  # as recorded; the report's table folds repeats (:func:`trials_table`)
    infeasible: list[str]  # what was pruned before start, then the trials that did not start


class WinnerRow(NamedTuple):
    """One row of the estimate-vs-confirmation table; ``decision`` is the gates' where the row has one."""

    what: str
    figure: str
    verdict: str
    decision: Decision | None


# ------------------------------------------------------------------------------------------- words


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _values(values: list[float] | None, *, at_least: bool = False) -> str:
    """Objective values as measured: a capacity the search never measured beyond reads ``≥ 16``."""
    return fmt_estimate(values, at_least=at_least)


def trials_table(section: SearchSection) -> tuple[tuple[str, ...], list[tuple[TrialRow, list[str]]]]:
    """The trials table of report.md and report.html: its header (a column per search field, the
    objective's unit named) and one row per point with its cells (repeats folded into the point's row)."""
    fields = search_fields(section.trials)
    pareto = len(section.directions) > 1
    constraints = any(t.constraints for t in section.trials)
    header = trials_header(section.objective, section.unit, fields, pareto=pareto, constraints=constraints)
    rows = trial_rows(section.trials)
    return header, [(r, row_cells(r, fields, pareto=pareto, constraints=constraints)) for r in rows]


def confirmation_of(section: SearchSection | None, record: SearchRecord) -> Confirmation | None:
    """The winner's confirmation as the report knows it: the gates' verdict in ``verdicts.json`` (a report
    is rendered only after the judge, so a winner without a verdict was not measured: INCOMPLETE), else
    what trials.json recorded. The sweep writes trials.json's confirmation after its report; this is why
    the report's plot never says "not confirmed yet" of a judged winner."""
    winner = section.winner if section is not None else None
    if winner is None or record.winner is None or winner.name != record.winner.name:
        return record.confirmation  # a recommended runner-up's verdict is recorded after the report
    if winner.decision is None:
        return Confirmation(decision="incomplete", reason="the confirmation was not measured")
    return Confirmation(decision=winner.decision, capacity=winner.measured, at_least=winner.measured_at_least)


def winner_header(section: SearchSection) -> tuple[str, ...]:
    """:data:`WINNER_HEADER` with the objective's unit on the figures' column."""
    return ("", f"figure ({section.unit})", "verdict") if section.unit else WINNER_HEADER


def winner_rows(section: SearchSection) -> list[WinnerRow]:
    """The search's estimate (never a verdict), the confirmation's figure and verdict, the baseline's."""
    winner = section.winner
    if winner is None:
        return []
    verdict = decision_label(winner.decision) if winner.decision is not None else "not judged"
    rows = [
        WinnerRow(
            f"search's estimate (trial {winner.trial}, one launch)",
            _values(winner.estimate, at_least=winner.at_least),
            "-",
            None,
        ),
        WinnerRow(
            f"confirmation ({winner.name} measured again, the gates)",
            winner.measured_text,
            verdict,
            winner.decision,
        ),
    ]
    if section.baseline is not None:
        what = f"baseline ({section.baseline_name})"
        rows.append(WinnerRow(what, f"{section.baseline:g}", section.baseline_state, None))
    return rows


def _summary(record: SearchRecord) -> str:
    size = record.space_size if record.space_size is not None else "a continuous space of"
    stopped = record.stopped or "still running, or interrupted: the record is partial"
    return (
        f"Search **{record.name}** ({record.objective}, {', '.join(record.directions)}): launched "
        f"{record.distinct_launched} of {size} configurations, {record.launches} launch(es) of "
        f"{record.max_launches} ({stopped}). Each trial's figure is the search's **estimate** from one "
        "launch; the verdict is the confirmation's: the winner measured again against the baseline on "
        "fresh runs."
    )


def current_best_sentence(record: SearchRecord) -> str:
    """The console's line when the best point is the baseline's configuration, as a sentence."""
    words = current_best_words(record)
    return words[0].upper() + words[1:] + "."


def _advice(winner: SearchWinner | None, record: SearchRecord) -> str:
    if record.best_is_baseline:  # no winner to adopt: the console's words
        return current_best_sentence(record)
    if winner is None:
        return "No trial was measured fully: nothing was confirmed, the baseline stays."
    advice = (
        f"**Recommended**: `{winner.yaml_file}` (drop it into `conf/candidate/`)."
        if winner.recommended
        else "Not recommended: only a KEEP is; the baseline stays."
    )
    where = " Why: the decision table's row of the winner." if winner.decision is not None else ""
    return f"{advice}{where}"


def _infeasible(record: SearchRecord) -> list[str]:
    lines = [f"pruned before start: {_params(p.params)}: {p.why}" for p in record.pruned]
    lines += [
        f"trial {t.number} ({_params(t.params)}): {t.why}"
        for t in record.trials
        if t.state == "infeasible" and t.same_as is None
    ]
    return [line.replace("\n", " ") for line in lines]


# ------------------------------------------------------------------------------------------- building


def _shown(sweep_dir: Path, record: SearchRecord, verdicts: SweepVerdict) -> Winner | None:
    """The finalist the section shows: the recommendation (:func:`contracts.trials.best_keep`: the gates'
    retained KEEP) when a finalist is it, else the first (``record.winner``)."""
    finalists = record.finalists or ([record.winner] if record.winner is not None else [])
    decisions = {v.candidate: v.decision for v in verdicts.verdicts}
    return best_keep(finalists, decisions, verdicts.retained) or record.winner


def confirmed(sweep_dir: Path, record: SearchRecord | None) -> dict[str, float | None]:
    """Each finalist's capacity measured on its confirmation (None: not measured)."""
    finalists = (record.finalists or ([record.winner] if record.winner else [])) if record else []
    paths = SweepPaths(sweep_dir)
    return {w.name: measured_capacity_of(paths.candidate(w.name).capacity) for w in finalists}


def measured_capacity_of(path: Path) -> float | None:
    """A confirmation's capacity (``capacity.json``), None without one."""
    return read_model(path, CapacityResult).capacity if path.exists() else None


def _winner(sweep_dir: Path, record: SearchRecord, verdicts: SweepVerdict) -> SearchWinner | None:
    shown = _shown(sweep_dir, record, verdicts)
    if shown is None:
        return None
    name = shown.name
    verdict = next((v for v in verdicts.verdicts if v.candidate == name), None)
    paths = SweepPaths(sweep_dir)
    yaml_path = sweep_dir / shown.yaml_file
    measured: float | None = None
    measured_text = "-"
    at_least = False
    if paths.candidate(name).capacity.exists():
        found = read_model(paths.candidate(name).capacity, CapacityResult)
        measured = found.capacity
        lowest = min((p.level for p in found.points), default=None)
        if measured is None:
            measured_text = (
                "below the lowest level" if lowest is None else f"< {lowest:g} (below the lowest level)"
            )
        else:  # never more than the search measured: held at every level tried is a floor
            at_least = found.high is None
            measured_text = f"≥ {measured:g}" if at_least else f"{measured:g}"
    return SearchWinner(
        name=name,
        trial=shown.trial,
        params=shown.params,
        estimate=shown.estimate,
        measured=measured,
        measured_text=measured_text,
        decision=verdict.decision if verdict is not None else None,
        recommended=verdict is not None and verdict.decision == "keep",
        yaml_file=shown.yaml_file,
        yaml=yaml_path.read_text() if yaml_path.is_file() else None,
        at_least=shown.at_least,
        measured_at_least=at_least,
    )


def search_model(
    sweep_dir: Path, verdicts: SweepVerdict, *, capacity_mode: str | None = None
) -> SearchSection | None:
    """The search's section as data, from ``search/trials.json``, ``search/winner.yaml`` and the verdicts
    (None when the sweep ran no search); ``capacity_mode`` is capacity.profile's workload mode (closed or
    open), which names a capacity's unit (None: the unit is not said)."""
    record = read_search(sweep_dir)
    if record is None:
        return None
    winner = _winner(sweep_dir, record, verdicts)
    promoted = live_facts(read_promotions(sweep_dir)).promoted_name
    return SearchSection(
        name=record.name,
        objective=record.objective,
        directions=record.directions,
        unit=objective_unit(record.objective, capacity_mode),
        space_size=record.space_size,
        distinct_launched=record.distinct_launched,
        launches=record.launches,
        max_launches=record.max_launches,
        stopped=record.stopped,
        baseline_name=verdicts.baseline,
        baseline=record.baseline,
        baseline_state=baseline_state(verdicts.baseline, verdicts.retained, promoted, retained="retained"),
        summary=_summary(record),
        winner=winner,
        advice=_advice(winner, record),
        trials=record.trials,
        infeasible=_infeasible(record),
    )


# ------------------------------------------------------------------------------------------- Markdown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_row(cells: list[str] | tuple[str, ...]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def search_section(section: SearchSection | None) -> str:
    """The search's section of report.md ("" when the sweep ran no search)."""
    if section is None:
        return ""
    out = ["", "## Search", "", section.summary, ""]
    if section.winner is not None:
        out += [_md_row(winner_header(section)), "|---|---|---|"]
        out += [_md_row(row[:3]) for row in winner_rows(section)]
        out.append("")
    out.append(section.advice)
    header, rows = trials_table(section)
    out += ["", "### Trials", "", _md_row(header), "|" + "---|" * len(header)]
    out += [_md_row(cells) for _row, cells in rows]
    out += ["", PLOT_NOTE]
    out += ["", "### Infeasible region", ""]
    out += [f"- {line}" for line in section.infeasible] or [ALL_STARTED]
    winner = section.winner
    if winner is not None and winner.yaml is not None:
        out += ["", f"### The winner as a candidate file (`{winner.yaml_file}`)", ""]
        out += ["```yaml", winner.yaml.rstrip(), "```"]
    return "\n".join(out) + "\n"
