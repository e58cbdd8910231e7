"""The sweep lifecycle: measure the baseline and each candidate, then restore and validate what is retained.

Pipeline position: the orchestrator box. It renders launch specs, starts and stops servers through the
supervisor, runs profiles through the load runner, writes everything into the sweep directory, and journals
every state change before it happens. The Hydra entry point (:mod:`orchestrator.hydra_app`) and
``rollback`` (:mod:`orchestrator.rollback`) drive it; its side effects come in through :class:`Seams`.

Sweep directory::

    config.yaml                 the composed configuration of the sweep
    journal.jsonl               every state change, appended before it happens
    host.json                   the host probe (NVML, or the simulator's record)
    retained/spec.json          the retained spec recorded at the start (restores are checked against it)
    candidates/<name>/          spec.json, vllm-config.yaml, server.log, run.json, <profile>/r<k>/...
    recovery/                   the restored retained server: run.json, validation.json, <profile>/r0/...
    verdicts.json, report.md, report.json, *.png
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from contracts.errors import GauntletError, LaunchError, RollbackError, SpecError
from contracts.results import (
    CandidateRun,
    GpuMemory,
    HostProbe,
    ProfileSummary,
    RecoveryCheck,
    RecoveryValidation,
    StartupRecord,
    TeardownRecord,
    WatchEvent,
    profile_dir,
    read_model,
    write_model,
)
from contracts.schema import CandidateConfig, GauntletConfig
from launch.spec import LaunchSpec, diff_specs, render_spec
from orchestrator.journal import Journal, JournalState, Launching, LiveServer, utc_now

Role = Literal["baseline", "candidate", "retained"]


class ServerHandle(Protocol):
    """What the lifecycle needs of a started server (launch.supervisor.Server)."""

    @property
    def pid(self) -> int: ...
    @property
    def pgid(self) -> int: ...
    @property
    def create_time(self) -> float: ...
    @property
    def spec(self) -> LaunchSpec: ...


class SupervisorLike(Protocol):
    """The launcher's surface the lifecycle uses (launch.supervisor.Supervisor)."""

    def start(self, spec: LaunchSpec, log_path: Path) -> Any: ...
    def wait_ready(self, server: Any, timeout_s: float | None = None) -> float: ...
    def check(self, server: Any) -> list[WatchEvent]: ...
    def teardown(self, server: Any) -> TeardownRecord: ...
    def adopt(
        self, pid: int, pgid: int, create_time: float, spec: LaunchSpec, log_path: Path
    ) -> Any | None: ...


RunProfile = Callable[..., ProfileSummary]


class Say(Protocol):
    def __call__(self, message: str) -> None: ...


def say_stderr(message: str) -> None:
    print(f"gauntlet: {message}", file=sys.stderr, flush=True)


@dataclass
class Seams:
    """Side effects of the lifecycle, injectable for tests (real defaults from :func:`real_seams`)."""

    supervisor: SupervisorLike
    run_profile: RunProfile
    gpu_memory: Callable[[LaunchSpec], list[GpuMemory] | None]
    host_probe: Callable[[str], HostProbe]
    say: Say = say_stderr
    transport: httpx.BaseTransport | None = None
    watch_interval_s: float = 1.0
    stop: threading.Event = field(default_factory=threading.Event)
    processes: Callable[[], list[ProcessInfo]] = field(default_factory=lambda: list_processes)


def real_seams() -> Seams:
    """The production wiring: the real supervisor, load runner, NVML and the simulator's memory endpoint."""
    from launch.nvml import NvmlProbe, probe_host  # noqa: PLC0415  (keeps `plan` free of process code)
    from launch.sim.client import sim_gpu_memory  # noqa: PLC0415
    from launch.supervisor import Supervisor  # noqa: PLC0415
    from load.runner import run_profile  # noqa: PLC0415

    nvml = NvmlProbe()

    def gpu_memory(spec: LaunchSpec) -> list[GpuMemory] | None:
        if spec.host_kind == "sim":
            return sim_gpu_memory(spec.base_url)
        if spec.host_kind == "gpu":
            return nvml.snapshot()
        return None

    def host_probe(kind: str) -> HostProbe:
        if kind == "sim":
            return HostProbe(
                driver=False, reason="simulated host (launch.sim): no GPU is used", simulated=True
            )
        return probe_host()

    return Seams(
        supervisor=Supervisor(gpu=nvml),
        run_profile=run_profile,
        gpu_memory=gpu_memory,
        host_probe=host_probe,
    )


def backend_of(spec: LaunchSpec) -> Literal["vllm", "sim"]:
    return "sim" if spec.host_kind == "sim" else "vllm"


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value following ``flag`` in an argv, if present."""
    for i, item in enumerate(argv[:-1]):
        if item == flag:
            return argv[i + 1]
    return None


class Lifecycle:
    """One sweep directory's lifecycle; every method journals before it acts."""

    def __init__(self, cfg: GauntletConfig, sweep_dir: Path, seams: Seams) -> None:
        self.cfg = cfg
        self.dir = sweep_dir
        self.seams = seams
        self.journal = Journal(sweep_dir / "journal.jsonl")
        self.say = seams.say
        # Set by the watcher when the server dies, or on Ctrl-C: the running profile stops promptly.
        self._profile_stop = threading.Event()
        # True once this process started or stopped a server: only then does an early exit need a restore.
        self.touched = False

    # ------------------------------------------------------------------ paths and specs

    def candidate_dir(self, name: str) -> Path:
        return self.dir / "candidates" / name

    @property
    def retained_spec_path(self) -> Path:
        return self.dir / "retained" / "spec.json"

    def render(self, candidate: CandidateConfig) -> LaunchSpec:
        return render_spec(self.cfg.service, candidate, self.cfg.host)

    # ------------------------------------------------------------------ begin

    def begin(self, *, previous: Path | None = None) -> None:
        """Record the retained spec, stop a live retained server left by an earlier sweep, probe the host."""
        self.dir.mkdir(parents=True, exist_ok=True)
        state = self.journal.replay()
        self.journal.append("sweep_started", phase="begin", resumed=state.events > 0)
        self._stop_leftovers(state, reason="left running by an interrupted run of this sweep")
        spec = self.render(self.cfg.baseline)
        self._record_retained(spec, state)
        if previous is not None and previous.resolve() != self.dir.resolve():
            self._take_over_live_service(previous, spec)
        probe = self.seams.host_probe(self.cfg.host.kind)
        write_model(self.dir / "host.json", probe)

    def _record_retained(self, spec: LaunchSpec, state: JournalState) -> None:
        path = self.retained_spec_path
        if path.exists():
            recorded = LaunchSpec.from_json(path.read_text(), source=str(path))
            if recorded.fingerprint != spec.fingerprint:
                raise SpecError(
                    "this sweep directory recorded a different retained configuration "
                    f"({recorded.fingerprint}) "
                    f"than the one configured now ({spec.fingerprint})",
                    evidence=diff_specs(recorded, spec),
                    hint="resume with the same configuration, or start a new sweep directory",
                )
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(spec.to_json())
        (path.parent / "vllm-config.yaml").write_text(spec.config_yaml)
        self.journal.append(
            "retained_recorded", candidate=spec.candidate, fingerprint=spec.fingerprint, spec_file=str(path)
        )

    def _take_over_live_service(self, previous: Path, spec: LaunchSpec) -> None:
        """A retained server a previous sweep or rollback left running is the live service: record, stop."""
        prev_state = Journal(previous / "journal.jsonl").replay()
        for live in prev_state.retained_live:
            try:
                live_spec = LaunchSpec.from_json(Path(live.spec_file).read_text(), source=live.spec_file)
            except (OSError, SpecError) as exc:
                self.say(
                    f"cannot read the live server's spec {live.spec_file}: {exc}; leaving pid {live.pid}"
                )
                continue
            server = self.seams.supervisor.adopt(
                live.pid, live.pgid, live.create_time, live_spec, Path(live.log_path)
            )
            if server is None:
                continue
            if live_spec.fingerprint != spec.fingerprint:
                raise RollbackError(
                    f"the live service (pid {live.pid}, recorded in {previous}) runs "
                    f"{live_spec.fingerprint}, "
                    f"but the configured baseline renders {spec.fingerprint}",
                    evidence=diff_specs(live_spec, spec),
                    hint="make conf/candidate/baseline.yaml describe the live service, or stop it first "
                    "with `python -m orchestrator rollback`",
                )
            self.journal.append_server("adopted", replace(live, role="retained"), source=str(previous))
            self.say(f"live service {live.candidate} (pid {live.pid}) recorded as the baseline; stopping it")
            self._teardown(server, live.candidate, "retained")
            Journal(previous / "journal.jsonl").append(
                "torn_down",
                candidate=live.candidate,
                pid=live.pid,
                fingerprint=live.fingerprint,
                by=str(self.dir),
            )

    def _stop_leftovers(self, state: JournalState, *, reason: str) -> None:
        for pending in state.pending:
            for pid, create_time in find_unrecorded(pending, self.seams.processes()):
                try:
                    spec = LaunchSpec.from_json(Path(pending.spec_file).read_text(), source=pending.spec_file)
                except (OSError, SpecError):
                    continue
                log = Path(pending.spec_file).with_name("server.log")
                server = self.seams.supervisor.adopt(pid, pid, create_time, spec, log)
                if server is not None:
                    self.journal.append_server(
                        "adopted",
                        LiveServer(
                            candidate=pending.candidate,
                            role=pending.role,
                            fingerprint=pending.fingerprint,
                            pid=pid,
                            pgid=pid,
                            create_time=create_time,
                            port=pending.port,
                            spec_file=pending.spec_file,
                            log_path=str(log),
                        ),
                        source="unrecorded launch",
                    )
                    self.say(
                        f"stopping {pending.candidate} (pid {pid}): launched but never recorded ({reason})"
                    )
                    self._teardown(server, pending.candidate, pending.role)
            self.journal.append("vanished", candidate=pending.candidate, fingerprint=pending.fingerprint)
        for live in list(state.live.values()):
            try:
                # Stopping needs the port, not trust: an edited spec still names the process to stop.
                spec, _ = LaunchSpec.parse_json(Path(live.spec_file).read_text(), source=live.spec_file)
            except (OSError, SpecError) as exc:
                self.say(f"cannot read {live.spec_file} ({exc}); pid {live.pid} is left as it is")
                continue
            server = self.seams.supervisor.adopt(
                live.pid, live.pgid, live.create_time, spec, Path(live.log_path)
            )
            if server is None:
                self.journal.append(
                    "vanished", candidate=live.candidate, pid=live.pid, fingerprint=live.fingerprint
                )
                continue
            why = (
                "the live retained service; it is measured as the baseline"
                if live.role == "retained"
                else reason
            )
            self.say(f"stopping {live.candidate} (pid {live.pid}): {why}")
            self._teardown(server, live.candidate, live.role)

    # ------------------------------------------------------------------ one candidate

    def repeats_of(self, profile: str, default: int) -> int:
        """How many times ``profile`` runs per candidate (its own ``repeats``, else the run's)."""
        own = self.cfg.workloads[profile].repeats
        return own if own is not None else default

    def is_complete(self, name: str, profiles: Sequence[str], repeats: int) -> bool:
        """Results of ``name`` are complete and valid (resume skips it)."""
        run_file = self.candidate_dir(name) / "run.json"
        if not run_file.exists():
            return False
        try:
            run = read_model(run_file, CandidateRun)
            if not run.startup.ok or _server_lost(run.watch):
                return True  # a failed start or a server lost under load is this candidate's result
            for profile in profiles:
                for repeat in range(1, self.repeats_of(profile, repeats) + 1):
                    summary = read_model(
                        profile_dir(self.dir, name, profile, repeat) / "summary.json", ProfileSummary
                    )
                    if summary.interrupted:
                        return False
        except GauntletError:
            return False
        return True

    def run_candidate(self, candidate: CandidateConfig, *, role: Role = "candidate") -> CandidateRun:
        """Launch, measure every profile with repeats, tear down; results into candidates/<name>/."""
        run_cfg = self.cfg.run
        name = candidate.name
        if self.is_complete(name, run_cfg.profiles, run_cfg.repeats):
            self.say(f"{name}: complete results found, skipping (resume)")
            self.journal.append("skipped_complete", candidate=name)
            return read_model(self.candidate_dir(name) / "run.json", CandidateRun)
        out = self.candidate_dir(name)
        if out.exists():
            self.journal.append("discarding_partial", candidate=name)
            shutil.rmtree(out)
        out.mkdir(parents=True)
        spec = self.render(candidate)
        spec_file = out / "spec.json"
        spec_file.write_text(spec.to_json())
        (out / "vllm-config.yaml").write_text(spec.config_yaml)
        server, startup = self._launch(spec, spec_file, out / "server.log", role=role)
        run = CandidateRun(
            candidate=name,
            fingerprint=spec.fingerprint,
            backend=backend_of(spec),
            host=spec.host,
            is_baseline=name == self.cfg.baseline.name,
            phase="baseline" if role == "baseline" else "candidate",
            startup=startup,
            probe=None,
        )
        if server is None:
            self.say(f"{name}: did not start ({startup.kind}): {startup.matched_line or '-'}")
            write_model(out / "run.json", run)
            return run
        watch: list[WatchEvent] = []
        written: list[str] = []
        free: list[float] | None = None
        teardown: TeardownRecord | None = None
        try:
            for repeat in range(1, run_cfg.repeats + 1):
                for profile in run_cfg.profiles:
                    if repeat > self.repeats_of(profile, run_cfg.repeats):
                        continue
                    events = self._measure(
                        server,
                        spec,
                        profile=profile,
                        repeat=repeat,
                        out=profile_dir(self.dir, name, profile, repeat),
                    )
                    written.append(f"{profile}/r{repeat}")
                    watch.extend(events)
                    if free is None:
                        free = self._free_memory(spec)
                    if _server_lost(events):
                        break
                if _server_lost(watch):
                    self.say(f"{name}: the server died under load; remaining profiles skipped")
                    break
        finally:
            teardown = self._teardown(server, name, role)
            run = run.model_copy(
                update={
                    "watch": watch,
                    "teardown": teardown,
                    "profiles": written,
                    "free_gpu_gib_after_warmup": free,
                }
            )
            write_model(out / "run.json", run)
        return run

    def _launch(
        self, spec: LaunchSpec, spec_file: Path, log_path: Path, *, role: Role
    ) -> tuple[Any | None, StartupRecord]:
        sup = self.seams.supervisor
        self.journal.append(
            "launching",
            candidate=spec.candidate,
            role=role,
            fingerprint=spec.fingerprint,
            port=spec.port,
            spec_file=str(spec_file),
            at_epoch=time.time(),
        )
        self.say(f"{spec.candidate}: launching ({role}) {spec.fingerprint[:19]}")
        server = sup.start(spec, log_path)
        self.touched = True
        self.journal.append_server(
            "started",
            LiveServer(
                candidate=spec.candidate,
                role=role,
                fingerprint=spec.fingerprint,
                pid=server.pid,
                pgid=server.pgid,
                create_time=server.create_time,
                port=spec.port,
                spec_file=str(spec_file),
                log_path=str(log_path),
            ),
        )
        try:
            ready_s = sup.wait_ready(server)
        except LaunchError as exc:
            kind = getattr(exc, "kind", "crashed")
            self.journal.append(
                "startup_failed",
                candidate=spec.candidate,
                pid=server.pid,
                fingerprint=spec.fingerprint,
                kind=kind,
                matched_line=getattr(exc, "matched_line", None),
            )
            return None, StartupRecord(
                ok=False,
                kind=kind,
                exit_code=getattr(exc, "process_exit_code", None),
                matched_line=getattr(exc, "matched_line", None),
                evidence=list(exc.evidence),
                time_to_ready_s=None,
            )
        except BaseException:
            self._teardown(server, spec.candidate, role)
            raise
        self.journal.append("ready", candidate=spec.candidate, pid=server.pid, ready_s=round(ready_s, 3))
        self.say(f"{spec.candidate}: ready in {ready_s:.1f} s (pid {server.pid})")
        return server, StartupRecord(ok=True, time_to_ready_s=ready_s)

    def _teardown(self, server: Any, name: str, role: str) -> TeardownRecord:
        self.touched = True
        self.journal.append("tearing_down", candidate=name, pid=server.pid, role=role)
        record = self.seams.supervisor.teardown(server)
        self.journal.append(
            "torn_down",
            candidate=name,
            pid=server.pid,
            fingerprint=server.spec.fingerprint,
            survivors=record.survivors,
            port_free=record.port_free,
        )
        return record

    def _free_memory(self, spec: LaunchSpec) -> list[float] | None:
        try:
            gpus = self.seams.gpu_memory(spec)
        except (httpx.HTTPError, GauntletError) as exc:
            self.say(f"could not read GPU memory: {exc}")
            return None
        return [g.free_gib for g in gpus] if gpus else None

    def _measure(
        self, server: Any, spec: LaunchSpec, *, profile: str, repeat: int, out: Path
    ) -> list[WatchEvent]:
        """Run one profile against a live server while a watcher checks it; returns what the watcher saw.

        A load error (the server vanished mid-profile, /tokenize or /metrics unreachable) is evidence, not a
        crash of the sweep: it is journalled and returned as an ``unhealthy`` event next to whatever the
        watcher saw (``died`` when the process is gone), and the caller moves on.
        """
        workload = self.cfg.workloads[profile]
        name = spec.candidate
        self.journal.append("load_started", candidate=name, profile=profile, repeat=repeat)
        self.say(f"{name}: {profile} r{repeat}")
        failure: str | None = None
        with self._watching(server) as events:
            try:
                self.seams.run_profile(
                    spec.base_url,
                    spec.served_model_name,
                    workload,
                    candidate=name,
                    fingerprint=spec.fingerprint,
                    repeat=repeat,
                    out_dir=out,
                    backend=backend_of(spec),
                    host=spec.host,
                    time_scale=spec.time_scale,
                    scale=self.cfg.run.scale,
                    stop=self._profile_stop,
                )
            except (GauntletError, httpx.HTTPError, OSError) as exc:
                failure = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.say(f"{name}: {profile} r{repeat} could not complete: {failure}")
        if failure is not None:
            events.append(
                WatchEvent(at=utc_now(), kind="unhealthy", detail=f"{profile} r{repeat}: {failure}")
            )
        self.journal.append(
            "load_finished", candidate=name, profile=profile, repeat=repeat, events=len(events), error=failure
        )
        return events

    @contextmanager
    def _watching(self, server: Any) -> Iterator[list[WatchEvent]]:
        """A background thread calls the supervisor's cheap check while load runs; a death stops the load."""
        events: list[WatchEvent] = []
        done = threading.Event()
        self._profile_stop.clear()
        stop = self._profile_stop

        def loop() -> None:
            while not done.wait(self.seams.watch_interval_s):
                new = self.seams.supervisor.check(server)
                events.extend(new)
                if any(e.kind == "died" for e in new):
                    stop.set()
                    return
                if self.seams.stop.is_set():
                    stop.set()

        thread = threading.Thread(target=loop, name="gauntlet-watch", daemon=True)
        thread.start()
        try:
            yield events
        finally:
            done.set()
            thread.join(timeout=10)
            events.extend(self.seams.supervisor.check(server))

    # ------------------------------------------------------------------ restore

    def restore(self, *, reason: str) -> RecoveryValidation:
        """Relaunch the retained spec byte-for-byte, check its effective config, validate it under load."""
        state = self.journal.replay()
        if state.retained_spec_file is None or state.retained_fingerprint is None:
            raise RollbackError(
                f"{self.journal.path}: no retained configuration was recorded",
                hint="nothing to restore: this sweep never started",
            )
        # Verify the recorded spec before touching anything: a refused restore must leave the host as it was.
        spec_path = Path(state.retained_spec_file)
        spec = read_retained_spec(spec_path, state.retained_fingerprint, self.render(self.cfg.baseline))
        self._stop_leftovers(state, reason=f"before restoring the retained configuration ({reason})")
        out = self.dir / "recovery"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        self.journal.append(
            "restoring", candidate=spec.candidate, fingerprint=spec.fingerprint, reason=reason
        )
        self.say(f"restoring the retained configuration {spec.candidate} ({reason})")
        server, startup = self._launch(spec, spec_path, out / "server.log", role="retained")
        run = CandidateRun(
            candidate=spec.candidate,
            fingerprint=spec.fingerprint,
            backend=backend_of(spec),
            host=spec.host,
            is_baseline=True,
            phase="recovery",
            startup=startup,
        )
        if server is None:
            write_model(out / "run.json", run)
            result = RecoveryValidation(
                ok=False,
                candidate=spec.candidate,
                fingerprint=spec.fingerprint,
                recorded_fingerprint=state.retained_fingerprint,
                pid=None,
                reason=f"the retained configuration did not start ({startup.kind}): {startup.matched_line}",
            )
            write_model(out / "validation.json", result)
            self.journal.append("validation_failed", candidate=spec.candidate, reason=result.reason)
            return result
        self.journal.append(
            "restored", candidate=spec.candidate, pid=server.pid, fingerprint=spec.fingerprint
        )
        result = self.validate_retained(server, spec, state.retained_fingerprint, run, out)
        return result

    def validate_retained(
        self, server: Any, spec: LaunchSpec, recorded: str, run: CandidateRun, out: Path
    ) -> RecoveryValidation:
        checks = effective_config_checks(spec, recorded, transport=self.seams.transport)
        watch: list[WatchEvent] = []
        written: list[str] = []
        summaries: list[ProfileSummary] = []
        for repeat in range(1, self.cfg.run.recovery_repeats + 1):
            for profile in self.cfg.run.recovery_profiles:
                sub = out / profile / f"r{repeat}"
                watch.extend(self._measure(server, spec, profile=profile, repeat=repeat, out=sub))
                summaries.append(read_model(sub / "summary.json", ProfileSummary))
                written.append(f"{profile}/r{repeat}")
        free = self._free_memory(spec)
        checks.extend(recovery_load_checks(summaries, watch))
        ok = all(c.ok for c in checks)
        failed = [c for c in checks if not c.ok]
        reason = (
            f"restored {spec.candidate} byte-for-byte and served {len(summaries)} recovery run(s) cleanly"
            if ok
            else "; ".join(f"{c.name}: expected {c.expected}, observed {c.observed}" for c in failed)
        )
        result = RecoveryValidation(
            ok=ok,
            candidate=spec.candidate,
            fingerprint=spec.fingerprint,
            recorded_fingerprint=recorded,
            pid=server.pid,
            checks=checks,
            profiles=written,
            reason=reason,
        )
        write_model(out / "validation.json", result)
        write_model(
            out / "run.json",
            run.model_copy(update={"watch": watch, "profiles": written, "free_gpu_gib_after_warmup": free}),
        )
        self.journal.append(
            "validated" if ok else "validation_failed",
            candidate=spec.candidate,
            pid=server.pid,
            reason=reason,
        )
        self.say(("recovery validation passed: " if ok else "RECOVERY VALIDATION FAILED: ") + reason)
        return result


def _server_lost(events: Sequence[WatchEvent]) -> bool:
    """The server died, or a profile could not run against it: the remaining profiles would only fail."""
    return any(e.kind in ("died", "unhealthy") for e in events)


@dataclass(frozen=True)
class ProcessInfo:
    """A process as seen by :func:`list_processes` (pid, its argv and its start time)."""

    pid: int
    pgid: int
    cmdline: tuple[str, ...]
    create_time: float


def list_processes() -> list[ProcessInfo]:
    """Every process of this host with its argv and start time (psutil)."""
    import psutil  # noqa: PLC0415

    out: list[ProcessInfo] = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            cmd = tuple(proc.info["cmdline"] or ())
            out.append(
                ProcessInfo(proc.info["pid"], os.getpgid(proc.info["pid"]), cmd, proc.info["create_time"])
            )
        except (psutil.Error, ProcessLookupError):
            continue
    return out


def find_unrecorded(pending: Launching, processes: Sequence[ProcessInfo]) -> list[tuple[int, float]]:
    """Session leaders started after ``pending`` was announced whose argv is its spec's (pure).

    A pid is only trusted when its argv equals the recorded spec's (the interpreter path aside) and it
    started no earlier than the announcement, so a process gauntlet did not start is never touched.
    """
    try:
        spec = LaunchSpec.from_json(Path(pending.spec_file).read_text(), source=pending.spec_file)
    except (OSError, SpecError):
        return []
    tail = tuple(spec.argv[1:])
    return [
        (p.pid, p.create_time)
        for p in processes
        if p.pid == p.pgid and tuple(p.cmdline[1:]) == tail and p.create_time >= pending.at_epoch - 1.0
    ]


def read_retained_spec(path: Path, recorded_fingerprint: str, configured: LaunchSpec | None) -> LaunchSpec:
    """The recorded retained spec, refused (saying what differs) unless it has the journal's fingerprint."""
    text = path.read_text() if path.exists() else None
    if text is None:
        raise RollbackError(
            f"{path}: the recorded retained spec is missing", hint="it cannot be restored safely"
        )
    try:
        spec = LaunchSpec.from_json(text, source=str(path))
    except SpecError as exc:
        evidence: list[str] = []
        if configured is not None:
            try:
                tampered, _ = LaunchSpec.parse_json(text, source=str(path))
                evidence = diff_specs(configured, tampered)
            except SpecError:
                evidence = ["the file is not a launch spec any more"]
        raise RollbackError(
            f"refusing to restore: {exc.message}",
            evidence=[f"compared with the configured baseline: {d}" for d in evidence],
            hint="the recorded retained spec was modified; put back the original or start a new sweep",
        ) from exc
    if spec.fingerprint != recorded_fingerprint:
        raise RollbackError(
            f"refusing to restore: {path} is {spec.fingerprint}, the journal recorded {recorded_fingerprint}",
            evidence=diff_specs(configured, spec) if configured else [],
            hint="the recorded retained spec was replaced; put back the original",
        )
    return spec


def effective_config_checks(
    spec: LaunchSpec, recorded: str, *, transport: httpx.BaseTransport | None = None
) -> list[RecoveryCheck]:
    """Compare what the running server reports with what the spec asked for."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    checks = [
        RecoveryCheck(
            name="fingerprint", ok=spec.fingerprint == recorded, expected=recorded, observed=spec.fingerprint
        )
    ]
    with httpx.Client(base_url=spec.base_url, timeout=10.0, transport=transport) as client:
        try:
            models = client.get("/v1/models").json()
            entry = next((m for m in models.get("data", []) if m.get("id") == spec.served_model_name), None)
            observed = str(entry.get("max_model_len")) if entry else "model not listed"
        except (httpx.HTTPError, ValueError) as exc:
            observed = f"unreadable: {exc}"
        checks.append(
            RecoveryCheck(
                name="max_model_len",
                ok=observed == str(spec.max_model_len),
                expected=str(spec.max_model_len),
                observed=observed,
            )
        )
        try:
            text = client.get("/metrics").text
            labels: dict[str, str] = {}
            for family in text_string_to_metric_families(text):
                if family.name in ("vllm:cache_config_info", "vllm:cache_config"):
                    for sample in family.samples:
                        labels.update(sample.labels)
        except (httpx.HTTPError, ValueError) as exc:
            labels = {"error": str(exc)}
    wanted = {
        "gpu_memory_utilization": flag_value(spec.argv, "--gpu-memory-utilization"),
        "cache_dtype": flag_value(spec.argv, "--kv-cache-dtype"),
    }
    for label, expected in wanted.items():
        if expected is None:
            continue
        seen = labels.get(label)
        ok = seen is not None and _same(seen, expected)
        checks.append(
            RecoveryCheck(
                name=f"cache_config_info.{label}",
                ok=ok,
                expected=expected,
                observed=seen if seen is not None else "absent",
            )
        )
    return checks


def _same(observed: str, expected: str) -> bool:
    try:
        return abs(float(observed) - float(expected)) < 1e-9
    except ValueError:
        return observed == expected


def recovery_load_checks(
    summaries: Sequence[ProfileSummary], watch: Sequence[WatchEvent]
) -> list[RecoveryCheck]:
    """Every request completes, no restart, no preemption, nothing left queued (pure)."""
    checks: list[RecoveryCheck] = []
    for s in summaries:
        tag = f"{s.profile}/r{s.repeat}"
        checks.append(
            RecoveryCheck(
                name=f"{tag} completed",
                ok=s.completed == s.num_requests and s.failed == 0,
                expected=f"{s.num_requests}/{s.num_requests}",
                observed=f"{s.completed}/{s.num_requests} ({s.failed} failed)",
            )
        )
        server = s.server
        if server is None:
            checks.append(
                RecoveryCheck(
                    name=f"{tag} metrics", ok=False, expected="/metrics readable", observed="unreadable"
                )
            )
            continue
        checks.append(
            RecoveryCheck(
                name=f"{tag} preemptions",
                ok=server.preemptions == 0,
                expected="0",
                observed=f"{server.preemptions:g}",
            )
        )
        checks.append(
            RecoveryCheck(
                name=f"{tag} restart",
                ok=not server.restart_detected,
                expected="none",
                observed="detected" if server.restart_detected else "none",
            )
        )
        queued = server.waiting_at_end + server.running_at_end
        checks.append(
            RecoveryCheck(name=f"{tag} queued at end", ok=queued == 0, expected="0", observed=f"{queued:g}")
        )
    bad = [e for e in watch if e.kind in ("died", "restarted", "unhealthy")]
    checks.append(
        RecoveryCheck(
            name="server events",
            ok=not bad,
            expected="none",
            observed=", ".join(f"{e.kind} at {e.at}" for e in bad) or "none",
        )
    )
    return checks
