"""gauntlet's live service on a port: the retained server a sweep or rollback left serving, from the ledger.

Pipeline position: the orchestrator's ledger, beside the port's lock and the copy kept beside it
(:mod:`.offsite`). A sweep's opening (:mod:`orchestrator.measure.begin`), ``doctor``, ``status``,
``rollback`` and ``stop`` ask :func:`live_service` which sweep answers for the server on the service's port:
the sweep the copy beside the port's lock names (the last one that took the service over: a sweep whose
opening was refused never replaces it) when it is a sweep of the same sweeps folder, then the one
``<sweeps>/latest`` points at, then the folder's newest sweeps by their journals. ``latest`` alone is not
trusted: a sweep refused at its opening by an older gauntlet moved it (and the copy) to a directory that
started nothing, and reading only it would orphan the live service (nobody stops it, restores it or takes
it over). :func:`live_service_mismatch` says, for the opening and for ``doctor`` alike, why a live service
the configured baseline does not describe is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import GauntletError, SpecError
from contracts.layout import journal_file, previous_latest
from launch.spec import LaunchSpec, diff_specs
from orchestrator.ledger.events import LiveServer
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import launching_place
from orchestrator.ledger.offsite import find_offsite, port_offsite

#: How many of a sweeps folder's newest sweeps are read when neither the port's copy nor ``latest`` names
#: the sweep that answers for the live service (both on a refused sweep, as an older gauntlet left them).
SCAN_NEWEST = 32
#: Whether a recorded server still runs (same pid and start time): the process table's word.
Alive = Callable[[LiveServer], bool]


@dataclass(frozen=True)
class LiveService:
    """The retained server serving on a port, and the sweep whose journal answers for it."""

    server: LiveServer
    sweep: Path
    #: The candidate file of a promoted live service (``promote`` wrote it): what a sweep selects as its
    #: baseline to take the service over (None: the sweep's configured baseline runs).
    candidate_file: str | None = None

    def describe(self) -> str:
        return f"{self.server.candidate} (pid {self.server.pid}, {self.server.role}) of {self.sweep}"


@dataclass(frozen=True)
class Mismatch:
    """A live service the configured baseline does not describe: what differs, and what to do."""

    message: str
    differences: list[str]
    hint: str


def answering_sweeps(port: int, sweeps_dir: Path | None = None, *, base: Path | None = None) -> list[Path]:
    """The sweeps that may answer for the service on ``port``, in the order asked: the one the copy beside
    the port's lock names (with ``sweeps_dir``, only a sweep of that folder: a sweep of another sweeps
    folder on the same port is refused on the port, naming the server, as before), then
    ``<sweeps_dir>/latest``'s, then the folder's newest sweeps by their journals (each once)."""
    found: list[Path] = []
    kept = port_offsite(port, base=base)
    if kept is not None and (sweeps_dir is None or Path(kept.sweep_dir).parent == sweeps_dir.resolve()):
        found.append(Path(kept.sweep_dir))
    latest = previous_latest(sweeps_dir) if sweeps_dir is not None else None
    if latest is not None:
        found.append(latest)
    if sweeps_dir is not None and sweeps_dir.is_dir():  # an older gauntlet moved both to a refused sweep
        found.extend(_newest_sweeps(sweeps_dir))
    unique: dict[str, Path] = {}
    for sweep in found:
        unique.setdefault(str(sweep.resolve()), sweep)
    return list(unique.values())


def _newest_sweeps(sweeps_dir: Path) -> list[Path]:
    """The sweeps of the folder whose journals were written last, newest first (:data:`SCAN_NEWEST`)."""
    dated: list[tuple[float, Path]] = []
    for sweep in sweeps_dir.iterdir():
        if sweep.is_symlink() or not sweep.is_dir():
            continue
        try:
            dated.append((journal_file(sweep).stat().st_mtime, sweep))
        except OSError:
            continue
    return [sweep for _, sweep in sorted(dated, reverse=True)[:SCAN_NEWEST]]


def sweep_journal(sweep: Path, *, base: Path | None = None) -> Journal:
    """A sweep's journal, or its mirror beside the port's lock when the directory lost it."""
    journal = Journal.of_sweep(sweep, launching_place())
    if journal.path.exists():
        return journal
    kept = find_offsite(sweep, base=base)
    return journal if kept is None else Journal(kept.journal, place=launching_place())


def live_service(
    port: int, alive: Alive, *, sweeps_dir: Path | None = None, base: Path | None = None
) -> LiveService | None:
    """The retained server gauntlet left serving on ``port`` that still runs (``alive``), and the sweep
    that answers for it (:func:`answering_sweeps`); None when there is none."""
    for sweep in answering_sweeps(port, sweeps_dir, base=base):
        try:
            state = sweep_journal(sweep, base=base).replay()
        except (GauntletError, OSError):
            continue
        for server in state.retained_live:
            if server.port == port and alive(server):
                promoted = server.fingerprint == state.retained_fingerprint
                return LiveService(server, sweep, state.retained_candidate_file if promoted else None)
    return None


def live_service_mismatch(live: LiveService, spec: LaunchSpec, baseline_file: str) -> Mismatch | None:
    """Why a sweep refuses to take over ``live`` (None: it runs ``spec``, the configured baseline's).

    ``baseline_file`` is the file the user selected as the baseline (``candidate@baseline``, from their
    ``--config-dir`` when it is there), which is what to edit."""
    if live.server.fingerprint == spec.fingerprint:
        return None
    try:
        differences = diff_specs(LaunchSpec.read(Path(live.server.spec_file)), spec)
    except (OSError, SpecError):
        differences = []
    return Mismatch(
        message=(
            f"the live service {live.describe()} runs {live.server.fingerprint}, but the configured "
            f"baseline renders {spec.fingerprint}"
        ),
        differences=differences,
        hint=live_service_hint(live, baseline_file),
    )


def live_service_hint(live: LiveService, baseline_file: str) -> str:
    """What makes a sweep's configured baseline the live service (pure): the file ``promote`` wrote for a
    promoted one (named, with how to select it), else the user's baseline file made to describe it."""
    stop = f"or stop it first with `python -m orchestrator stop {live.sweep}`"
    if live.candidate_file is None:
        return (
            f"make {baseline_file} describe the live service (or select the baseline file that does: "
            f"candidate@baseline=NAME), {stop}"
        )
    path = Path(live.candidate_file)
    conf, name = path.parent.parent, path.stem
    return (
        f"the live service is {name}, promoted in {live.sweep}, and {path} describes it: select it as the "
        f"baseline with `-cd {conf} candidate@baseline={name}` (or copy that file into the candidate/ "
        f"folder of your own --config-dir), {stop}"
    )
