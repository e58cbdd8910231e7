"""The state an older gauntlet left after a sweep refused at its opening (issue 42, item 14), made by hand.

Before the opening checked the live service first, sweep B (another baseline than the live service's)
had, by the time it was refused: moved ``<sweeps>/latest`` to its directory, journaled its start and its
retained spec there, and replaced the copy beside the port's lock with its own. Tests that replay A, B, C
build that state on B's directory to show that status, rollback and the next sweep still find A's live
service (tests/unit/test_live_service_ledger.py, tests/integration/test_refused_opening.py).
"""

from __future__ import annotations

from pathlib import Path

from contracts.layout import journal_file, point_latest, retained_spec_file
from orchestrator.ledger.events import RetainedRecorded, SweepStarted
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.offsite import keep_offsite


def as_an_older_gauntlet_left_it(
    sweeps: Path, refused: Path, port: int, *, lock_base: Path | None = None
) -> None:
    """Make ``refused`` (a sweep directory whose opening was refused) what an older gauntlet left: its
    journal's two first lines, a retained spec, ``latest`` on it and the port's copy its own."""
    spec = retained_spec_file(refused)
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text('{"fingerprint": "sha256:refused"}\n')
    journal = Journal(journal_file(refused))
    journal.append(SweepStarted(phase="begin", resumed=False))
    journal.append(RetainedRecorded(candidate="refused", fingerprint="sha256:refused", spec_file=str(spec)))
    keep_offsite(journal, refused, port, base=lock_base)
    point_latest(sweeps, refused)
