"""The sweep that ``rollback``, ``stop`` and ``status`` act on: its directory, config, port and journal.

Pipeline position: outside the sweep, under :mod:`.rollback`, :mod:`.stop` and :mod:`.status`. They read the
sweep directory (journal, recorded specs, composed config) or, when it is gone or lost its records, the copy
kept beside the port's lock (:mod:`orchestrator.ledger.offsite`), which :func:`reinstate_if_lost` puts back.
"""

from __future__ import annotations

from pathlib import Path

from contracts.errors import GauntletError, RollbackError
from contracts.layout import DEFAULT_SWEEPS_DIR, JOURNAL_FILE, journal_file, latest_sweep
from contracts.schema import GauntletConfig
from contracts.sweepdir import read_sweep_config
from orchestrator.config.validate import Sources, validate
from orchestrator.ledger import offsite
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import launching_place
from orchestrator.servers.seams import Seams


def resolve_sweep_dir(arg: str | None, sweeps_dir: Path | None = None) -> Path:
    """The sweep directory given, or the latest one."""
    if arg:
        path = Path(arg)
        if not journal_file(path).exists() and offsite.find_offsite(path) is None:
            raise RollbackError(
                f"{path}: no {JOURNAL_FILE} here", hint="pass a sweep directory made by gauntlet"
            )
        return path
    sweeps = sweeps_dir if sweeps_dir is not None else Path(DEFAULT_SWEEPS_DIR)
    return latest_sweep(
        sweeps, error=RollbackError, hint="pass the sweep directory: rollback|stop|status DIR"
    )


def load_sweep_config(sweep_dir: Path) -> GauntletConfig:
    """The composed configuration a sweep recorded (config.yaml), typed and validated as at the start."""
    cfg = read_sweep_config(sweep_dir)
    validate(cfg, Sources())
    return cfg


def load_for_acting(sweep_dir: Path, seams: Seams) -> GauntletConfig:
    """The sweep's configuration, after :func:`reinstate_if_lost`."""
    reinstate_if_lost(sweep_dir, seams)
    return load_sweep_config(sweep_dir)


def reinstate_if_lost(sweep_dir: Path, seams: Seams) -> None:
    """A sweep directory that is gone (or lost its journal or config) is put back from the copy kept
    beside the port's lock."""
    if offsite.needs_reinstating(sweep_dir):
        kept = offsite.find_offsite(sweep_dir)
        if kept is not None:
            back = offsite.reinstate(kept, sweep_dir)
            seams.say(
                f"{sweep_dir} lost {', '.join(back) or 'its records'}: put back from the copy kept in "
                f"{kept.folder}"
            )


def sweep_port(sweep_dir: Path) -> int | None:
    """The sweep's service port: its config, else its recorded servers' (None when nothing says); a
    deleted sweep directory's from the copy beside the lock."""
    try:
        return read_sweep_config(sweep_dir).service.port
    except (GauntletError, OSError, ValueError):
        pass
    state = readable_journal(sweep_dir).replay()
    ports = [live.port for live in state.live.values()] + [p.port for p in state.pending]
    return ports[0] if ports else None


def readable_journal(sweep_dir: Path) -> Journal:
    """The sweep's journal, or the mirror kept beside the port's lock when the sweep directory lost it
    (deleted mid-sweep: the restore then journals there, :mod:`orchestrator.ledger.offsite`)."""
    journal = Journal.of_sweep(sweep_dir, launching_place())
    if journal.path.exists():
        return journal
    kept = offsite.find_offsite(sweep_dir)
    return journal if kept is None else Journal(kept.journal, place=launching_place())
