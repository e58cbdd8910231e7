"""What the gates recommend, beside what runs: two facts, never one read as the other.

Pipeline position: outside the sweep, under :mod:`.status` and the sweep's last lines
(:mod:`orchestrator.app.controller`). A sweep restores its retained configuration (the baseline) whatever
the gates decide; a candidate they keep is a recommendation until ``promote`` (or ``run.promote_keep``)
makes it the retained configuration (:mod:`.promote`). :func:`recommendation` reads ``verdicts.json`` and
the journal's retained configuration and says which of the two holds; :func:`recommendation_lines` words it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contracts.errors import ResultFileError
from contracts.verdicts import SweepVerdict, read_verdicts
from orchestrator.ledger.journal import JournalState


@dataclass(frozen=True)
class Recommendation:
    """The candidate the gates keep (their pick among the KEEPs), and whether it is the retained one."""

    name: str
    #: A promotion made it the retained configuration (its candidate file: the next sweep's baseline).
    promoted: bool
    candidate_file: str | None = None


def recommended(verdicts: SweepVerdict, state: JournalState) -> Recommendation | None:
    """The gates' KEEP and whether a promotion adopted it (pure); None when they keep none."""
    if verdicts.retained == verdicts.baseline:
        return None
    promoted = state.retained_candidate == verdicts.retained and state.retained_candidate_file is not None
    return Recommendation(verdicts.retained, promoted, state.retained_candidate_file if promoted else None)


def recommendation(sweep_dir: Path, state: JournalState) -> Recommendation | None:
    """:func:`recommended` for the sweep's ``verdicts.json`` (None: not judged, or no KEEP)."""
    try:
        verdicts = read_verdicts(sweep_dir)
    except ResultFileError:
        return None
    return recommended(verdicts, state)


def recommendation_lines(sweep_dir: Path, state: JournalState) -> list[str]:
    """The recommendation as the sweep's last line and ``status`` say it: adopted (the retained
    configuration, and the file that is the next sweep's baseline), or not serving and how to adopt it."""
    rec = recommendation(sweep_dir, state)
    if rec is None:
        return []
    if rec.promoted and rec.candidate_file is not None:
        file = Path(rec.candidate_file)
        return [
            f"promoted: {rec.name} (KEEP) is the retained configuration; the next sweep's baseline: "
            f"-cd {file.parent.parent} candidate@baseline={rec.name} ({file})"
        ]
    adopt = f"python -m orchestrator promote {sweep_dir} {rec.name}"
    return [
        f"recommended: {rec.name} (KEEP), not serving: `{adopt}` launches it, validates it under load and "
        "makes it the retained configuration (the live service stops for its start; a failure restores "
        "the current one)"
    ]
