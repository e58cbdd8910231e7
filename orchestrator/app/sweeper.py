"""The Hydra sweeper of a gauntlet sweep: every job composed, typed and validated once, then measured.

Pipeline position: the top of the orchestrator box. ``conf/config.yaml`` selects ``hydra/sweeper:
gauntlet`` (the plugin class is :class:`hydra_plugins.gauntlet_sweeper.gauntlet_sweeper.GauntletSweeper`,
a subclass of :class:`SweeperCore`, because Hydra instantiates plugins only from ``hydra_plugins``). Hydra
calls :meth:`SweeperCore.setup` then :meth:`SweeperCore.sweep`, which

1. expands the command line into jobs with Hydra's own ``split_arguments``;
2. composes every job **once** (:meth:`SweeperCore.validate_batch_is_legal`, Hydra's hook for exactly
   this), types it and validates it, and freezes both: the launcher gets the frozen composition through
   :class:`FrozenConfigLoader` and the job runs with the frozen typed config (:class:`GauntletJob`), so a
   YAML file edited while the sweep runs changes nothing that was planned;
3. opens the sweep (:class:`~orchestrator.app.controller.SweepController`: lock, leftovers, the live
   service stopped, the baseline measured), runs ``super().sweep()`` (the launcher runs the jobs), and
   closes it: restore, validate, judge, report; after a failure or Ctrl-C the same restore, once.

The sweep's exit code leaves Hydra as :class:`SweepEnded`, a ``BaseException`` (Hydra turns an
``Exception`` escaping the sweep into a traceback and exit 1); :func:`orchestrator.app.entry.main` returns
it. All state lives on the plugin instance; nothing is global.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.plugins.config_source import ConfigSource
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, RunMode, TaskFunction
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from contracts.errors import ConfigError, ConfigProblem, GauntletError
from contracts.layout import SweepPaths
from contracts.paths import PROJECT_ROOT
from contracts.schema import GauntletConfig
from contracts.search import Space
from launch.preflight import memory_fit_check, real_probes
from orchestrator.app.controller import SweepController, jobs_run_elsewhere
from orchestrator.app.jobs import run_job
from orchestrator.config.candidate_names import check_candidate_names
from orchestrator.config.candidates import named_candidates
from orchestrator.config.compose import sources_from_hydra, to_typed
from orchestrator.config.compose_errors import translate_compose_error
from orchestrator.config.search_defaults import apply_search_defaults
from orchestrator.config.secrets import REVEALED_FIELDS, conceal_field
from orchestrator.config.validate import Sources, validate
from orchestrator.ledger.nodes import Place, job_place, launching_place
from orchestrator.ledger.opening import write_opening
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.admit import admit_search
from orchestrator.search.checks import checked_space
from orchestrator.search.lines import opening_line
from orchestrator.search.loop import SearchRun
from orchestrator.search.nodes import node_baselines
from orchestrator.search.prune import doctor_flag_check
from orchestrator.search.storage import storage_faults, storage_problem, storage_refusal
from orchestrator.search.study import TrialTicket

#: The default side effects of a sweep (a dotted path, so a test can name a factory of fakes).
REAL_SEAMS = "orchestrator.servers.seams.real_seams"

#: A job's key: its overrides as the sweeper expanded them (``hydra.overrides.task`` inside the job).
JobKey = tuple[str, ...]


@dataclass
class GauntletSweeperConf:
    """``hydra/sweeper=gauntlet``: Hydra's basic sweeper's settings, and the sweep's side effects."""

    _target_: str = "hydra_plugins.gauntlet_sweeper.gauntlet_sweeper.GauntletSweeper"
    #: Jobs per launcher call (None: all at once, as Hydra's basic sweeper).
    max_batch_size: int | None = None
    #: Sweep parameters from the config (``hydra.sweeper.params``), as Hydra's basic sweeper.
    params: dict[str, str] | None = None
    #: Dotted path of a zero-argument callable returning :class:`orchestrator.servers.seams.Seams`.
    seams: str = REAL_SEAMS


def register_sweeper() -> None:
    """Register ``hydra/sweeper=gauntlet`` in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(
        group="hydra/sweeper", name="gauntlet", node=GauntletSweeperConf, provider="gauntlet"
    )


class SweepEnded(BaseException):
    """The sweep's exit code, carried out of Hydra to the entry point (0 is returned normally)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class FrozenConfigLoader(ConfigLoader):
    """Hydra's config loader, composing each job once: later calls get a copy of that composition.

    The launcher composes each job again before it runs it (also in a worker process, where this loader
    arrives pickled with the compositions); with this loader it gets the one the sweep validated.
    """

    def __init__(self, inner: ConfigLoader) -> None:
        self.inner = inner
        self.compositions: dict[JobKey, DictConfig] = {}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        key = tuple(sweep_overrides)
        if key not in self.compositions:
            composed = self.inner.load_sweep_config(master_config, list(sweep_overrides))
            self.compositions[key] = conceal(composed)  # Hydra's .hydra/ and the launcher's pickles too
        return copy.deepcopy(self.compositions[key])

    def load_configuration(
        self,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        return self.inner.load_configuration(
            config_name, overrides, run_mode, from_shell, validate_sweep_overrides
        )

    def get_search_path(self) -> Any:
        return self.inner.get_search_path()

    def get_sources(self) -> list[ConfigSource]:
        return self.inner.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.inner.list_groups(parent_name)

    def get_group_options(
        self,
        group_name: str,
        results_filter: Any = None,
        config_name: str | None = None,
        overrides: list[str] | None = None,
    ) -> list[str]:
        return self.inner.get_group_options(group_name, results_filter, config_name, overrides)

    def compute_defaults_list(self, config_name: str | None, overrides: list[str], run_mode: RunMode) -> Any:
        return self.inner.compute_defaults_list(config_name, overrides, run_mode)


class GauntletJob:
    """The task function the launcher runs: one job, with the typed config the sweep froze for it.

    In the sweeping process it measures through the sweep's controller; in a launcher's worker process
    (arrived pickled, without the controller) it runs :func:`orchestrator.app.jobs.run_job` on its node.
    """

    def __init__(self, frozen: dict[JobKey, GauntletConfig], controller: SweepController, seams: str):
        self.frozen = frozen
        self.controller: SweepController | None = controller
        self.seams = seams
        #: A search's trials, by job: what each reports to the pruner (orchestrator.search).
        self.trials: dict[JobKey, TrialTicket] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["controller"] = None  # the sweeping process's own: locks, journal, live servers
        return state

    def __call__(self, config: DictConfig) -> str | TrialOutcome:
        hc = HydraConfig.get()
        key: JobKey = tuple(str(o) for o in hc.overrides.task)
        cfg = self.frozen.get(key)
        if cfg is None:
            raise GauntletError(
                f"job {' '.join(key) or '(no overrides)'} was not planned by the sweep",
                hint="the jobs of a sweep are fixed when it opens",
            )
        ticket = self.trials.get(key)
        if self.controller is not None:
            return self.controller.measure(cfg) if ticket is None else self.controller.trial(cfg, ticket)
        sweep_dir = Path(str(hc.sweep.dir))
        job_id = str(_selected(hc, "job.id") or f"pid{os.getpid()}")
        place = job_place(job_id) or Place(node=launching_place().node, job=job_id)
        num = _selected(hc, "job.num")
        seams = seams_factory(self.seams)()
        return run_job(cfg, sweep_dir, place, seams, job_num=int(num or 0), ticket=ticket)


def _check_parallel(cfg: GauntletConfig, launcher: str) -> None:
    """``search.parallel`` > 1 needs a launcher that runs jobs side by side, each on a node of its own."""
    assert cfg.search is not None
    if cfg.search.parallel > 1 and not jobs_run_elsewhere(launcher, cfg):
        allowed = (
            "1 with this launcher: trials side by side need one that runs jobs on nodes of their own "
            "(hydra/launcher=gauntlet_slurm, or gauntlet_local with run.simulated_nodes >= 1)"
        )
        raise ConfigError([ConfigProblem("<search>", "search.parallel", cfg.search.parallel, allowed)])


def _selected(hc: Any, key: str) -> Any:
    """``hydra.<key>`` as a launcher set it; None where it is left missing."""
    return OmegaConf.select(hc, key, default=None)


def seams_factory(path: str) -> Any:
    """The callable named by ``hydra.sweeper.seams`` (a ConfigError names it when it does not exist)."""
    try:
        return get_method(path)
    except Exception as exc:
        raise ConfigError(
            [ConfigProblem("command line", "hydra.sweeper.seams", path, f"a callable's dotted path ({exc})")]
        ) from exc


def without_hydra(config: DictConfig) -> DictConfig:
    """A copy of a composed config without the ``hydra`` node, keeping its structured (typed) nodes."""
    cfg = copy.deepcopy(config)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def conceal(config: DictConfig, environ: MutableMapping[str, str] = os.environ) -> DictConfig:
    """``config`` (changed in place, and returned) with each URL password of a field read back where it is
    used (``search.storage``) moved to the environment the sweep and its jobs run in (a launcher's job
    inherits it): every file, Hydra's records and the pickled jobs then carry ``<from $VAR>``, and the
    search opens its storage with the password put back (orchestrator.config.secrets)."""
    for field in REVEALED_FIELDS:
        value = OmegaConf.select(config, field, default=None, throw_on_resolution_failure=False)
        found = conceal_field(field, value)
        if found is not None:
            environ[found.variable] = found.password
            with open_dict(config):
                OmegaConf.update(config, field, found.value, merge=False)
    return config


def _names_candidate(override: str) -> bool:
    """Whether a command-line override picks or sets the measured candidate (``candidate=x``,
    ``candidate.max_num_seqs=8``); ``candidate@baseline=...`` picks the baseline, which a trial keeps."""
    key = override.lstrip("+~").split("=", 1)[0]
    return key == "candidate" or key.startswith("candidate.")


def save_config(config: DictConfig, sweep_dir: Path) -> None:
    """The sweep's composed config and its command-line overrides, as the recorded-sweep commands read;
    the overrides as typed (``${oc.env:VAR}`` is not resolved: its value may be a secret)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    paths = SweepPaths(sweep_dir)
    paths.config.write_text(OmegaConf.to_yaml(without_hydra(config), resolve=True))
    typed = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    overrides = [str(o) for o in typed] if isinstance(typed, list) else []
    paths.overrides.write_text("\n".join(overrides) + ("\n" if overrides else ""))


class SweeperCore(BasicSweeper):
    """Hydra's basic sweeper around a gauntlet sweep: validate every job once, open, launch, close."""

    def __init__(
        self, max_batch_size: int | None = None, params: dict[str, str] | None = None, seams: str = REAL_SEAMS
    ) -> None:
        # BasicSweeper.__init__ is not called: it runs `super(BasicSweeper, self)` through its module's
        # global, and Hydra's plugin scan re-executes hydra._internal.core_plugins.basic_sweeper
        # (load_module) after this class subclassed it, so that global names another class. Its attributes:
        Sweeper.__init__(self)
        self.overrides: Sequence[Sequence[Sequence[str]]] | None = None
        self.batch_index = 0
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.controller = SweepController(seams_factory(seams))
        self.seams = seams
        #: Every job's typed config, frozen when the sweep validated it (keyed by its overrides).
        self.frozen: dict[JobKey, GauntletConfig] = {}
        self.loader: FrozenConfigLoader | None = None
        self.job: GauntletJob | None = None
        #: The sweep's typed config when it runs a search (conf/search/), else None.
        self.searching: GauntletConfig | None = None
        self.job_index = 0
        self.space: Space | None = None
        #: The search's study fingerprint, computed at the opening (orchestrator.search.shared).
        self.fingerprint: dict[str, str] | None = None
        self.base_overrides: list[str] = []

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        conceal(config)  # before the launcher holds it: no URL password in multirun.yaml or a pickled job
        self.loader = FrozenConfigLoader(hydra_context.config_loader)
        context = HydraContext(config_loader=self.loader, callbacks=hydra_context.callbacks)
        job = self.job = GauntletJob(self.frozen, self.controller, self.seams)
        super().setup(hydra_context=context, task_function=job, config=config)

    # ---------------------------------------------------------------- validate (Hydra's hook)

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Compose, type and validate each job not validated yet; every problem of every job at once."""
        assert self.loader is not None and self.config is not None
        search_path = sources_from_hydra(self.config.hydra).search_path
        problems: list[ConfigProblem] = []

        def add(found: list[ConfigProblem]) -> None:
            seen = {str(q) for q in problems}
            problems.extend(p for p in found if str(p) not in seen)

        for overrides in batch:
            key: JobKey = tuple(overrides)
            if key in self.frozen:
                continue
            try:
                composed = self.loader.load_sweep_config(self.config, list(overrides))
            except (HydraException, OmegaConfBaseException) as exc:  # name the file the user wrote
                add(
                    translate_compose_error(
                        exc, Sources(search_path=search_path, overrides=list(key))
                    ).problems
                )
                continue
            try:
                sources = sources_from_hydra(composed.hydra)
                sources.overrides = list(key)
                typed = to_typed(without_hydra(composed), sources)
                apply_search_defaults(typed, sources)
                validate(typed, sources)
            except ConfigError as exc:
                add(exc.problems)
                continue
            self.frozen[key] = typed
        if problems:
            raise ConfigError(problems)

    # ---------------------------------------------------------------- the sweep

    def jobs(self, arguments: list[str]) -> list[list[str]]:
        """Every job's overrides, expanded by Hydra's own parser and ``split_arguments``, in launch order."""
        assert self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = parser.parse_overrides([*self._parse_config(), *arguments])
        return [list(job) for batch in self.split_arguments(parsed, None) for job in batch]

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        controller = self.controller
        results: Any = None
        try:
            self._open(arguments, sweep_dir)
            results = self._search(sweep_dir) if self.searching is not None else super().sweep(arguments)
            code = controller.completed()
        except BaseException as exc:  # Ctrl-C, SIGTERM, a failed job, a refused config: restore once
            code = controller.settle(exc)
        finally:
            controller.release()
        if code:
            raise SweepEnded(code)
        return results

    def _open(self, arguments: list[str], sweep_dir: Path) -> None:
        assert self.config is not None
        node = launching_place().node
        # A sweep refused by another's lock (or by its config) writes nothing: the lock and every check
        # come before the first file.
        typed = to_typed(without_hydra(self.config), sources_from_hydra(self.config.hydra))
        derived = apply_search_defaults(typed, sources_from_hydra(self.config.hydra))  # as each job's
        self.controller.lock_port(typed.service.port, sweep_dir)
        opened = False
        baseline_option = str(self.config.hydra.runtime.choices.get("candidate@baseline", "baseline"))
        if typed.search is not None and not named_candidates(arguments):  # its trials are the baseline's
            arguments = [*arguments, f"candidate={baseline_option}"]
        try:
            jobs = self.jobs(arguments)
            check_candidate_names(sources_from_hydra(self.config.hydra).search_path)
            self.validate_batch_is_legal(jobs)
            if typed.search is not None:  # its space is checked before the first file, as the jobs are
                target = str(self.config.hydra.launcher.get("_target_", ""))
                elsewhere = jobs_run_elsewhere(target, typed)  # its budget pays node baselines there
                self.space = checked_space(typed, sources_from_hydra(self.config.hydra), elsewhere=elsewhere)
                _check_parallel(typed, target)
                # its study's database, reached before the live service is stopped (doctor asks the same)
                if (fault := storage_problem(typed.search.storage)) is not None:
                    raise storage_refusal(fault)
                # vLLM's flags, SQLite from other nodes, a shared study of another configuration
                self.fingerprint = admit_search(
                    typed,
                    self.space,
                    real_probes(PROJECT_ROOT),
                    where=sources_from_hydra(self.config.hydra).describe("search"),
                    launcher=str(self.config.hydra.launcher.get("_target_", "")),
                )
                self.searching = typed
                # Each trial is a job of the command line's overrides (less a candidate it names) + its point.
                self.base_overrides = [o for o in jobs[0] if not _names_candidate(o)]
            write_opening(sweep_dir, "opening", node=node)
            opened = True
            launcher = str(self.config.hydra.launcher.get("_target_", ""))
            elsewhere = jobs_run_elsewhere(launcher, typed)
            for item in derived:  # recorded where the recorded-sweep commands read the configuration
                OmegaConf.update(self.config, item.field, item.value, merge=False)
            save_config(self.config, sweep_dir)
            chosen = [self.frozen[tuple(job)].candidate for job in jobs]
            names = [c.name for c in chosen]
            title = None
            if typed.search is not None and self.space is not None:  # a search, not a sweep of one job
                nodes = node_baselines(typed, sweep_dir, elsewhere=elsewhere)  # as the search's run charges
                title = opening_line(typed.search, self.space, interleave=typed.run.interleave, nodes=nodes)
            self.controller.open(
                typed,
                sweep_dir,
                names=names,
                jobs_elsewhere=elsewhere,
                candidates=chosen,
                title=title,
                baseline_file=sources_from_hydra(self.config.hydra).baseline_file(),
                notes=[f"search: {item.line}" for item in derived],
            )
            write_opening(sweep_dir, "open", node=node)
        except BaseException as exc:
            if not opened:
                raise  # refused before the first file: the sweep directory is left as it was
            with contextlib.suppress(OSError):
                reason = (str(exc).splitlines() or [type(exc).__name__])[0][:500]
                write_opening(sweep_dir, "failed", node=node, reason=reason)
            raise

    # ---------------------------------------------------------------- a search (conf/search/)

    def _search(self, sweep_dir: Path) -> list[str | TrialOutcome]:
        """The search's trials as jobs through the launcher, then its finalists' confirmations as ordinary
        candidates, inside its budget (orchestrator.search); the jobs' return values."""
        assert self.config is not None and self.searching is not None and self.space is not None
        cfg = self.searching
        baseline_option = str(self.config.hydra.runtime.choices.get("candidate@baseline", "baseline"))
        results: list[str | TrialOutcome] = []
        # Hydra's record of the multirun, as its basic sweeper writes it before the first job: the launcher
        # it names is how `stop`, `rollback` and the closing job lines find the search's scheduler jobs.
        OmegaConf.save(self.config, SweepPaths(sweep_dir).multirun)

        def launch_batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
            """Trials side by side (search.parallel): one launch of several jobs; a job that failed is
            its exception, which the search records as a failed trial."""
            assert self.launcher is not None and self.job is not None
            batch = [[*self.base_overrides, *point] for point, _ in jobs]
            self.validate_batch_is_legal(batch)
            for overrides, (_, ticket) in zip(batch, jobs, strict=True):
                self.job.trials[tuple(overrides)] = ticket
            returns = self.launcher.launch(batch, initial_job_idx=self.job_index)
            self.job_index += len(returns)
            values: list[Any] = []
            for ret in returns:
                try:
                    values.append(ret.return_value)
                except Exception as exc:  # Hydra re-raises the job's own exception here
                    values.append(exc)
            results.extend(values)
            return values

        def launch_job(point: list[str], ticket: TrialTicket | None) -> str | TrialOutcome:
            assert self.launcher is not None and self.job is not None
            overrides = [*self.base_overrides, *point]
            self.validate_batch_is_legal([overrides])
            if ticket is not None:
                self.job.trials[tuple(overrides)] = ticket
            else:  # the winner's confirmation: the same point as its trial, measured as a candidate
                self.job.trials.pop(tuple(overrides), None)
            returns = self.launcher.launch([overrides], initial_job_idx=self.job_index)
            self.job_index += len(returns)
            value: str | TrialOutcome = returns[0].return_value
            results.append(value)
            return value

        probes = real_probes(PROJECT_ROOT)
        launcher = str(self.config.hydra.launcher.get("_target_", ""))
        check, _ = doctor_flag_check(cfg, probes)
        memory, _ = memory_fit_check(cfg, probes)
        run = SearchRun(
            cfg,
            sweep_dir,
            baseline_option=baseline_option,
            space=self.space,
            flag_check=check,
            launch_job=launch_job,
            say=self.controller.sweep.say,
            launch_batch=launch_batch,
            fingerprint=self.fingerprint,
            memory_check=memory,
            nodes=node_baselines(cfg, sweep_dir, elsewhere=jobs_run_elsewhere(launcher, cfg)),
        )
        assert cfg.search is not None
        with storage_faults(cfg.search.storage or str(SweepPaths(sweep_dir).study)):  # gauntlet's words
            run.run()
        run.confirm(lambda names: decisions_so_far(sweep_dir, cfg, names))  # inside the search's budget
        return results


def decisions_so_far(sweep_dir: Path, cfg: GauntletConfig, names: list[str]) -> dict[str, str]:
    """The gates' decision on each of ``names`` from the results stored so far (the judge, run between a
    search's confirmations to decide whether a runner-up is confirmed; verdicts.json is written at the
    sweep's close, not here); {} when the stored results cannot be judged yet (then no KEEP is known)."""
    from gates.judge import judge  # noqa: PLC0415  (stages load when a sweep closes; here, when it confirms)

    try:
        verdicts = judge(sweep_dir, cfg)
    except (GauntletError, OSError, ValueError):
        return {}
    return {v.candidate: v.decision for v in verdicts.verdicts if v.candidate in names}
