"""A search's files in the sweep directory (``search/``): the trial record, Optuna's storage, the finalists.

Pipeline position: part of the sweep directory's layout (:mod:`contracts.layout`, which re-exports these
names and mixes :class:`SearchFiles` into its ``SweepPaths``); it imports nothing. Split from it by
concern: the search's own folder, written by :mod:`orchestrator.search` and read by the report::

    search/                                       a search (conf/search/): its trials and finalists
        trials.json  study.db  winner.yaml        the trial record, Optuna's storage, the first finalist
        <finalist>.yaml                           each further finalist confirmed (search.confirm_top)
        candidates/<trial>/                       one launch per trial (contracts.layout.SweepPaths.trial)
"""

from __future__ import annotations

from pathlib import Path

#: A search's folder (conf/search/): the trial record, Optuna's SQLite storage, the winner as a candidate
#: file, and each trial's launch under ``search/candidates/<trial>/``.
SEARCH_DIR = "search"
TRIALS_FILE = "trials.json"
STUDY_FILE = "study.db"
WINNER_FILE = "winner.yaml"


class SearchFiles:
    """The search's files of a sweep directory ``root`` (a mixin of ``contracts.layout.SweepPaths``)."""

    root: Path

    @property
    def search(self) -> Path:
        """A search's folder (``search/``); its trials' launches are ``search/candidates/<trial>/``."""
        return self.root / SEARCH_DIR

    @property
    def trials(self) -> Path:
        """The search's trial record (``search/trials.json``: contracts.trials.SearchRecord)."""
        return self.search / TRIALS_FILE

    @property
    def study(self) -> Path:
        """Optuna's SQLite storage of the search (``search/study.db``), when no storage URL is set."""
        return self.search / STUDY_FILE

    @property
    def winner(self) -> Path:
        """The search's first finalist as a candidate file (``search/winner.yaml``), ready for
        conf/candidate/."""
        return self.search / WINNER_FILE

    def finalist(self, name: str) -> Path:
        """A finalist after the first as a candidate file (``search/<name>.yaml``; the first is
        :attr:`winner`)."""
        return self.search / f"{name}.yaml"
