"""Hydra entry point of the sweep: ``python -m orchestrator -m candidate=glob(*)``.

Pipeline position: the top of the orchestrator box. A Hydra callback opens the sweep before the first job
(validates every job's config, records the retained spec, stops the live service, measures the baseline)
and closes it after the last (restores the retained configuration, validates it under load, judges,
reports). Each Hydra job measures one candidate, so ``hydra/launcher`` and ``hydra/sweeper`` choices keep
working. :func:`main` wraps Hydra so that the restore also runs after a failed job, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import copy
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from contracts.errors import ConfigError, ConfigProblem, GauntletError, exit_code_for
from contracts.paths import CONF_DIR
from contracts.results import RecoveryValidation
from contracts.schema import GauntletConfig
from orchestrator.config import (
    Sources,
    check_candidate_names,
    register_configs,
    sources_from_hydra,
    to_typed,
    validate,
)
from orchestrator.sweep import Lifecycle, Seams, real_seams, say_stderr

#: Builds the side-effect seams; tests may replace it.
SEAMS_FACTORY: Callable[[], Seams] = real_seams


class Session:
    """The sweep open in this process (None between sweeps)."""

    current: Session | None = None
    #: Why the sweep could not open or close. Hydra turns a callback's exception into a warning and
    #: launches the jobs anyway, so callbacks store it here, jobs check it, and :func:`main` reports it.
    failure: Exception | None = None
    #: Exit code decided when the sweep closed (the restore's validation, the report).
    exit_code: int = 0

    def __init__(self, cfg: GauntletConfig, sweep_dir: Path) -> None:
        self.cfg = cfg
        self.dir = sweep_dir
        _quiet_http_logs()
        self.seams = SEAMS_FACTORY()
        self.lifecycle = Lifecycle(cfg, sweep_dir, self.seams)
        self.finished = False
        self.validation: RecoveryValidation | None = None

    def begin(self) -> None:
        sweeps = Path(self.cfg.run.sweeps_dir)
        latest = sweeps / "latest"
        previous = latest.resolve() if latest.is_symlink() and latest.resolve().is_dir() else None
        self.dir.mkdir(parents=True, exist_ok=True)
        point_latest(sweeps, self.dir)
        self.lifecycle.begin(previous=previous)
        run = self.lifecycle.run_candidate(self.cfg.baseline, role="baseline")
        if not run.startup.ok:
            raise GauntletError(
                f"the baseline {self.cfg.baseline.name} did not start ({run.startup.kind}): "
                f"{run.startup.matched_line or '-'}; nothing can be compared",
                evidence=run.startup.evidence[-10:],
                hint=f"see {self.lifecycle.candidate_dir(self.cfg.baseline.name) / 'server.log'}",
            )

    def finish(self, *, reason: str) -> int:
        """Restore and validate the retained configuration, then judge and report. Returns an exit code."""
        if self.finished:
            return 0
        self.finished = True
        say = self.seams.say
        if not self.lifecycle.touched:
            say("no server was started or stopped: nothing to restore")
            return 0
        try:
            self.validation = self.lifecycle.restore(reason=reason)
        except KeyboardInterrupt:
            say("interrupted during the restore: run `python -m orchestrator rollback` to finish it")
            raise
        code = 0 if self.validation.ok else 7
        try:
            from gates.judge import judge_sweep  # noqa: PLC0415
            from report import build_report  # noqa: PLC0415

            judge_sweep(self.dir, self.cfg)  # verdicts.json, then the report renders it
            text = build_report(self.dir, self.cfg)
            print(text, flush=True)
        except GauntletError as exc:
            say(f"report: {exc}")
            code = code or exc.exit_code
        self.lifecycle.journal.append("sweep_finished", reason=reason, validated=self.validation.ok)
        say(f"sweep directory: {self.dir}")
        return code


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
    check_candidate_names(_sources(config).search_path)
    loader = GlobalHydra.instance().config_loader()
    problems: list[ConfigProblem] = []
    names: list[str] = []
    for overrides in expand_jobs(config):
        job = loader.load_sweep_config(config, overrides)
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
        try:
            names = prevalidate(config)
            sweep_dir = Path(str(config.hydra.sweep.dir))
            _save_config(config, sweep_dir)
            session = Session(_typed(config), sweep_dir)
            Session.current = session
            session.seams.say(f"sweep of {len(names)} job(s) in {sweep_dir}: {', '.join(names)}")
            session.begin()
        except Exception as exc:
            Session.failure = exc

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        session = Session.current
        if session is None or Session.failure is not None:
            return
        try:
            Session.exit_code = session.finish(reason="sweep completed")
        except Exception as exc:
            Session.failure = exc

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            typed = _typed(config)
            validate(typed, _sources(config))
            sweep_dir = Path(str(config.hydra.run.dir))
            _save_config(config, sweep_dir)
            session = Session(typed, sweep_dir)
            Session.current = session
            session.begin()
        except Exception as exc:
            Session.failure = exc

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.on_multirun_end(config)


def job(config: DictConfig) -> str:
    """One Hydra job: measure one candidate (the baseline was measured when the sweep opened)."""
    if Session.failure is not None:
        return "not run: the sweep did not open"
    _quiet_http_logs()
    typed = _typed(config)
    validate(typed, _sources(config))
    if typed.candidate.name == typed.baseline.name:
        return "baseline (measured when the sweep opened)"
    hc = HydraConfig.get()
    sweep_dir = Path(str(hc.sweep.dir if hc.mode == RunMode.MULTIRUN else hc.run.dir))
    session = Session.current
    lifecycle = (
        session.lifecycle
        if session is not None and session.dir.resolve() == sweep_dir.resolve()
        else Lifecycle(typed, sweep_dir, SEAMS_FACTORY())
    )
    lifecycle.cfg = typed
    run = lifecycle.run_candidate(typed.candidate)
    return "measured" if run.startup.ok else f"did not start: {run.startup.kind}"


def _hydra_entry() -> None:
    register_configs()
    decorated = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)
    decorated()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main(argv: Sequence[str]) -> int:
    """Run Hydra with ``argv``; whatever happens, leave the retained configuration restored."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "orchestrator", *argv]
    Session.current = None
    Session.failure = None
    Session.exit_code = 0
    try:
        _hydra_entry()
        session = Session.current
        if Session.failure is not None:
            failure = Session.failure
            say_stderr(str(failure))
            code = exit_code_for(failure)
            return _restore_after(failure, reason=f"error: {failure}", code=code)
        if session is not None and not session.finished:
            # A Hydra job failed: Hydra skips on_multirun_end, the restore must still happen.
            return session.finish(reason="a job failed") or 1
        return Session.exit_code
    except KeyboardInterrupt as exc:
        return _restore_after(exc, reason=f"interrupted ({exc or 'SIGINT'})", code=130)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        return _restore_after(exc, reason="a job failed", code=code)
    except GauntletError as exc:
        say_stderr(str(exc))
        return _restore_after(exc, reason=f"error: {exc.message}", code=exc.exit_code)
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, previous)


def _restore_after(exc: BaseException, *, reason: str, code: int) -> int:
    session = Session.current
    if session is None or session.finished:
        return code
    say_stderr(f"{reason}: restoring the retained configuration")
    try:
        session.finish(reason=reason)
    except KeyboardInterrupt:
        return 130
    except GauntletError as err:
        say_stderr(str(err))
        return exit_code_for(err)
    return code
