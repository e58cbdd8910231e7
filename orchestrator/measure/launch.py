"""One measured launch: a spec launched into a fresh result directory, measured, torn down, recorded.

Pipeline position: the orchestrator's middle step, between a server session
(:mod:`orchestrator.servers.session`) and one profile's run (:mod:`orchestrator.measure.profile`). Every
launch that measures goes through :func:`measured_launch`: a candidate (:mod:`.candidate`), the baseline's
interleaved blocks (:mod:`.interleave`) and the restored retained configuration
(:mod:`orchestrator.recovery.restore`)::

    with measured_launch(ctx, spec, out, role="baseline", labels=labels, discard_as=name) as launch:
        if launch.ready:
            for profile, repeat in grid:
                launch.measure(profile, repeat)
    # torn down, then out/run.json written: also on an exception or Ctrl-C (not for a kept session)
    return launch.recorded

This module is the one place a :class:`Launch` is built (:func:`measured_launch`, also for a server already
running: ``running=``) and the one writer of a launch's run.json (:func:`_write_run`, through a
:class:`Launch` or :func:`refused_launch`).

A launch's directory is complete when its run.json records its own end (a failed start, a server lost under
load) or every run it should have has a summary that was not interrupted, or was stopped by its time bound
(:func:`launch_complete`); resume skips it (:func:`skip_complete`). The resume checks judge what
:func:`launch_state` read from the directory, once per launch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.benchserve import add_energy
from contracts.cost import pricing_of
from contracts.energy import with_throughput
from contracts.errors import GauntletError, sweep_dir_error
from contracts.files import probe_writable, read_model, write_model
from contracts.layout import RUN_FILE, SUMMARY_FILE, LaunchPaths, repeat_dir, repeat_name
from contracts.results import (
    CandidateRun,
    Phase,
    Pricing,
    ProfileSummary,
    RunEnergy,
    StartupRecord,
    WatchEvent,
)
from contracts.sweepdir import Results, load_results
from launch.gpu_select import used_gpus
from launch.spec import LaunchSpec
from orchestrator.ledger.events import DiscardingPartial, Role, SkippedComplete
from orchestrator.ledger.lock import lock_dir
from orchestrator.ledger.offsite import sweep_dir_gone
from orchestrator.measure.profile import measure_profile, server_lost
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import backend_of
from orchestrator.servers.session import ServerSession

#: The (profile, repeat) runs a complete launch has, given its record and what it left; None: it cannot be
#: complete.
ExpectedRuns = Callable[[CandidateRun, Results], Iterable[tuple[str, int]] | None]


@dataclass(frozen=True)
class RunLabels:
    """What a launch's run.json says about it beyond its spec and its startup."""

    is_baseline: bool
    phase: Phase
    node: str | None = None
    paired_baseline: str | None = None
    follows: str | None = None


def _write_run(out: Path, run: CandidateRun) -> CandidateRun:
    """The one writer of a launch's ``run.json`` (``out/run.json``): a :class:`Launch` writes its record
    through it, and :func:`refused_launch` the record of a launch refused before it started; ``run``."""
    write_model(LaunchPaths(out).run_file, run)
    return run


def run_record(
    spec: LaunchSpec, startup: StartupRecord, labels: RunLabels, pricing: Pricing | None = None
) -> CandidateRun:
    """A launch's record before it measured anything (``pricing``: the host's prices, for its cost)."""
    return CandidateRun(
        candidate=spec.candidate,
        fingerprint=spec.fingerprint,
        backend=backend_of(spec),
        host=spec.host,
        is_baseline=labels.is_baseline,
        phase=labels.phase,
        startup=startup,
        node=labels.node,
        paired_baseline=labels.paired_baseline,
        follows=labels.follows,
        pricing=pricing,
    )


@dataclass
class Launch:
    """A launch being measured: its session, its result directory and what it measured so far."""

    ctx: SweepContext
    session: ServerSession
    out: Path
    run: CandidateRun
    watch: list[WatchEvent] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    free_gpu_gib: list[float] | None = None
    #: Each measured run's energy, by its directory (profile/r<k>).
    energy: dict[str, RunEnergy] = field(default_factory=dict)
    #: The record last written to run.json (None until then).
    written: CandidateRun | None = None

    @property
    def ready(self) -> bool:
        return self.session.ready

    @property
    def lost(self) -> bool:
        """The server died, or a profile could not run against it."""
        return server_lost(self.watch)

    @property
    def recorded(self) -> CandidateRun:
        """What run.json holds (after the launch ended)."""
        if self.written is None:
            raise RuntimeError(f"{self.out}: the launch wrote no {RUN_FILE}")
        return self.written

    def measure(self, profile: str, repeat: int) -> list[WatchEvent]:
        """Run one profile's repeat into ``<out>/<profile>/r<k>/``; returns what the watcher saw meanwhile.
        The GPUs' energy is read over the run's measured window (the seams' meter, narrowed by the load
        runner's ``on_window``; the whole run when the runner does not call it; "not measured" says why)."""
        window = self.ctx.seams.energy(self.session.spec).open()
        run_dir = repeat_dir(self.out, profile, repeat)
        try:
            events = measure_profile(
                self.ctx,
                self.session,
                profile=profile,
                repeat=repeat,
                out=run_dir,
                on_window=window.edge,
            )
        finally:
            energy = window.close()  # also on a stop: a power-sampling thread must end with its run
        name = repeat_name(profile, repeat)
        self.profiles.append(name)
        self.watch.extend(events)
        with contextlib.suppress(GauntletError, OSError, ValueError):  # no readable summary: no figures
            if energy.measured:
                summary = read_model(LaunchPaths(self.out).repeat(profile, repeat).summary, ProfileSummary)
                energy = with_throughput(energy, summary.output_tps)
            add_energy(run_dir, energy, self.run.pricing)  # bench_serve.json's energy and cost keys
        self.energy[name] = energy
        return events

    def summary(self, profile: str, repeat: int) -> ProfileSummary:
        return read_model(LaunchPaths(self.out).repeat(profile, repeat).summary, ProfileSummary)

    def record(self) -> CandidateRun:
        """The record now: the watcher's events, the runs written, free memory and the teardown, if any."""
        update: dict[str, Any] = {
            "watch": self.watch,
            "profiles": self.profiles,
            "free_gpu_gib_after_warmup": self.free_gpu_gib,
            "energy": self.energy,
        }
        if self.session.teardown_record is not None:
            update["teardown"] = self.session.teardown_record
        return self.run.model_copy(update=update)

    def write(self) -> CandidateRun:
        """Write run.json now (the launch's end writes it again only when it changed since)."""
        self.written = _write_run(self.out, self.record())
        return self.written

    def write_so_far(self) -> CandidateRun:
        """Write what an adaptive look judges to run.json: the record before measuring with the runs so far
        and the memory reading after warmup (without it, on a GPU host, the memory gate could not run and
        the look would be incomplete). The launch's end writes its full record over it."""
        update = {
            "profiles": list(self.profiles),
            "free_gpu_gib_after_warmup": self.free_gpu_gib,
            "energy": dict(self.energy),
        }
        self.written = _write_run(self.out, self.run.model_copy(update=update))
        return self.written

    def close(self) -> None:
        """Tear the server down, then write run.json with the teardown. A kept server (the restored live
        service) is left as it is: whoever validates it writes its record."""
        if self.session.kept:
            return
        if self.session.ready:
            self.session.teardown()
        if self.written is None or self.written != self.record():
            self.write()


def fresh_dir(ctx: SweepContext, out: Path, *, discard_as: str | None) -> None:
    """Discard what an earlier launch left in ``out`` (journalled as ``discard_as`` when given) and make it
    again, empty."""
    if out.exists():
        if discard_as is not None:
            ctx.journal.append(DiscardingPartial(candidate=discard_as))
        shutil.rmtree(out)
    out.mkdir(parents=True)


def writable_or_elsewhere(ctx: SweepContext, out: Path) -> Path:
    """``out`` when its folder takes writes, else a fresh folder outside the sweep directory (under the
    lock folder), said once: the restore of the live service must not fail because the sweep directory
    refuses its evidence (EACCES, read-only, full); its records then live there."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    elsewhere = lock_dir() / "evidence" / f"{ctx.dir.name}-{out.name}-{stamp}-{os.getpid()}"
    if sweep_dir_gone(ctx.dir):
        ctx.say(f"the sweep directory {ctx.dir} is gone: {out.name} is written to {elsewhere} instead")
        return elsewhere
    try:
        probe_writable(out.parent)
    except OSError as exc:
        disk = sweep_dir_error(exc, ctx.dir)
        if disk is None:
            raise
        ctx.say(f"{disk.message.split('; ')[0]}: {out.name} is written to {elsewhere} instead")
        return elsewhere
    return out


def write_spec(out: Path, spec: LaunchSpec) -> Path:
    """The rendered spec (``spec.json``, what the journal points at) and its vLLM config; the spec's file."""
    paths = LaunchPaths(out)
    spec_file = paths.spec
    spec_file.write_text(spec.to_json())
    paths.vllm_config.write_text(spec.config_yaml)
    return spec_file


@contextmanager
def measured_launch(
    ctx: SweepContext,
    spec: LaunchSpec,
    out: Path,
    *,
    role: Role,
    labels: RunLabels,
    discard_as: str | None,
    spec_file: Path | None = None,
    running: ServerSession | None = None,
) -> Iterator[Launch]:
    """Launch ``spec`` into a fresh ``out`` and hand over the :class:`Launch` to measure with; on leaving
    (also on an exception or Ctrl-C) tear it down unless the session keeps it, then write run.json.

    ``spec_file``: a recorded spec to launch from (the retained one); by default the spec is written into
    ``out``. A launch that did not start is handed over too (``launch.ready`` is False): its record is the
    evidence. ``running``: a server already running (the live retained server, validated where it runs):
    nothing is launched, the session is kept (never torn down here) and its record is a start; whoever
    validates it writes that record. This is the one place a :class:`Launch` is built.
    """
    fresh_dir(ctx, out, discard_as=discard_as)
    if running is None:
        launched_from = spec_file if spec_file is not None else write_spec(out, spec)
        serving = ctx.servers.launch(spec, launched_from, LaunchPaths(out).server_log, role=role)
    else:
        running.keep()
        serving = running  # entering a session that has its server launches nothing
    with serving as session:
        startup = session.startup if session.launched else StartupRecord(ok=True)
        launch = Launch(
            ctx,
            session,
            out,
            run_record(
                spec, startup, labels, pricing_of(ctx.cfg.host, used_gpus(spec.argv, spec.config_yaml))
            ),
        )
        try:
            yield launch
        finally:
            launch.close()


def refused_launch(
    ctx: SweepContext,
    spec: LaunchSpec,
    out: Path,
    *,
    labels: RunLabels,
    startup: StartupRecord,
    discard_as: str | None,
) -> CandidateRun:
    """A launch refused before it started (doctor found why it cannot start): a fresh ``out`` with the spec
    and run.json recording ``startup``, the failed start it stands for; nothing is launched. Its record."""
    fresh_dir(ctx, out, discard_as=discard_as)
    write_spec(out, spec)
    return _write_run(
        out,
        run_record(spec, startup, labels, pricing_of(ctx.cfg.host, used_gpus(spec.argv, spec.config_yaml))),
    )


def launch_state(ctx: SweepContext, out: Path, name: str) -> Results | None:
    """What the launch in ``out`` left, read once (run.json, each run's summary and records, capacity.json):
    what the resume checks judge and a skipped launch returns. None: a file there cannot be read (the launch
    is measured again)."""
    try:
        return load_results(ctx.dir, out.relative_to(ctx.dir).as_posix(), name)
    except (GauntletError, OSError):
        return None


def launch_complete(state: Results | None, expected: ExpectedRuns) -> bool:
    """The launch whose directory held ``state`` (:func:`launch_state`) is complete: its run.json is valid
    and records its own end (a failed start, a server lost under load: that is its evidence), or every run
    ``expected`` names has a summary that was not interrupted, or was stopped by its profile's time bound
    (measured again, it would be again: the gates judge it against the baseline, :mod:`gates.evidence`)."""
    if state is None or state.run is None:
        return False
    run = state.run
    if any(e.kind == "harness" for e in run.watch):
        return False  # the load harness failed, not the server: measure again (once the data is fixed)
    opening_baseline = run.is_baseline and run.phase == "baseline" and run.follows is None
    if not run.startup.ok or (server_lost(run.watch) and not opening_baseline):
        # A failed start or a server lost under load is this launch's result; the opening baseline lost
        # under load leaves its candidates' evidence partial (incomplete): measure it again.
        return True
    runs = expected(run, state)
    if runs is None:
        return False
    summaries = {r.summary_file: r.summary for reps in state.profiles.values() for r in reps}
    for profile, repeat in runs:
        summary = summaries.get(f"{state.root}/{repeat_name(profile, repeat)}/{SUMMARY_FILE}")
        if summary is None or (summary.interrupted and not summary.time_bound):
            return False  # missing, or interrupted: the time bound's stop is the run's result
    return True


def skip_complete(ctx: SweepContext, state: Results, *, label: str, journal_as: str) -> CandidateRun:
    """Resume: say and journal that the complete launch that left ``state`` is skipped; its record."""
    if state.run is None:
        raise RuntimeError(f"{state.root}: a complete launch without its {RUN_FILE}")
    ctx.say(f"{label}: complete results found, skipping (resume)")
    ctx.journal.append(SkippedComplete(candidate=journal_as))
    return state.run
