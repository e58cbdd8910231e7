"""A sweep's promotions read back from their records: what ``promote`` left live, for whoever reports it.

Pipeline position: a shared contract between ``promote`` (:mod:`orchestrator.recovery.promote`), which
writes one folder per promotion (``promotions/<stamp>/``: the spec copied byte-for-byte, ``launch/`` with
the candidate's validation under load, and ``restored/`` with the previous retained configuration's when
the promotion failed or was interrupted), and the stages that say what is live: the report (report.md,
report.html, the terminal's summary) and the judge's summary. They read these records, never the journal
(an orchestrator's file), so ``python -m orchestrator report SWEEP`` says the same after a promotion as the
sweep or ``promote`` that re-rendered it.

How a folder reads (:attr:`PromotionRecord.outcome`), in the order ``promote`` writes it:

- ``launch/validation.json`` passed and no ``restored/``: **promoted** (the candidate is the live, validated,
  retained configuration; ``promote`` journals it right after);
- ``launch/validation.json`` failed, or ``restored/`` exists (a failure, Ctrl-C or an error after the
  launch): **failed**, and ``restored/validation.json`` says whether the previous configuration came back
  validated (absent: its restore did not finish; ``rollback`` restores it);
- neither: **unfinished** (interrupted before its validation was written, or running now): the retained
  configuration is still the previous one, which ``rollback`` restores.

The newest promoted folder decides what is live (:func:`live_facts`); a later failed or unfinished one is
said beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from contracts.files import read_model
from contracts.layout import PromotionPaths, SweepPaths
from contracts.results import RecoveryValidation

Outcome = Literal["promoted", "failed", "unfinished"]


class PromotionRecord(BaseModel):
    """One ``promotions/<stamp>/`` folder as read back (``report.json``: ``promotions``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stamp: str  # the folder's name: when the promotion began (UTC)
    candidate: str
    validation: RecoveryValidation | None = None  # launch/validation.json: the candidate's
    restored: RecoveryValidation | None = None  # restored/validation.json: the previous configuration's
    undone: bool = False  # restored/ exists: the previous configuration was being restored

    @property
    def outcome(self) -> Outcome:
        if self.undone or (self.validation is not None and not self.validation.ok):
            return "failed"
        return "unfinished" if self.validation is None else "promoted"

    @property
    def when(self) -> str:
        """The stamp as a person reads it (pure).

        >>> PromotionRecord(stamp="20261206T094712Z-2", candidate="x").when
        '2026-12-06 09:47:12 UTC'
        """
        stamp = self.stamp.partition("-")[0]
        try:
            return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d %H:%M:%S UTC")
        except ValueError:
            return self.stamp


def read_promotion(folder: Path) -> PromotionRecord:
    """One promotion's folder as a record; an unreadable validation is a ResultFileError naming it."""
    paths = PromotionPaths(folder)
    validation = _validation(paths.launch.validation)
    restored = _validation(paths.restored.validation)
    names = sorted(p.stem for p in paths.conf.glob("*/*.yaml"))  # its candidate file (conf/candidate/)
    candidate = validation.candidate if validation is not None else (names[0] if names else "?")
    return PromotionRecord(
        stamp=folder.name,
        candidate=candidate,
        validation=validation,
        restored=restored,
        undone=paths.restored.root.is_dir(),
    )


def _validation(path: Path) -> RecoveryValidation | None:
    return read_model(path, RecoveryValidation) if path.exists() else None


def promotion_dirs(sweep_dir: Path) -> list[Path]:
    """Every promotion's folder of ``sweep_dir``, oldest first: by stamp, then by the ``-<n>`` of a later
    one begun in the same second (``promotions/20261206T094712Z-2``)."""
    root = SweepPaths(sweep_dir).promotions
    if not root.is_dir():
        return []

    def order(folder: Path) -> tuple[str, int]:
        stamp, _, n = folder.name.partition("-")
        return stamp, int(n) if n.isdigit() else 1

    return sorted((f for f in root.iterdir() if f.is_dir()), key=order)


def read_promotions(sweep_dir: Path) -> list[PromotionRecord]:
    """Every promotion of ``sweep_dir``, oldest first (empty: it was never promoted)."""
    return [read_promotion(folder) for folder in promotion_dirs(sweep_dir)]


@dataclass(frozen=True)
class LiveFacts:
    """What the promotions left live: the newest that made its candidate the live, validated, retained
    configuration, and a newer one that failed or did not finish (its candidate is not live)."""

    promoted: PromotionRecord | None = None
    after: PromotionRecord | None = None

    @property
    def promoted_name(self) -> str | None:
        return self.promoted.candidate if self.promoted is not None else None


def live_facts(promotions: Sequence[PromotionRecord]) -> LiveFacts:
    """The promotions, oldest first, folded into what is live (pure): the last promoted one decides."""
    promoted: PromotionRecord | None = None
    after: PromotionRecord | None = None
    for record in promotions:
        if record.outcome == "promoted":
            promoted, after = record, None
        else:
            after = record
    return LiveFacts(promoted, after)


def baseline_state(
    baseline: str, recommended: str, promoted: str | None, *, retained: str = "retained configuration"
) -> str:
    """The decision table's cell for the baseline (pure): a KEEP is only recommended until a promotion
    makes it live; ``retained``: the words for a baseline that stays.

    >>> [baseline_state("b", "b", None), baseline_state("b", "k", None), baseline_state("b", "k", "k")]
    ['retained configuration', 'recommended: k', 'replaced by k (promoted)']
    """
    if promoted is not None and promoted != baseline:
        return f"replaced by {promoted} (promoted)"
    if recommended != baseline:
        return f"recommended: {recommended}"
    return retained
