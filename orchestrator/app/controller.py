"""The sweep this process runs, without Hydra: open it, measure each job's candidate, close it.

Pipeline position: the top of the orchestrator box, under the Hydra sweeper
(:mod:`orchestrator.app.sweeper`), which owns one :class:`SweepController` per sweep and calls it in
order: :meth:`~SweepController.open` (lock, leftovers, the retained spec, the live service stopped, the
baseline measured), :meth:`~SweepController.measure` once per job that runs in this process, then
:meth:`~SweepController.finish` (restore, validate under load, judge, report; with ``run.promote_keep``
the gates' KEEP promoted: :mod:`orchestrator.recovery.promote`) or, after a failure or
Ctrl-C, :meth:`~SweepController.settle`, which restores once and turns what happened into an exit code.
Everything here takes typed configs; nothing imports Hydra, so the controller is tested with fake seams.

``stop`` and ``rollback`` of this sweep reach it through the port's lock
(:mod:`orchestrator.ledger.requests`): SIGUSR1 with a request beside the lock. While the sweep measures,
the request unwinds it at once (the server it holds is torn down, no later candidate launches); while it
restores, the request waits until the restore ended. ``stop``: nothing is restored, every server the sweep
started is stopped, the stored results are judged (the interrupted candidate is INCOMPLETE);
``rollback``: restored and validated as after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from contracts.errors import (
    EXIT_INCOMPLETE,
    ConfigError,
    ConfigProblem,
    GauntletError,
    RollbackError,
    SweepDirError,
    exit_code_for,
    sweep_dir_error,
)
from contracts.files import probe_writable
from contracts.layout import candidates_dir
from contracts.results import RecoveryValidation
from contracts.schema import CandidateConfig, GauntletConfig
from contracts.secrets import redacted
from contracts.sweepdir import record_planned
from orchestrator.ledger.events import SweepFinished
from orchestrator.ledger.lock import SweepLock
from orchestrator.ledger.requests import (
    REQUEST_SIGNAL,
    STOPPED_BY_USER,
    Request,
    SweepRequested,
    clear_request,
    read_request,
)
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.measure.interleave import measure_block
from orchestrator.measure.trial import TrialOutcome, measure_trial
from orchestrator.recovery.locate import readable_journal
from orchestrator.recovery.promote import promote_after_sweep
from orchestrator.recovery.recommend import recommendation_lines
from orchestrator.recovery.restore import restore
from orchestrator.recovery.status import what_runs
from orchestrator.search.confirm import confirmation_lines
from orchestrator.search.study import TrialTicket, reporter
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import stop_leftovers
from orchestrator.servers.scheduler import job_lines
from orchestrator.servers.seams import Seams, real_seams, say_stderr

#: Where an unexpected exception's traceback is written (in the sweep directory, or the working one).
ERROR_LOG = "gauntlet-error.log"
#: Why a sweep that ran every job closes (only such a sweep promotes its KEEP with run.promote_keep).
COMPLETED = "sweep completed"


class SweepController:
    """One sweep in this process: opened once, fed by the jobs that run here, closed once."""

    def __init__(self, seams_factory: Callable[[], Seams] = real_seams) -> None:
        self.seams_factory = seams_factory
        #: The open sweep (None until :meth:`open`).
        self.ctx: SweepContext | None = None
        self.finished = False
        self.validation: RecoveryValidation | None = None
        #: Every job runs on another node (a launcher's worker processes): the live service is never
        #: stopped, each job measures the baseline on its own node (orchestrator.app.jobs).
        self.zero_downtime = False
        #: One sweep per service port on this host (taken by :meth:`open`, released by :meth:`release`).
        self.lock: SweepLock | None = None
        #: A job failed on the disk: later jobs skip, the sweep settles with its exit code.
        self.disk_failure: SweepDirError | None = None
        #: The sweep directory being opened (set with the lock, before the sweep is open).
        self.opening_dir: Path | None = None
        #: ``stop`` or ``rollback`` asked this sweep to end (:mod:`orchestrator.ledger.requests`).
        self.requested: Request | None = None
        #: The sweep is restoring or closing: a request waits until that ended (never races the restore).
        self.closing = False
        self._sweep_dir: Path | None = None
        self._previous_handler: Any = None

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
        candidates: Sequence[CandidateConfig] = (),
        title: str | None = None,
        baseline_file: str = "the baseline's candidate file",
        notes: Sequence[str] = (),
    ) -> None:
        """Open ``sweep_dir``: begin (leftovers, retained spec), measure the baseline.

        ``title`` replaces the opening line's "sweep of N job(s)" (a search names its space and budget);
        ``notes`` follow it (the values a search derived, orchestrator.config.search_defaults);
        ``baseline_file``: the file the user selected as the baseline, which a refusal names.

        With ``jobs_elsewhere`` (zero-downtime) the live service keeps serving and no baseline is measured
        here: every job measures the baseline on its own node. ``candidates`` (every job's) are checked by
        the doctor first, before the live service is touched.
        """
        quiet_http_logs()
        self.zero_downtime = jobs_elsewhere
        self.lock_port(cfg.service.port, sweep_dir)
        assert self.lock is not None
        clear_request(self.lock.path)  # a request left by a `stop` whose sweep had already ended
        ctx = SweepContext.open(cfg, sweep_dir, self.seams_factory())
        self.ctx = ctx = replace(ctx, checkpoint=self._checkpoint)
        if names is not None:
            where = "as jobs on other nodes (zero-downtime)" if jobs_elsewhere else "here"
            if title is not None:
                ctx.say(f"{title} in {sweep_dir} {where}")
            else:
                ctx.say(f"sweep of {len(names)} job(s) in {sweep_dir} {where}: {', '.join(names)}")
        for note in notes:
            ctx.say(note)
        try:  # a sweep that cannot write its evidence stops before it touches the live service
            for folder in (sweep_dir, candidates_dir(sweep_dir)):
                probe_writable(folder)
        except OSError as exc:
            if (disk := sweep_dir_error(exc, sweep_dir)) is None:
                raise
            raise disk from exc
        if names is not None:  # the judge names the candidates the sweep never reached
            record_planned(sweep_dir, names)
        begin(  # `latest` moves here once nothing refuses the opening (never to a sweep that started nothing)
            ctx,
            sweeps=Path(cfg.run.sweeps_dir),
            keep_live=jobs_elsewhere,
            candidates=candidates,
            baseline_file=baseline_file,
        )
        if jobs_elsewhere:
            return
        run = run_candidate(ctx, cfg.baseline, role="baseline")
        if not run.startup.ok:
            raise GauntletError(
                f"the baseline {cfg.baseline.name} did not start ({run.startup.kind}): "
                f"{run.startup.matched_line or '-'}; nothing can be compared",
                evidence=run.startup.evidence[-10:],
                hint=f"see {ctx.paths.candidate(cfg.baseline.name).server_log}",
            )

    def lock_port(self, port: int, sweep_dir: Path) -> None:
        """Take the service port's lock for ``sweep_dir`` (again: nothing); refuses, naming the other sweep,
        before anything is touched or written (the sweeper calls it before it records the config)."""
        self.opening_dir = sweep_dir  # a disk error before the sweep is open is still named after it
        self._sweep_dir = sweep_dir
        self._listen()  # before the lock: a request finds the handler in place
        if self.lock is None:
            self.lock = SweepLock.for_port(port)
        self.lock.acquire(sweep_dir)  # refuses, naming the other sweep, before anything is touched

    # ---------------------------------------------------------------- requests (stop, rollback)

    def _listen(self) -> None:
        """Install the request handler (the main thread only: Python runs signal handlers there)."""
        if threading.current_thread() is threading.main_thread() and self._previous_handler is None:
            self._previous_handler = signal.signal(REQUEST_SIGNAL, self._on_request)

    def _on_request(self, signum: int, frame: FrameType | None) -> None:
        self.request_arrived()

    def request_arrived(self) -> None:
        """``stop`` or ``rollback`` wrote its request and signalled: unwind now, or after the restore."""
        if self.lock is None:
            request = Request(action="rollback", sweep_dir=str(self._sweep_dir or ""), pid=0)
        else:
            request = read_request(self.lock.path, self._sweep_dir)
        # An earlier request outside the restore has raised already (one during it left `closing` set).
        unwinding = self.requested is not None
        if self.requested is None or request.action == "stop":
            self.requested = request
        say = self.ctx.say if self.ctx is not None else say_stderr
        if self.closing:
            say(f"{request.describe()}: honoured once the restore in progress has ended")
            return
        if unwinding:  # a second raise would cut the teardown the first one started
            say(f"{request.describe()}: already unwinding; the teardown goes on")
            return
        say(f"{request.describe()}: unwinding now")
        raise SweepRequested(request)

    def _checkpoint(self) -> None:
        """Before each launch and each profile: a request whose raise was swallowed stops the sweep here."""
        if self.requested is not None and not self.closing:
            raise SweepRequested(self.requested)

    # ---------------------------------------------------------------- one job

    def measure(self, cfg: GauntletConfig) -> str:
        """One job in this process: its candidate, then (ABA) the baseline's block after it."""
        if self.disk_failure is not None:
            return f"not run: {self.disk_failure.message}"
        if cfg.candidate.name == cfg.baseline.name:
            return "baseline (measured when the sweep opened)"
        ctx = replace(self.sweep, cfg=cfg)
        try:
            run = run_candidate(ctx, cfg.candidate)
            # ABA: the baseline again after the candidate (the next candidate follows it; the recovery
            # after the last one is one more later run of the baseline).
            if cfg.run.interleave and run.startup.ok:
                measure_block(ctx, cfg.baseline, after=cfg.candidate.name)
        except SweepDirError as exc:
            self.disk_failure = exc  # the disk failed: later jobs skip, the sweep settles and restores
            return f"stopped: {exc.message}"
        except OSError as exc:  # a spec, a log or run.json the disk refused (EACCES, deleted, full)
            if (disk := sweep_dir_error(exc, self.dir)) is None:
                raise
            self.disk_failure = disk
            return f"stopped: {disk.message}"
        return "measured" if run.startup.ok else f"did not start: {run.startup.kind}"

    def trial(self, cfg: GauntletConfig, ticket: TrialTicket) -> TrialOutcome:
        """One trial of a search in this process: its point launched once, measured as far as it earns."""
        assert cfg.search is not None
        ctx = replace(self.sweep, cfg=cfg)
        report = reporter(ticket)
        return measure_trial(ctx, cfg.candidate, search=cfg.search, level=ticket.level, report=report)

    # ---------------------------------------------------------------- close

    def finish(self, *, reason: str) -> int:
        """Restore and validate the retained configuration, then judge and report. Returns an exit code."""
        if self.finished:
            return 0
        self.finished = True
        self.closing = True
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
        promote = self.cfg.run.promote_keep and reason == COMPLETED and self.requested is None
        code = self._judge(code, promote=promote)
        retained = self._after_sweep()
        if self.requested is not None and self.requested.action == "stop":
            reason = STOPPED_BY_USER
        self.sweep.journal.append(
            SweepFinished(reason=reason, validated=self.validation.ok, retained=retained)
        )
        say(f"sweep directory: {self.dir}")
        return code

    def _judge(self, code: int, *, promote: bool = False) -> int:
        """Judge the stored results, then (``promote``: ``run.promote_keep``) promote the gates' KEEP, then
        render the report, so that it says what is live after the promotion; the exit code, made worse by
        what went wrong. A promotion that raises (Ctrl-C: it restored the previous configuration) still
        leaves the report, rendered from the records, before the exception goes on."""
        say = self.sweep.say
        try:
            from gates.judge import exit_code, judge_sweep  # noqa: PLC0415  (stages load when a sweep closes)
            from report import write_report  # noqa: PLC0415

            verdicts = judge_sweep(self.dir, self.cfg)  # verdicts.json, then the report renders it
            incomplete = exit_code(verdicts) == EXIT_INCOMPLETE
            if promote and self.validation is not None:  # the restore ran (finish)
                try:
                    self.validation, code = promote_after_sweep(
                        self.sweep, self.validation, code or (EXIT_INCOMPLETE if incomplete else 0)
                    )
                except BaseException:
                    with contextlib.suppress(GauntletError, OSError):
                        write_report(self.dir, self.cfg)  # what the interrupted promotion left, said
                    raise
            text = write_report(self.dir, self.cfg).terminal  # the decision table and a summary
            print(text, flush=True)
            for line in confirmation_lines(self.dir, verdicts):  # a search's winner: the gates' word
                say(line)
            if incomplete:  # partial evidence: the sweep is not finished
                then = (
                    f"to complete the sweep: {verdicts.resume}"
                    if verdicts.resume
                    else "resuming would measure nothing missing: each verdict's reason says what to change"
                )
                say(f"INCOMPLETE: {len(verdicts.incomplete)} verdict(s) rest on partial evidence; {then}")
                code = code or EXIT_INCOMPLETE
        except GauntletError as exc:
            say(f"report: {exc}")
            code = code or exc.exit_code
        except OSError as exc:
            disk = sweep_dir_error(exc, self.dir)
            if disk is None:
                raise
            say(f"report: {disk}")  # the retained server is restored; only the judge's files are missing
            code = code or disk.exit_code
        return code

    def _after_sweep(self) -> Literal["kept", "stopped"]:
        """Apply ``run.retained_after_sweep`` (keep the retained server up, or stop it: the demo), or a
        ``stop`` that arrived while the sweep restored (it stops the restored server once validated)."""
        ctx = self.sweep
        if self.requested is not None and self.requested.action == "stop":
            stop_leftovers(ctx.servers, ctx.journal.replay(), reason=f"{self.requested.describe()}")
            return "stopped"
        if self.cfg.run.retained_after_sweep != "stop":
            return "kept"
        stop_leftovers(ctx.servers, ctx.journal.replay(), reason="run.retained_after_sweep=stop")
        return "stopped"

    def _stop_for_user(self, request: Request) -> int:
        """``stop`` asked: tear down every server the sweep started, restore nothing, judge what is stored."""
        self.finished = self.closing = True
        ctx = self.sweep
        ctx.say(f"{request.describe()}: stopping every server this sweep started; nothing is restored")
        stop_leftovers(ctx.servers, ctx.journal.replay(), reason="stopped by the user (nothing is restored)")
        code = self._judge(exit_code_for(KeyboardInterrupt()))
        ctx.journal.append(SweepFinished(reason=STOPPED_BY_USER, validated=False, retained="stopped"))
        ctx.say(f"sweep directory: {self.dir}")
        return code

    def completed(self) -> int:
        """The jobs ended: close the sweep (or, after a job's disk failure, settle with its exit code)."""
        self.closing = True
        if self.disk_failure is not None:
            return self.settle(self.disk_failure)
        return self.finish(reason=COMPLETED)

    def settle(self, exc: BaseException) -> int:
        """After a failure or an interrupt: say what happened, restore once if a server was touched,
        and return the exit code (an unexpected exception keeps its type and traceback: :func:`explain`)."""
        self.closing = True  # a request from now on waits until the restore ended
        if isinstance(exc, OSError) and (disk := sweep_dir_error(exc, self._dir_or_empty())) is not None:
            exc = disk
        if isinstance(exc, SweepRequested) and self.requested is not None:
            exc = SweepRequested(self.requested)  # a `stop` said during the unwinding is the last word
        if isinstance(exc, SweepRequested) and exc.request.action == "stop":
            if self.ctx is None or self.finished:
                return exit_code_for(exc)
            try:
                return self._stop_for_user(exc.request)
            except KeyboardInterrupt as again:
                return exit_code_for(again)
        if isinstance(exc, SweepRequested):
            reason, code = f"rollback requested (pid {exc.request.pid})", exit_code_for(exc)
        elif isinstance(exc, KeyboardInterrupt):
            reason, code = f"interrupted ({exc or 'SIGINT'})", exit_code_for(exc)
        elif isinstance(exc, GauntletError):
            say_stderr(str(exc))
            reason, code = f"error: {exc.message}", exc.exit_code
        else:
            say_stderr(explain(exc, self.ctx.dir if self.ctx is not None else ""))
            reason, code = f"error: {type(exc).__name__}: {exc}", 1
        return self._restore_after(reason=reason, code=code)

    def _dir_or_empty(self) -> Path | str:
        if self.ctx is not None:
            return self.ctx.dir
        return self.opening_dir if self.opening_dir is not None else ""

    def _restore_after(self, *, reason: str, code: int) -> int:
        if self.ctx is None or self.finished:
            return code
        what = "after the error above" if reason.startswith("error: ") else reason  # said once, just above
        say_stderr(f"{what}: restoring the retained configuration")
        try:
            self.finish(reason=reason)
        except KeyboardInterrupt as again:
            return exit_code_for(again)
        except GauntletError as err:
            say_stderr(str(err))
            # the cause decides the exit code: a disk failure stays 6 when the restore fails after it
            return code if code == SweepDirError.exit_code else exit_code_for(err)
        except OSError as err:
            disk = sweep_dir_error(err, self.dir)
            if disk is None:
                raise
            say_stderr(str(disk))  # the restore cannot write either: rollback once there is space
            return disk.exit_code
        return code

    def release(self) -> None:
        """The sweep's last act: free the port's lock, then say what runs (or that nothing does)."""
        self.closing = True  # a request from now on waits for the lock: `stop`/`rollback` act themselves
        if self.lock is not None:
            self.lock.release()
        if self._previous_handler is not None:
            signal.signal(REQUEST_SIGNAL, self._previous_handler)
            self._previous_handler = None
        if self.ctx is None:
            return
        for line in job_lines(self.ctx.dir, wait_s=30.0):  # a SLURM sweep: each job's id and final state
            self.ctx.say(line)
        for line in what_runs(self.ctx.dir, self.ctx.servers.seams):  # the process table's word
            self.ctx.say(line)
        try:  # what the gates recommend, said apart from what runs
            recommendations = recommendation_lines(self.ctx.dir, readable_journal(self.ctx.dir).replay())
        except (GauntletError, OSError):
            recommendations = []
        for line in recommendations:
            self.ctx.say(line)


def explain(exc: BaseException, where: Path | str) -> str:
    """An unexpected exception for the user: its type and message, and where its traceback is.

    The traceback goes to ``<sweep>/gauntlet-error.log`` (before the sweep has a directory: the temporary
    directory's ``gauntlet-error-<pid>.log``) and to stderr with ``--verbose``/``GAUNTLET_VERBOSE=1``;
    ``str(exc)`` alone tells nobody anything.
    """
    text = redacted("".join(traceback.format_exception(exc)))  # no URL password in a log or a message
    log = (
        Path(where) / ERROR_LOG
        if where
        else Path(tempfile.gettempdir()) / f"gauntlet-error-{os.getpid()}.log"
    )
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(text)
        saved = f"traceback in {log}"
    except OSError:
        saved = "the traceback could not be saved"
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
    head = f"unexpected {kind}: {redacted(str(exc))}"
    if verbose():
        return f"{text.rstrip()}\n{head}"
    return f"{head} ({saved}; --verbose prints it). This is a bug in gauntlet: please report it."


def verbose() -> bool:
    """``--verbose`` on the command line (the entry point sets GAUNTLET_VERBOSE) or in the environment."""
    return os.environ.get("GAUNTLET_VERBOSE", "") not in ("", "0", "false")


def quiet_http_logs() -> None:
    """Hydra sets the root logger to INFO; per-request lines of the HTTP client would drown the progress."""
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


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
