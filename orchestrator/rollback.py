"""``rollback`` and ``status``: act on what the journal says gauntlet left running.

Pipeline position: outside the sweep, reading only the sweep directory (journal, recorded specs, composed
config). ``rollback`` stops every server gauntlet started that is still running (and only those: a pid is
trusted only when its create time matches the journal), restores the retained configuration from its
recorded spec after checking the fingerprint, waits for ready and runs the recovery validation. Running it
twice leaves one healthy retained server. ``status`` says what is running and whether it is healthy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx

from contracts.errors import GauntletError, RollbackError, SpecError
from contracts.results import CandidateRun, RecoveryValidation, read_model
from contracts.schema import GauntletConfig, read_sweep_config
from launch.spec import LaunchSpec
from orchestrator.config import Sources, validate
from orchestrator.journal import Journal, LiveServer
from orchestrator.sweep import Lifecycle, Seams

DEFAULT_SWEEPS = Path("sweeps")


def resolve_sweep_dir(arg: str | None, sweeps_dir: Path = DEFAULT_SWEEPS) -> Path:
    """The sweep directory given, or the latest one."""
    if arg:
        path = Path(arg)
        if not (path / "journal.jsonl").exists():
            raise RollbackError(
                f"{path}: no journal.jsonl here", hint="pass a sweep directory made by gauntlet"
            )
        return path
    latest = sweeps_dir / "latest"
    if not latest.exists():
        raise RollbackError(
            f"no sweep found ({latest} does not exist)", hint="pass the sweep directory: rollback DIR"
        )
    return latest.resolve()


def load_sweep_config(sweep_dir: Path) -> GauntletConfig:
    """The composed configuration a sweep recorded (config.yaml), typed and validated as at the start."""
    cfg = read_sweep_config(sweep_dir)
    validate(cfg, Sources())
    return cfg


def rollback(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout) -> RecoveryValidation:
    """Make the retained configuration the one healthy server, validated under load."""
    cfg = load_sweep_config(sweep_dir)
    life = Lifecycle(cfg, sweep_dir, seams)
    state = life.journal.replay()
    life.journal.append("rollback_requested", live=len(state.live))
    keep = _healthy_retained(state.live.values(), state.retained_fingerprint, seams)
    others = [s for s in state.live.values() if keep is None or s.pid != keep[0].pid]
    run_file = sweep_dir / "recovery" / "run.json"
    if keep is not None and not others and not state.pending and run_file.exists():
        live, server = keep
        seams.say(
            f"the retained configuration is already the one healthy server (pid {live.pid}); validating it"
        )
        run = read_model(run_file, CandidateRun)
        result = life.validate_retained(
            server, server.spec, state.retained_fingerprint or "", run, sweep_dir / "recovery"
        )
    else:
        result = life.restore(reason="rollback")
    verdict = "OK" if result.ok else "FAILED"
    out.write(
        f"rollback {verdict}: {result.candidate} {result.fingerprint} pid {result.pid}\n  {result.reason}\n"
    )
    return result


def _healthy_retained(
    live: Iterable[LiveServer], fingerprint: str | None, seams: Seams
) -> tuple[LiveServer, Any] | None:
    for server in live:
        if server.role != "retained" or server.fingerprint != fingerprint:
            continue
        try:
            spec = LaunchSpec.from_json(Path(server.spec_file).read_text(), source=server.spec_file)
        except (OSError, SpecError):
            return None
        handle = seams.supervisor.adopt(
            server.pid, server.pgid, server.create_time, spec, Path(server.log_path)
        )
        if handle is None:
            return None
        if _healthy(spec, seams.transport):
            return server, handle
    return None


def _healthy(spec: LaunchSpec, transport: httpx.BaseTransport | None) -> bool:
    try:
        with httpx.Client(base_url=spec.base_url, timeout=5.0, transport=transport) as client:
            return client.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class StatusLine:
    """One server the journal says gauntlet started."""

    live: LiveServer
    alive: bool
    healthy: bool
    retained: bool


def status(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout) -> int:
    """Print what gauntlet has running; 0 when exactly one healthy retained server runs and nothing else."""
    state = Journal(sweep_dir / "journal.jsonl").replay()
    lines: list[StatusLine] = []
    warnings: list[str] = []
    for live in state.live.values():
        try:
            text = Path(live.spec_file).read_text()
            spec, _ = LaunchSpec.parse_json(text, source=live.spec_file)
        except (OSError, SpecError) as exc:
            warnings.append(f"cannot read {live.spec_file}: {exc}")
            lines.append(StatusLine(live, False, False, False))
            continue
        try:
            LaunchSpec.from_json(text, source=live.spec_file)
        except SpecError as exc:
            warnings.append(f"{exc.message}: a rollback from this sweep will refuse to restore it")
        handle = seams.supervisor.adopt(live.pid, live.pgid, live.create_time, spec, Path(live.log_path))
        alive = handle is not None
        healthy = alive and _healthy(spec, seams.transport)
        retained = live.role == "retained" and live.fingerprint == state.retained_fingerprint
        lines.append(StatusLine(live, alive, healthy, retained))
    out.write(f"sweep: {sweep_dir}\n")
    out.write(f"retained configuration: {state.retained_fingerprint or '(none recorded)'}\n")
    if not lines:
        out.write("nothing gauntlet started is running\n")
    for line in lines:
        live = line.live
        tag = "retained" if line.retained else live.role
        health = "healthy" if line.healthy else ("alive, NOT healthy" if line.alive else "gone")
        out.write(
            f"  {live.candidate:<20} {tag:<9} pid {live.pid:<7} port {live.port:<5} {health:<18} "
            f"{live.fingerprint}\n"
        )
    for warning in warnings:
        out.write(f"warning: {warning}\n")
    for pending in state.pending:
        out.write(f"  {pending.candidate:<20} launch announced at {pending.at} without a recorded pid\n")
    running = [ln for ln in lines if ln.alive]
    good = len(running) == 1 and running[0].retained and running[0].healthy and not state.pending
    if state.last_event in ("restoring", "launching", "load_started") or not good:
        out.write(
            "state: not settled; `python -m orchestrator rollback` restores the retained configuration\n"
        )
    else:
        out.write("state: the retained configuration is the one healthy server\n")
    return 0 if good else 1


def main_rollback(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    try:
        sweep_dir = resolve_sweep_dir(args[0] if args else None)
        result = rollback(sweep_dir, seams_factory())
    except GauntletError as exc:
        print(f"gauntlet rollback: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0 if result.ok else 7


def main_status(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    try:
        sweep_dir = resolve_sweep_dir(args[0] if args else None)
        return status(sweep_dir, seams_factory())
    except GauntletError as exc:
        print(f"gauntlet status: {exc}", file=sys.stderr)
        return exc.exit_code
