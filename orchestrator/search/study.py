"""The search's Optuna adapter: the one module that imports Optuna (an import-linter contract holds it).

Pipeline position: under the run loop (:mod:`.loop`, :mod:`.batch`) and a trial's job
(:mod:`orchestrator.app.jobs`, :mod:`orchestrator.app.controller`: :func:`reporter`). The loop sees a study
as :class:`SearchStudy` (ask a point, tell an outcome, the Pareto front) and a trial as :class:`Asked`;
Optuna's own types stay here, so a change of Optuna, or of sampler, is a change of this module only. What
is decided here: the sampler and pruner of ``search.sampler``/``search.pruner``, each field's distribution,
and what Optuna is told for each outcome (:meth:`SearchStudy.tell`). Trials live in Optuna's RDB storage
(``search/study.db`` by default): a resumed sweep reopens the study, and a trial a crash of *this* sweep
left running is marked failed (each trial is tagged with its sweep's id; a colleague's running trials in a
shared study are theirs). A study stores its fingerprint (:mod:`.shared`) when it is made, and a sweep
whose own differs is refused before it asks anything.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import optuna
import sqlalchemy.exc
from sqlalchemy.pool import NullPool

from contracts.errors import ConfigError
from contracts.search import INTEGER_FIELDS, MINIMISED, SearchConfig, Space
from orchestrator.config.secrets import revealed
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.screen_rule import screen_outranked
from orchestrator.search.shared import (
    FINGERPRINT_ATTR,
    SWEEP_ATTR,
    fingerprint_problems,
    mismatch_error,
)
from orchestrator.search.storage import masked_url

#: The objective value an infeasible point is told (maximised objectives; a minimised one gets the largest).
WORST_MAX, WORST_MIN = 0.0, 1e12


@dataclass(frozen=True)
class TrialTicket:
    """What a trial's job needs to report to the pruner: the study's storage and the trial, the level."""

    storage: str
    study: str
    trial_id: int
    level: float
    pareto: bool
    #: The study's pruner (a loaded study gets Optuna's default pruner unless it is given again).
    pruner: str
    reduction_factor: int
    #: The screen's relative noise (capacity.noise): a screen within it of the rung's best is not cut.
    noise: float = 0.0


@dataclass(frozen=True)
class Asked:
    """A trial Optuna asked for: its number, the point it drew, and Optuna's trial (opaque outside)."""

    number: int
    params: dict[str, Any]
    trial: Any = field(compare=False, repr=False)

    @property
    def trial_id(self) -> int:
        return int(self.trial._trial_id)


def directions(search: SearchConfig) -> list[Literal["maximize", "minimize"]]:
    """The objective's direction (MINIMISED: $/Mtok), then, with ``pareto``, the serial latency's."""
    first: Literal["maximize", "minimize"] = "minimize" if search.objective in MINIMISED else "maximize"
    return [first, "minimize"] if search.pareto else [first]


def make_sampler(search: SearchConfig) -> optuna.samplers.BaseSampler:
    """``search.sampler``: random, or TPE, which learns from each trial's constraint (Trial.set_constraint:
    > 0 infeasible). TPE models the fields jointly (``multivariate``, and ``group``: the fields a trial
    drew together), since a deployment's fields interact (a layout moves the best batch and memory
    settings), the Pareto search's too, which Optuna would otherwise model field by field. Where trials
    may be in flight when it asks (``search.parallel`` > 1, or a shared study, ``search.storage``, where
    another sweep's are) it counts them as bad (``constant_liar``), so trials measured side by side are
    not asked at one point. A sequential search in its own study has nothing in flight when it asks:
    there these settings ask the same points as Optuna's defaults. Its model starts after
    ``search.startup_trials`` finished trials (default 4; Optuna's is 10), the search's own first points
    counted: the baseline's point and each layout's start probe (2-6 trials in the benchmark's spaces),
    so random points are at most 2 of a search's first trials there (with 6: up to 4). The rest is
    Optuna's: other ``n_ei_candidates``, ``prior_weight`` and ``gamma`` found fewer best points than
    this on the benchmark's tuning seeds (docs/measurements/search-quality.md); ``consider_endpoints``
    shapes only a numerical field's kernels, not a ``choice``'s (a categorical distribution)."""
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=search.seed)
    with warnings.catch_warnings():  # group is marked experimental (Optuna 5.1)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=search.seed,
            n_startup_trials=search.startup_trials,
            multivariate=True,
            group=True,
            constant_liar=search.parallel > 1 or search.storage is not None,
        )


def open_study(
    search: SearchConfig,
    storage: str,
    *,
    sweep: str = "",
    fingerprint: dict[str, str] | None = None,
    noise: float = 0.0,
) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    """Create the study, or load it (a resumed sweep, a shared study); a trial sweep ``sweep`` left
    running (a crash of this sweep) is marked failed and returned with the study, a running trial of
    another sweep left alone (an untagged one is sweep ""'s). ``fingerprint``: stored when the study is
    made; a study whose stored one differs is refused (ConfigError naming each field), nothing told.
    ``noise``: the screen's run-to-run noise, within which the pruner cuts nothing."""
    study, left, _ = _open(search, storage, sweep=sweep, fingerprint=fingerprint, noise=noise)
    return study, left


def _open(
    search: SearchConfig, storage: str, *, sweep: str, fingerprint: dict[str, str] | None, noise: float = 0.0
) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial], optuna.storages.RDBStorage]:
    sampler = make_sampler(search)
    pruner = make_pruner(search.pruner, search.reduction_factor, noise)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    prepare_tables(storage)
    rdb = optuna.storages.RDBStorage(revealed(storage))  # a URL's password put back only here, in memory
    study = optuna.create_study(
        storage=rdb,
        study_name=search.name,
        directions=directions(search),
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    if fingerprint is not None:
        try:
            check_fingerprint(study, fingerprint, storage)
        except ConfigError:
            rdb.engine.dispose()  # refused: nothing of this sweep stays connected
            raise
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    left = [t for t in running if t.user_attrs.get(SWEEP_ATTR, "") == sweep]
    for trial in left:
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    return study, left, rdb


#: Tries at making a database server's tables while another sweep makes them too.
TABLE_TRIES = 4


def prepare_tables(storage: str, *, tries: int = TABLE_TRIES) -> None:
    """Make Optuna's tables in a database server's storage, once: two sweeps that open a fresh database
    at the same moment race on making them (PostgreSQL refuses the loser's duplicate enum type, a unique
    violation); the loser tries again and finds them made. Its connections are closed at once
    (``NullPool``). A SQLite file has one writer at a time and is left to Optuna."""
    url = revealed(storage)
    if url.startswith("sqlite"):
        return
    for attempt in range(1, tries + 1):
        try:
            rdb = optuna.storages.RDBStorage(url, engine_kwargs={"poolclass": NullPool})
        except sqlalchemy.exc.IntegrityError:
            if attempt == tries:
                raise
            time.sleep(0.2 * attempt)
        else:
            rdb.engine.dispose()
            return


def stored_fingerprint(search: SearchConfig, storage: str) -> dict[str, str] | None:
    """The fingerprint of the study ``search.name`` at ``storage``, without creating it (None: no such
    study yet, or one made before fingerprints)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = optuna.storages.RDBStorage(revealed(storage))
    try:
        study_id = rdb.get_study_id_from_name(search.name)
        stored = rdb.get_study_user_attrs(study_id).get(FINGERPRINT_ATTR)
    except KeyError:  # no study of that name
        return None
    finally:
        rdb.engine.dispose()
    return dict(stored) if isinstance(stored, dict) else None


def check_fingerprint(study: optuna.Study, fingerprint: dict[str, str], storage: str) -> None:
    """Store ``fingerprint`` with a study that has none; refuse one whose stored fingerprint differs."""
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if not isinstance(stored, dict):
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
        return
    name = study.study_name
    if problems := fingerprint_problems(stored, fingerprint, study=name, where=masked_url(storage)):
        raise mismatch_error(problems, name)


def make_pruner(name: str, reduction_factor: int, noise: float = 0.0) -> optuna.pruners.BasePruner:
    """The multi-fidelity rule: the screen (step 1) promotes a point to the full measurement (step 2);
    a point the halving rule would cut goes on while its screen is within ``noise`` of its rung's best
    (:class:`NoisePruner`)."""
    if name == "hyperband":
        return NoisePruner(
            optuna.pruners.HyperbandPruner(min_resource=1, max_resource=2, reduction_factor=reduction_factor),
            noise,
        )
    if name == "successive_halving":
        return NoisePruner(
            optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=reduction_factor), noise
        )
    return optuna.pruners.NopPruner()


class NoisePruner(optuna.pruners.BasePruner):
    """Optuna's halving rule, and a screen beyond noise below its rung's best
    (:func:`orchestrator.search.screen_rule.screen_outranked`): both must say cut."""

    def __init__(self, inner: optuna.pruners.BasePruner, noise: float) -> None:
        self.inner, self.noise = inner, noise

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        if not self.inner.prune(study, trial):
            return False
        step = trial.last_step
        if step is None:
            return False
        others = [
            t.intermediate_values[step]
            for t in study.get_trials(deepcopy=False)
            if t.number != trial.number and step in t.intermediate_values
        ]
        return screen_outranked(trial.intermediate_values[step], others, self.noise)


def ordered_values(values: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A ``choice`` of three or more numbers, ascending: TPE models it as its values' positions (an
    integer interval), so a point near a good value looks good; None: its values are not all numbers (a
    layout, a flag's strings or booleans) or only two, and stay a categorical distribution, where every
    value is as far from every other."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return tuple(sorted(set(values))) if numbers and len(set(values)) >= 3 else None


@dataclass(frozen=True)
class Encoding:
    """A space's points as Optuna holds them (the fingerprint's ``ENCODING``, :mod:`.shared`): an ordered
    choice's value as its position in :func:`ordered_values`, every other field as itself."""

    ordered: dict[str, tuple[Any, ...]]

    @classmethod
    def of(cls, space: Space) -> Encoding:
        found = {d.name: ordered_values(d.values) if d.finite else None for d in space.dimensions}
        return cls({name: values for name, values in found.items() if values is not None})

    def to_study(self, point: dict[str, Any]) -> dict[str, Any]:
        """``point`` as Optuna holds it (a value not among its choice's is refused, as Optuna would)."""
        out = dict(point)
        for name, values in self.ordered.items():
            if name in out:
                if out[name] not in values:
                    raise ValueError(f"{name}={out[name]!r} is not one of the space's values {list(values)}")
                out[name] = values.index(out[name])
        return out

    def from_study(self, params: dict[str, Any]) -> dict[str, Any]:
        """Optuna's ``params`` as the space's point."""
        out = dict(params)
        for name, values in self.ordered.items():
            if name in out:
                out[name] = values[int(out[name])]
        return out


def distributions(space: Space) -> dict[str, optuna.distributions.BaseDistribution]:
    """Optuna's distribution of each dimension: the positions of an ordered choice's values
    (:class:`Encoding`), a categorical of any other choice's values, or an interval: of the whole
    numbers in it for an integer field (``INTEGER_FIELDS``: a float there is no candidate, or an extra
    flag's ``int(interval(a,b))``), else of floats."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for dim in space.dimensions:
        if dim.finite:
            values = ordered_values(dim.values)
            out[dim.name] = (
                optuna.distributions.IntDistribution(0, len(values) - 1)
                if values is not None
                else optuna.distributions.CategoricalDistribution(list(dim.values))
            )
            continue
        assert dim.low is not None and dim.high is not None
        if dim.integer or dim.name in INTEGER_FIELDS:  # parse_space refused one without a whole number
            low, high = math.ceil(dim.low), math.floor(dim.high)
            out[dim.name] = optuna.distributions.IntDistribution(low, high, log=dim.log)
        else:
            out[dim.name] = optuna.distributions.FloatDistribution(dim.low, dim.high, log=dim.log)
    return out


def reporter(ticket: TrialTicket) -> Callable[[int, float], bool]:
    """The pruner's question for a trial's job: report (step, value), then whether to stop here."""
    pruner = make_pruner(ticket.pruner, ticket.reduction_factor, ticket.noise)
    study = optuna.load_study(study_name=ticket.study, storage=revealed(ticket.storage), pruner=pruner)
    trial = optuna.trial.Trial(study, ticket.trial_id)

    def report(step: int, value: float) -> bool:
        if ticket.pareto:
            return False  # Optuna prunes single objectives only
        trial.report(value, step)
        return trial.should_prune()

    return report


class SearchStudy:
    """A study as the run loop uses it: ask a point, tell what it found, read the Pareto front."""

    def __init__(
        self,
        search: SearchConfig,
        space: Space,
        storage: str,
        *,
        sweep: str = "",
        fingerprint: dict[str, str] | None = None,
        noise: float = 0.0,
    ) -> None:
        self.search, self.storage, self.sweep, self.noise = search, storage, sweep, noise
        self.study, left, self.rdb = _open(search, storage, sweep=sweep, fingerprint=fingerprint, noise=noise)
        #: Trials a crash left running (now failed): their numbers and points.
        self.dists = distributions(space)
        self.encoding = Encoding.of(space)
        self.interrupted = [(t.number, self.encoding.from_study(t.params)) for t in left]

    def enqueue(self, params: dict[str, Any]) -> None:
        """Ask ``params`` next (the baseline's point, first); not again when the study holds it already (a
        resumed sweep, a shared study)."""
        self.study.enqueue_trial(self.encoding.to_study(params), skip_if_exists=True)

    def previous_winner(self) -> dict[str, Any] | None:
        """The best fully measured point of the study's other sweeps (a shared study's earlier sweeps,
        whose fingerprint matched), to measure again first; None: there is none, this sweep asked it
        already or has it waiting (a resume), or the study is a Pareto one (no single best)."""
        if self.search.pareto:
            return None
        state = optuna.trial.TrialState
        trials = self.study.get_trials(deepcopy=False)
        theirs = [
            t
            for t in trials
            if t.state == state.COMPLETE
            and t.user_attrs.get(SWEEP_ATTR) not in (None, self.sweep)
            and t.values
        ]
        if not theirs:
            return None
        best = max(theirs, key=lambda t: t.values[0])
        params = dict(best.params)
        mine = (t for t in trials if t.user_attrs.get(SWEEP_ATTR) == self.sweep or t.state == state.WAITING)
        # a waiting trial holds its point as Optuna's "fixed_params" until it is asked
        if any((t.params or t.system_attrs.get("fixed_params")) == params for t in mine):
            return None
        return self.encoding.from_study(params)

    def enqueue_again(self, params: dict[str, Any]) -> None:
        """Ask ``params`` next although the study measured them (the previous winner, measured again here)."""
        self.study.enqueue_trial(self.encoding.to_study(params), skip_if_exists=False)

    def ask(self) -> Asked:
        """The next trial, tagged with this sweep's id (a resume fails only its own running trials)."""
        trial = self.study.ask(self.dists)
        trial.set_user_attr(SWEEP_ATTR, self.sweep)
        return Asked(trial.number, self.encoding.from_study(trial.params), trial)

    def ticket(self, asked: Asked, level: float) -> TrialTicket:
        """What ``asked``'s job reports to the pruner with (pickled to a launcher's worker)."""
        search = self.search
        return TrialTicket(
            self.storage,
            search.name,
            asked.trial_id,
            level,
            search.pareto,
            search.pruner,
            search.reduction_factor,
            self.noise,
        )

    def tell(self, asked: Asked, outcome: TrialOutcome, *, reused: bool = False) -> None:
        """Tell Optuna what a trial found (``reused``: an earlier trial's, whose screen is reported here:
        a measured trial's job reported its own)."""
        state = optuna.trial.TrialState
        trial: optuna.trial.Trial = asked.trial
        # Optuna's constraints (> 0 infeasible; TPE ranks infeasible trials by their sum): the point did
        # not start (or was lost under load), or its screen broke a gated requirement by that fraction.
        trial.set_constraint(
            "starts", 1.0 if outcome.state == "infeasible" and not outcome.constraints else 0.0
        )
        for name, size in outcome.constraints.items():
            trial.set_constraint(name, size)
        if outcome.state == "complete" and outcome.values:
            self.study.tell(trial, outcome.values)
        elif outcome.state == "pruned":
            if reused and outcome.screen is not None and not self.search.pareto:
                trial.report(outcome.screen, 1)
            self.study.tell(trial, state=state.PRUNED)
        elif outcome.state == "infeasible":
            worst = [WORST_MAX if d == "maximize" else WORST_MIN for d in directions(self.search)]
            self.study.tell(trial, worst)
        else:
            self.study.tell(trial, state=state.FAIL)

    def close(self) -> None:
        """Close the study's connections to its storage (a process that goes on without it)."""
        self.rdb.engine.dispose()

    def pareto(self) -> set[int]:
        """The numbers of the trials on the study's Pareto front."""
        return {t.number for t in self.study.best_trials}
