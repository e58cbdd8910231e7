"""The sweep that ``rollback``, ``stop`` and ``status`` act on: its directory, config, port and journal.

Pipeline position: outside the sweep, under :mod:`.rollback`, :mod:`.stop` and :mod:`.status`. They read the
sweep directory (journal, recorded specs, composed config) or, when it is gone or lost its records, the copy
kept beside the port's lock (:mod:`orchestrator.ledger.offsite`), which :func:`reinstate_if_lost` puts back.
"""

from __future__ import annotations

from pathlib import Path

from contracts.errors import ConfigError, GauntletError, RollbackError
from contracts.layout import DEFAULT_SWEEPS_DIR, JOURNAL_FILE, SweepPaths, journal_file, latest_sweep
from contracts.schema import GauntletConfig
from contracts.sweepdir import read_sweep_config
from orchestrator.config.validate import Sources, validate
from orchestrator.ledger import offsite
from orchestrator.ledger.events import Adopted, Launching, Started
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.live import LiveService, live_service
from orchestrator.ledger.lock import running_sweep
from orchestrator.ledger.nodes import launching_place
from orchestrator.servers.leftovers import runs_now
from orchestrator.servers.seams import Say, Seams
from orchestrator.servers.session import Servers


def resolve_sweep_dir(arg: str | None, sweeps_dir: Path | None = None) -> Path:
    """The sweep directory given, or the latest one."""
    if arg:
        path = Path(arg)
        recorded = SweepPaths(path).config.exists()  # a sweep refused at its opening has no journal
        if not journal_file(path).exists() and offsite.find_offsite(path) is None and not recorded:
            raise RollbackError(
                f"{path}: no {JOURNAL_FILE} here", hint="pass a sweep directory made by gauntlet"
            )
        return path
    sweeps = sweeps_dir if sweeps_dir is not None else Path(DEFAULT_SWEEPS_DIR)
    return latest_sweep(
        sweeps, error=RollbackError, hint="pass the sweep directory: rollback|stop|status DIR"
    )


def load_sweep_config(sweep_dir: Path, say: Say | None = None) -> GauntletConfig:
    """The composed configuration a sweep recorded (config.yaml), typed and validated as at the start.

    With ``say`` (acting on the sweep: rollback), a recorded configuration that a check added since the
    sweep ran refuses (a cost bound without a price, a TLS file moved away) is acted on as recorded, and
    ``say`` names what the checks found: the restore relaunches the recorded retained spec after checking
    its fingerprint, so a rule about what a new sweep may measure must never stand between a user and
    their retained configuration.
    """
    cfg = read_sweep_config(sweep_dir)
    try:
        validate(cfg, Sources())
    except ConfigError as exc:
        if say is None:
            raise
        found = "; ".join(str(p) for p in exc.problems)
        say(
            f"{SweepPaths(sweep_dir).config}: the recorded configuration no longer passes this version's "
            f"checks ({found}); acting on it as recorded (the retained spec is checked by its fingerprint)"
        )
    return cfg


def load_for_acting(sweep_dir: Path, seams: Seams) -> GauntletConfig:
    """The sweep's configuration, after :func:`reinstate_if_lost`; acted on even where a newer check
    refuses it (:func:`load_sweep_config`)."""
    reinstate_if_lost(sweep_dir, seams)
    return load_sweep_config(sweep_dir, say=seams.say)


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


def live_elsewhere(sweep_dir: Path, seams: Seams, port: int | None = None) -> LiveService | None:
    """The live service on this sweep's port when another sweep answers for it (the port's ledger, then
    ``latest`` beside this sweep: :func:`orchestrator.ledger.live.live_service`); None when this sweep
    does, when none runs, or when nothing says the port."""
    port = port if port is not None else sweep_port(sweep_dir)
    if port is None:
        return None
    servers = Servers(readable_journal(sweep_dir), seams)
    live = live_service(port, runs_now(servers), sweeps_dir=sweep_dir.parent)
    if live is None or live.sweep.resolve() == sweep_dir.resolve():
        return None
    return live


def follow_live_service(sweep_dir: Path, seams: Seams, *, command: str) -> Path:
    """The sweep ``status``, ``rollback`` and ``stop`` act on for ``sweep_dir``: itself, unless it never
    started a server (its opening was refused; an older gauntlet moved ``latest`` to it all the same) and
    does not run now, while the live service on its port is another sweep's: then that sweep, said first.
    Acting on the empty one would orphan the live service (``status``: "nothing runs", ``rollback``: a
    restore that fails on the port, ``stop``: nothing stopped)."""
    port = sweep_port(sweep_dir)
    if port is None:
        return sweep_dir
    try:
        events = readable_journal(sweep_dir).events()
    except (GauntletError, OSError):
        return sweep_dir
    if any(isinstance(e, Launching | Started | Adopted) for e in events):
        return sweep_dir
    if running_sweep(sweep_dir, port, role=command) is not None:
        return sweep_dir
    live = live_elsewhere(sweep_dir, seams, port)
    if live is None:
        return sweep_dir
    seams.say(
        f"{sweep_dir} started no server (its opening was refused, or it never launched one); the live "
        f"service on port {port} is {live.describe()}: `{command}` acts on {live.sweep}"
    )
    return live.sweep


def acting_sweep(arg: str | None, seams: Seams, *, command: str) -> Path:
    """The sweep ``status``, ``rollback`` or ``stop`` acts on: the one given (or ``latest``), followed to the
    sweep that answers for the live service when it started none (:func:`follow_live_service`)."""
    return follow_live_service(resolve_sweep_dir(arg), seams, command=command)
