"""Hydra entry point of the sweep: ``python -m orchestrator -m candidate=glob(*)``.

Pipeline position: the top of the orchestrator box. A Hydra callback opens the sweep before the first job
(validates every job's config, records the retained spec, stops the live service, measures the baseline)
and closes it after the last (restores the retained configuration, validates it under load, judges,
reports). Each Hydra job measures one candidate, so ``hydra/launcher`` and ``hydra/sweeper`` choices keep
working. :func:`main` wraps Hydra so that the restore also runs after a failed job, Ctrl-C or SIGTERM, and
the sweep's last lines always say what is left running.

Who holds the sweep: one :class:`SweepController`, created and owned by :func:`main`. Hydra builds the
callback itself (from ``hydra.callbacks.gauntlet._target_`` in ``conf/config.yaml``) and calls the task
function with nothing but the job's config, so neither can be handed the controller as an argument; and
the task function stays a module-level function because a launcher may pickle it to a worker process.
So :func:`main` publishes its controller in a context variable (:data:`_ACTIVE`) for exactly the length
of the Hydra run, and :class:`SweepCallback` and :func:`job` read it from there. Nothing else is shared:
all state lives on the controller, and a job that runs where no controller is published (a worker
process of another launcher) opens its own context on the sweep directory. Hydra turns a callback's
exception into a warning and launches the jobs anyway, so the callback stores it on the controller
(``failure``), jobs skip, and :func:`main` reports it and restores.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from contracts.errors import (
    ConfigError,
    ConfigProblem,
    GauntletError,
    RollbackError,
    SweepDirError,
    exit_code_for,
    sweep_dir_error,
)
from contracts.paths import CONF_DIR
from contracts.results import RecoveryValidation
from contracts.schema import GauntletConfig
from orchestrator.compose_errors import translate_compose_error
from orchestrator.config import register_configs, sources_from_hydra, to_typed
from orchestrator.config_guard import check_yaml_files, config_roots
from orchestrator.context import SweepContext
from orchestrator.events import SweepFinished
from orchestrator.interleave import measure_block
from orchestrator.jobs import run_job, write_opening
from orchestrator.leftovers import stop_leftovers
from orchestrator.lock import SweepLock
from orchestrator.measure import run_candidate
from orchestrator.nodes import Place, job_place, launching_place
from orchestrator.restore import restore
from orchestrator.rollback import what_runs
from orchestrator.scheduler import job_lines
from orchestrator.seams import Seams, real_seams, say_stderr
from orchestrator.sweep import begin
from orchestrator.validate import Sources, check_candidate_names, validate


class SweepController:
    """The sweep this process runs: opened by the callback, fed by the jobs, closed by the callback/main."""

    def __init__(self, seams_factory: Callable[[], Seams] = real_seams) -> None:
        self.seams_factory = seams_factory
        #: The open sweep (None until the callback opens it).
        self.ctx: SweepContext | None = None
        #: Why the sweep could not open or close (stored by the callbacks, reported by :func:`main`).
        self.failure: Exception | None = None
        #: Exit code decided when the sweep closed (the restore's validation, the report).
        self.exit_code = 0
        self.finished = False
        self.validation: RecoveryValidation | None = None
        #: The retained server was stopped at the end (``run.retained_after_sweep: stop``).
        self.retained_stopped = False
        #: Every job runs on another node (a launcher's worker processes): the live service is never
        #: stopped, each job measures the baseline on its own node (orchestrator.jobs).
        self.zero_downtime = False
        #: One sweep per service port on this host (taken by :meth:`open`, released by :func:`main`).
        self.lock: SweepLock | None = None

    @property
    def sweep(self) -> SweepContext:
        if self.ctx is None:
            raise RuntimeError("no sweep is open")
        return self.ctx

    @property
    def cfg(self) -> GauntletConfig:
        return self.sweep.cfg

    @property
    def dir(self) -> Path:
        return self.sweep.dir

    # ---------------------------------------------------------------- open

    def open(
        self,
        cfg: GauntletConfig,
        sweep_dir: Path,
        *,
        names: Sequence[str] | None = None,
        jobs_elsewhere: bool = False,
    ) -> None:
        """Open ``sweep_dir``: begin (leftovers, retained spec), measure the baseline.

        With ``jobs_elsewhere`` (zero-downtime) the live service keeps serving and no baseline is measured
        here: every job measures the baseline on its own node.
        """
        _quiet_http_logs()
        self.zero_downtime = jobs_elsewhere
        self.lock = SweepLock.for_port(cfg.service.port)
        self.lock.acquire(sweep_dir)  # refuses, naming the other sweep, before anything is touched
        self.ctx = ctx = SweepContext.open(cfg, sweep_dir, self.seams_factory())
        if names is not None:
            where = "as jobs on other nodes (zero-downtime)" if jobs_elsewhere else "here"
            ctx.say(f"sweep of {len(names)} job(s) in {sweep_dir} {where}: {', '.join(names)}")
        sweeps = Path(cfg.run.sweeps_dir)
        latest = sweeps / "latest"
        previous = latest.resolve() if latest.is_symlink() and latest.resolve().is_dir() else None
        sweep_dir.mkdir(parents=True, exist_ok=True)
        point_latest(sweeps, sweep_dir)
        begin(ctx, previous=previous, keep_live=jobs_elsewhere)
        if jobs_elsewhere:
            return
        run = run_candidate(ctx, cfg.baseline, role="baseline")
        if not run.startup.ok:
            raise GauntletError(
                f"the baseline {cfg.baseline.name} did not start ({run.startup.kind}): "
                f"{run.startup.matched_line or '-'}; nothing can be compared",
                evidence=run.startup.evidence[-10:],
                hint=f"see {ctx.candidate_dir(cfg.baseline.name) / 'server.log'}",
            )

    def context_for(self, cfg: GauntletConfig, sweep_dir: Path) -> SweepContext:
        """The open sweep with one job's configuration, or a fresh context where none is open here."""
        if self.ctx is not None and self.ctx.dir.resolve() == sweep_dir.resolve():
            return replace(self.ctx, cfg=cfg)
        return SweepContext.open(cfg, sweep_dir, self.seams_factory())

    # ---------------------------------------------------------------- close

    def finish(self, *, reason: str) -> int:
        """Restore and validate the retained configuration, then judge and report. Returns an exit code."""
        if self.finished:
            return 0
        self.finished = True
        say = self.sweep.say
        if not self.sweep.touched and not self.zero_downtime:
            say("no server was started or stopped: nothing to restore")
            return 0
        try:
            self.validation = restore(self.sweep, reason=reason, keep_live=self.zero_downtime)
        except KeyboardInterrupt:
            say("interrupted during the restore: run `python -m orchestrator rollback` to finish it")
            raise
        code = 0 if self.validation.ok else RollbackError.exit_code
        try:
            from gates.judge import judge_sweep  # noqa: PLC0415
            from report import build_report  # noqa: PLC0415

            judge_sweep(self.dir, self.cfg)  # verdicts.json, then the report renders it
            text = build_report(self.dir, self.cfg)
            print(text, flush=True)
        except GauntletError as exc:
            say(f"report: {exc}")
            code = code or exc.exit_code
        except OSError as exc:
            disk = sweep_dir_error(exc, self.dir)
            if disk is None:
                raise
            say(f"report: {disk}")  # the retained server is restored; only the judge's files are missing
            code = code or disk.exit_code
        retained = self._after_sweep()
        self.sweep.journal.append(
            SweepFinished(reason=reason, validated=self.validation.ok, retained=retained)
        )
        say(f"sweep directory: {self.dir}")
        return code

    def _after_sweep(self) -> Literal["kept", "stopped"]:
        """Apply ``run.retained_after_sweep``: keep the retained server up, or stop it (the demo)."""
        if self.cfg.run.retained_after_sweep != "stop":
            return "kept"
        ctx = self.sweep
        stop_leftovers(ctx.servers, ctx.journal.replay(), reason="run.retained_after_sweep=stop")
        self.retained_stopped = True
        return "stopped"

    def restore_after(self, exc: BaseException, *, reason: str, code: int) -> int:
        """After a failure or an interrupt: restore (once) if this process touched a server."""
        if self.ctx is None or self.finished:
            return code
        say_stderr(f"{reason}: restoring the retained configuration")
        try:
            self.finish(reason=reason)
        except KeyboardInterrupt as again:
            return exit_code_for(again)
        except GauntletError as err:
            say_stderr(str(err))
            return exit_code_for(err)
        except OSError as err:
            disk = sweep_dir_error(err, self.dir)
            if disk is None:
                raise
            say_stderr(str(disk))  # the restore cannot write either: rollback once there is space
            return disk.exit_code
        return code

    def say_what_runs(self) -> None:
        """The sweep's last lines: its SLURM jobs and their final states, then the retained server that is
        live (where, how to stop it), or nothing."""
        if self.ctx is None:
            return
        for line in job_lines(self.ctx.dir, wait_s=30.0):  # a SLURM sweep: each job's id and final state
            self.ctx.say(line)
        for line in what_runs(self.ctx.dir, stopped_by_setting=self.retained_stopped):
            self.ctx.say(line)

    # ---------------------------------------------------------------- run

    def run(self, hydra_entry: Callable[[], None]) -> int:
        """Run Hydra; whatever happens, leave the retained configuration restored. Returns the exit code."""
        try:
            hydra_entry()
            if self.failure is not None:
                failure = self.failure
                say_stderr(str(failure))
                return self.restore_after(failure, reason=f"error: {failure}", code=exit_code_for(failure))
            if self.ctx is not None and not self.finished:
                # A Hydra job failed: Hydra skips on_multirun_end, the restore must still happen.
                return self.finish(reason="a job failed") or 1
            return self.exit_code
        except KeyboardInterrupt as exc:
            return self.restore_after(exc, reason=f"interrupted ({exc or 'SIGINT'})", code=exit_code_for(exc))
        except SystemExit as exc:
            if self.failure is not None:  # the callback's check came first: say it (Hydra's words came above)
                say_stderr(str(self.failure))
                return self.restore_after(
                    exc, reason=f"error: {self.failure}", code=exit_code_for(self.failure)
                )
            code = exc.code if isinstance(exc.code, int) else 1
            return self.restore_after(exc, reason="a job failed", code=code)
        except GauntletError as exc:
            say_stderr(str(exc))
            return self.restore_after(exc, reason=f"error: {exc.message}", code=exc.exit_code)
        except OSError as exc:
            disk = sweep_dir_error(exc, self.dir if self.ctx is not None else "")
            if disk is None:
                raise
            say_stderr(str(disk))
            return self.restore_after(disk, reason=f"error: {disk.message}", code=disk.exit_code)


#: The controller of the :func:`main` call in progress (see the module docstring for why it is here).
_ACTIVE: ContextVar[SweepController | None] = ContextVar("gauntlet_sweep_controller", default=None)


@contextmanager
def _published(controller: SweepController) -> Iterator[None]:
    token = _ACTIVE.set(controller)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_controller() -> SweepController:
    """The controller :func:`main` published; Hydra's callback needs one."""
    controller = _ACTIVE.get()
    if controller is None:
        raise GauntletError(
            "the sweep callback ran outside `python -m orchestrator` (no sweep controller)",
            hint="start sweeps with `python -m orchestrator -m candidate=...`",
        )
    return controller


def point_latest(sweeps: Path, target: Path) -> None:
    """Make ``<sweeps>/latest`` point at ``target`` (atomically)."""
    sweeps.mkdir(parents=True, exist_ok=True)
    link = sweeps / "latest"
    tmp = sweeps / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    try:
        rel = os.path.relpath(target.resolve(), sweeps.resolve())
    except ValueError:
        rel = str(target.resolve())
    tmp.symlink_to(rel)
    os.replace(tmp, link)


def _without_hydra(config: DictConfig) -> DictConfig:
    """A copy of the job config without the ``hydra`` node, keeping its structured (typed) nodes."""
    cfg = copy.deepcopy(config)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def _typed(config: DictConfig) -> GauntletConfig:
    return to_typed(_without_hydra(config))


def _sources(config: DictConfig) -> Sources:
    """Sources of a config that still carries its ``hydra`` node (callbacks), else of the running job."""
    node = config.hydra if "hydra" in config else HydraConfig.get()
    return sources_from_hydra(node)


def _quiet_http_logs() -> None:
    """Hydra sets the root logger to INFO; per-request lines of the HTTP client would drown the progress."""
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _save_config(config: DictConfig, sweep_dir: Path) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "config.yaml").write_text(OmegaConf.to_yaml(_without_hydra(config), resolve=True))
    overrides: list[str] = [str(o) for o in config.hydra.overrides.task]
    (sweep_dir / "overrides.txt").write_text("\n".join(overrides) + ("\n" if overrides else ""))


def expand_jobs(config: DictConfig) -> list[list[str]]:
    """The override lists of every job the sweeper will run (glob and lists expanded), for pre-validation."""
    loader = GlobalHydra.instance().config_loader()
    parser = OverridesParser.create(config_loader=loader)
    parsed = parser.parse_overrides([str(o) for o in config.hydra.overrides.task])
    jobs: list[list[str]] = [[]]
    for override in parsed:
        if override.is_sweep_override():
            key = override.get_key_element()
            values = [f"{key}={v}" for v in override.sweep_string_iterator()]
            jobs = [[*job, v] for job in jobs for v in values]
        else:
            jobs = [[*job, override.input_line or ""] for job in jobs]
    return jobs


def prevalidate(config: DictConfig) -> list[str]:
    """Compose and validate every job before anything starts; returns the candidate names in order."""
    search_path = _sources(config).search_path
    check_candidate_names(search_path)
    loader = GlobalHydra.instance().config_loader()
    problems: list[ConfigProblem] = []
    names: list[str] = []
    for overrides in expand_jobs(config):
        try:
            job = loader.load_sweep_config(config, overrides)
        except (HydraException, OmegaConfBaseException) as exc:  # name the file the user wrote
            failed = translate_compose_error(exc, Sources(search_path=search_path, overrides=overrides))
            problems.extend(p for p in failed.problems if str(p) not in {str(q) for q in problems})
            continue
        try:
            typed = _typed(job)
            sources = _sources(job)
            sources.overrides = overrides
            validate(typed, sources)
            names.append(typed.candidate.name)
        except ConfigError as exc:
            problems.extend(p for p in exc.problems if str(p) not in {str(q) for q in problems})
    if problems:
        raise ConfigError(problems)
    return names


class SweepCallback(Callback):
    """Opens the sweep before the first job and closes it (restore, validate, report) after the last."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        controller = active_controller()
        sweep_dir = Path(str(config.hydra.sweep.dir))
        node = launching_place().node
        try:
            write_opening(sweep_dir, "opening", node=node)
            names = prevalidate(config)
            typed = _typed(config)
            elsewhere = jobs_run_elsewhere(str(config.hydra.launcher.get("_target_", "")), typed)
            _save_config(config, sweep_dir)
            controller.open(typed, sweep_dir, names=names, jobs_elsewhere=elsewhere)
            write_opening(sweep_dir, "open", node=node)
        except Exception as exc:
            controller.failure = exc
            with contextlib.suppress(OSError):
                write_opening(sweep_dir, "failed", node=node, reason=str(exc).splitlines()[0][:500])

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        controller = active_controller()
        if controller.ctx is None or controller.failure is not None:
            return
        try:
            controller.exit_code = controller.finish(reason="sweep completed")
        except Exception as exc:
            controller.failure = exc

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        controller = active_controller()
        try:
            typed = _typed(config)
            validate(typed, _sources(config))
            sweep_dir = Path(str(config.hydra.run.dir))
            _save_config(config, sweep_dir)
            controller.open(typed, sweep_dir)
        except Exception as exc:
            controller.failure = exc

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.on_multirun_end(config)


def jobs_run_elsewhere(launcher: str, cfg: GauntletConfig) -> bool:
    """Whether the launcher runs the jobs in worker processes on other nodes (zero-downtime mode).

    ``submitit_local`` runs them in parallel on *this* machine: only a simulated cluster
    (``run.simulated_nodes``) gives each its own node; without one they would share GPUs and a port.
    """
    name = launcher.lower()
    if "submitit" in name and "local" in name:
        if cfg.run.simulated_nodes < 1:
            raise ConfigError(
                [
                    ConfigProblem(
                        "hydra/launcher",
                        "run.simulated_nodes",
                        cfg.run.simulated_nodes,
                        ">= 1 with submitit_local: parallel jobs on one machine need a simulated node "
                        "each (host=sim); on real GPUs use submitit_slurm",
                    )
                ]
            )
        return True
    return "submitit" in name or "ray" in name


def _job_id(hc: Any) -> str | None:
    """``hydra.job.id`` as a launcher set it (the scheduler's id); None where it is left missing."""
    value = OmegaConf.select(hc, "job.id", default=None)
    return str(value) if value is not None else None


def _job_num(hc: Any) -> int:
    value = OmegaConf.select(hc, "job.num", default=None)
    return int(value) if value is not None else 0


def job(config: DictConfig) -> str:
    """One Hydra job: measure one candidate (the baseline was measured when the sweep opened).

    A job a launcher runs in a worker process (no controller here; maybe another node) goes through
    :func:`orchestrator.jobs.run_job`: opening marker, node, its own journal, paired baseline, signals.
    """
    controller = _ACTIVE.get()
    if controller is not None and controller.failure is not None:
        return "not run: the sweep did not open, or stopped"
    _quiet_http_logs()
    typed = _typed(config)
    validate(typed, _sources(config))
    hc = HydraConfig.get()
    sweep_dir = Path(str(hc.sweep.dir if hc.mode == RunMode.MULTIRUN else hc.run.dir))
    if controller is None:  # a worker process of a launcher: the sweep directory is all it shares
        job_id = str(_job_id(hc) or f"pid{os.getpid()}")
        place = job_place(job_id) or Place(node=launching_place().node, job=job_id)
        return run_job(typed, sweep_dir, place, real_seams(), job_num=_job_num(hc))
    if typed.candidate.name == typed.baseline.name:
        return "baseline (measured when the sweep opened)"
    ctx = controller.context_for(typed, sweep_dir)
    try:
        run = run_candidate(ctx, typed.candidate)
        # ABA: the baseline again after the candidate (the next candidate follows it; the recovery
        # after the last one is one more later run of the baseline).
        if typed.run.interleave and run.startup.ok:
            measure_block(ctx, typed.baseline, after=typed.candidate.name)
    except SweepDirError as exc:
        controller.failure = exc  # the disk failed: later jobs skip, main says why and restores
        return f"stopped: {exc.message}"
    return "measured" if run.startup.ok else f"did not start: {run.startup.kind}"


def _hydra_entry() -> None:
    check_yaml_files(config_roots(sys.argv[1:]))  # before Hydra parses a file (an anchor bomb never returns)
    register_configs()
    decorated = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)
    decorated()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


#: Flags that choose where configs are found; Hydra's shell completion does not read them from the line.
_LOCATION_FLAGS = ("-cd", "--config-dir", "-cp", "--config-path", "-cn", "--config-name")


def completion_argv(argv: Sequence[str], comp_line: str | None) -> list[str]:
    """``-sc query=...``: the location flags of the line being completed (COMP_LINE), added to ``argv``.

    Bash calls ``gauntlet -sc query=bash`` without the line's own flags, so Hydra would complete the
    groups of conf/ only; with them, ``gauntlet -cd ~/my-conf -m candidate=<TAB>`` offers that dir's too.
    """
    args = list(argv)
    if comp_line is None or not any(a.startswith("query=") for a in args):
        return args
    words = shlex.split(comp_line) if comp_line.count('"') % 2 == 0 else comp_line.split()
    for i, word in enumerate(words[:-1]):
        if word in _LOCATION_FLAGS and word not in args:
            args = [word, words[i + 1], *args]
    return args


def main(argv: Sequence[str], *, seams_factory: Callable[[], Seams] = real_seams) -> int:
    """Run Hydra with ``argv``; whatever happens, leave the retained configuration restored.

    The last lines always say what is left running: the retained server (where, how to stop it), or that
    nothing is (``run.retained_after_sweep: stop``, as in the demo).
    """
    controller = SweepController(seams_factory)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # Ctrl-C (SIGINT) interrupts and restores even when the shell that started us ignored it (a command
    # run with `&` from a script inherits SIGINT ignored, and Python then never raises KeyboardInterrupt).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    saved_argv = sys.argv
    sys.argv = [
        saved_argv[0] if saved_argv else "orchestrator",
        *completion_argv(argv, os.environ.get("COMP_LINE")),
    ]
    try:
        with _published(controller):
            code = controller.run(_hydra_entry)
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        if controller.lock is not None:
            controller.lock.release()
    controller.say_what_runs()
    return code
