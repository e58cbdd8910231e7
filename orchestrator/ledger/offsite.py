"""What ``rollback`` needs, kept outside the sweep directory: a deleted sweep directory strands nothing.

Pipeline position: the orchestrator's ledger, beside the port's lock. When a sweep records its retained
configuration it calls :func:`keep_offsite` once: ``<lock dir>/port-<port>/`` gets the sweep's
``config.yaml``, the retained ``spec.json``, a record naming the sweep and its fingerprint, and a mirror of
the journal (every later append is written there too, with each launched server's spec copied under
``specs/``, so the live set and how to stop it survive). ``rollback DIR`` on a directory that is gone, or
lost its journal, puts these back (:func:`reinstate`) and restores as usual. One copy per port: the next
sweep on the port replaces it. A copy that cannot be written is said once and the sweep goes on (the
sweep directory is still the record).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from contracts.layout import (
    CONFIG_FILE,
    JOURNAL_FILE,
    OFFSITE_FILE,
    OffsitePaths,
    SweepPaths,
    journal_file,
    offsite_dir,
    retained_spec_file,
)
from orchestrator.ledger.events import Event
from orchestrator.ledger.journal import Journal, replay, utc_now
from orchestrator.ledger.lock import lock_dir


@dataclass(frozen=True)
class Offsite:
    """The copy for one port, and the sweep it belongs to."""

    folder: Path
    sweep_dir: str
    fingerprint: str

    @property
    def paths(self) -> OffsitePaths:
        return OffsitePaths(self.folder)

    @property
    def journal(self) -> Path:
        return self.paths.journal

    @property
    def spec(self) -> Path:
        return self.paths.spec

    @property
    def config(self) -> Path:
        return self.paths.config


class JournalMirror:
    """The hook :class:`~orchestrator.ledger.journal.Journal` calls after each append: the same line in the
    copy, its spec file copied beside it (a failure is said once; the mirror then stops)."""

    def __init__(self, offsite: Offsite) -> None:
        self.offsite = offsite
        self.broken: str | None = None

    def __call__(self, event: Event) -> None:
        if self.broken is not None:
            return
        try:
            _append(self.offsite, event)
        except OSError as exc:
            self.broken = f"the copy in {self.offsite.folder} stopped: {exc}"


def keep_offsite(journal: Journal, sweep_dir: Path, port: int, *, base: Path | None = None) -> Offsite:
    """Copy what rollback needs out of ``sweep_dir`` and mirror ``journal`` there from now on.

    Called when the sweep has recorded its retained spec (``retained/spec.json``) and its config, and again
    when a promotion made another spec the retained one (the journal's last word on it is what is copied).
    Raises OSError when the copy cannot be written (the caller says so and goes on).
    """
    folder = offsite_dir(base if base is not None else lock_dir(), port)
    events = journal.events()
    recorded = replay(events).retained_spec_file
    spec_text = (Path(recorded) if recorded else retained_spec_file(sweep_dir)).read_text()
    fingerprint = str(json.loads(spec_text).get("fingerprint", ""))
    if folder.exists():
        shutil.rmtree(folder)  # the previous sweep on this port: its copy is not this one's
    OffsitePaths(folder).specs.mkdir(parents=True, mode=0o700)
    offsite = Offsite(folder=folder, sweep_dir=str(sweep_dir.resolve()), fingerprint=fingerprint)
    offsite.spec.write_text(spec_text)
    config = SweepPaths(sweep_dir).config
    if config.exists():
        offsite.config.write_text(config.read_text())
    for event in events:  # the journal so far (a resumed sweep's history too)
        _append(offsite, event)
    record = {"sweep_dir": offsite.sweep_dir, "fingerprint": fingerprint, "at": utc_now()}
    _write_atomic(OffsitePaths(folder).record, json.dumps(record) + "\n")
    journal.mirror = JournalMirror(offsite)
    return offsite


def find_offsite(sweep_dir: Path, *, base: Path | None = None) -> Offsite | None:
    """The copy kept for ``sweep_dir`` on any port (None when there is none, or another sweep replaced it)."""
    root = base if base is not None else lock_dir()
    wanted = str(sweep_dir.resolve())
    if not root.is_dir():
        return None
    for record in sorted(root.glob(f"port-*/{OFFSITE_FILE}")):
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("sweep_dir") == wanted:
            return Offsite(folder=record.parent, sweep_dir=wanted, fingerprint=str(data.get("fingerprint")))
    return None


def port_offsite(port: int, *, base: Path | None = None) -> Offsite | None:
    """The copy kept for ``port``: the last sweep that took over the service there (None: no readable one)."""
    folder = offsite_dir(base if base is not None else lock_dir(), port)
    try:
        data = json.loads(OffsitePaths(folder).record.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("sweep_dir"):
        return None
    return Offsite(folder=folder, sweep_dir=str(data["sweep_dir"]), fingerprint=str(data.get("fingerprint")))


def attach(journal: Journal, sweep_dir: Path, *, base: Path | None = None) -> Offsite | None:
    """Mirror ``journal`` (rollback's, stop's) into the copy kept for ``sweep_dir``, when there is one."""
    offsite = find_offsite(sweep_dir, base=base)
    if offsite is not None and journal.mirror is None:
        journal.mirror = JournalMirror(offsite)
    return offsite


def sweep_dir_gone(sweep_dir: Path) -> bool:
    """The sweep directory went under a running sweep (its journal is gone): what is still to be written
    (the restore's journal lines, its evidence) would belong to no journal there; it goes beside the lock.
    One predicate for :func:`orchestrator.measure.launch.writable_or_elsewhere` and the restore."""
    return not journal_file(sweep_dir).exists()


def needs_reinstating(sweep_dir: Path) -> bool:
    """The sweep directory lost what rollback reads: its journal's retained record or its config."""
    if not SweepPaths(sweep_dir).config.exists():
        return True
    journal = journal_file(sweep_dir)
    return not journal.exists() or journal.stat().st_size == 0


def reinstate(offsite: Offsite, sweep_dir: Path) -> list[str]:
    """Put the copy back into ``sweep_dir`` (made again if gone): config.yaml and the journal, whose spec
    files point into the copy. Returns what was put back."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    done: list[str] = []
    config = SweepPaths(sweep_dir).config
    if offsite.config.exists() and not config.exists():
        shutil.copyfile(offsite.config, config)
        done.append(CONFIG_FILE)
    journal = journal_file(sweep_dir)
    if offsite.journal.exists():
        if journal.exists() and journal.stat().st_size:
            os.replace(journal, journal.with_name(journal.name + ".partial"))
        shutil.copyfile(offsite.journal, journal)
        done.append(JOURNAL_FILE)
    return done


def _append(offsite: Offsite, event: Event) -> None:
    line = event.to_line()
    spec_file = line.get("spec_file")
    if isinstance(spec_file, str) and spec_file:
        line["spec_file"] = str(_keep_spec(offsite, event, spec_file))
    candidate_file = line.get("candidate_file")
    if isinstance(candidate_file, str) and candidate_file:  # a promotion's: the restore reads it
        kept = offsite.paths.candidate_file(str(line.get("candidate", "server")))
        if Path(candidate_file).exists():
            shutil.copyfile(candidate_file, kept)
        line["candidate_file"] = str(kept)
    text = json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n"
    fd = os.open(offsite.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _keep_spec(offsite: Offsite, event: Event, spec_file: str) -> Path:
    """The copy of a launched server's spec (the retained one is ``spec.json`` of the copy: a retained
    server, or the recorded retained spec, with the copy's fingerprint; a promoted candidate's launch
    before the copy was made its own, or the baseline's record after it, are copied under ``specs/``)."""
    source = Path(spec_file)
    role = getattr(event, "role", None)
    candidate = getattr(event, "candidate", "server")
    retained = role == "retained" or source.resolve() == retained_spec_file(Path(offsite.sweep_dir)).resolve()
    if retained and getattr(event, "fingerprint", offsite.fingerprint) == offsite.fingerprint:
        return offsite.spec
    target = offsite.paths.specs / f"{candidate}.json"
    if source.exists():
        shutil.copyfile(source, target)
    return target


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
