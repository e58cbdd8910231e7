"""Shared studies that cannot corrupt each other (issue 43 item 7; orchestrator.search.shared and the Optuna
adapter): a study's fingerprint stored with it and a mismatch refused field by field, a resume failing only
its own sweep's running trials, SQLite refused where trials report from other machines.

Before: a study stored nothing of what its trials measured (a sweep with another SLO or space joined it and
its best point compared numbers of two measurements), opening a study marked *every* running trial failed
(a colleague's live sweep included, whose next tell then crashed), and SQLite with search.parallel > 1 on
SLURM was accepted."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest

from contracts.errors import ConfigError, LaunchError
from contracts.schema import GauntletConfig
from contracts.search import SearchConfig
from launch.preflight import Probes
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.loop import ask_tagged
from orchestrator.search.shared import (
    ENCODING,
    FINGERPRINT_FIELDS,
    SWEEP_ATTR,
    fingerprint_problems,
    remote_launcher,
    remote_target,
    server_version,
    sqlite_parallel_problem,
    study_fingerprint,
)
from orchestrator.search.study import SearchStudy, stored_fingerprint
from tests.unit.composed import load

pytestmark = pytest.mark.unit

SEARCH = ["search=demo", "capacity.profile=decode_heavy"]


@pytest.fixture(scope="module")
def base() -> GauntletConfig:
    cfg, _ = load(SEARCH)
    return cfg


def _set(path: str, value: object) -> Callable[[GauntletConfig], None]:
    def change(cfg: GauntletConfig) -> None:
        *parents, last = path.split(".")
        node: object = cfg
        for part in parents:
            node = node[part] if isinstance(node, dict) else getattr(node, part)
        if isinstance(node, dict):
            node[last] = value
        else:
            setattr(node, last, value)

    return change


def _copy(cfg: GauntletConfig) -> GauntletConfig:
    import copy

    return copy.deepcopy(cfg)


@pytest.mark.parametrize(
    ("change", "differs"),
    [
        (_set("service.model", "other/model"), ["model"]),
        (_set("service.max_model_len", 4096), ["model"]),
        (_set("host.gpu_count", 4), ["host"]),
        (_set("slo.ttft_s", 1.0), ["slo"]),
        (_set("capacity.profile", "short"), ["workload"]),
        (_set("workloads.decode_heavy.num_requests", 64), ["workload"]),
        (_set("search.objective", "goodput"), ["objective"]),
        (_set("search.space.max_num_seqs", "choice(16,32)"), ["space"]),
        (_set("baseline.max_num_seqs", 48), ["baseline"]),
        # what only this sweep decides is no part of what the study's trials measured
        (_set("search.max_launches", 99), []),
        (_set("search.seed", 7), []),
        (_set("search.parallel", 2), []),
        (_set("baseline.description", "another word"), []),
    ],
)
def test_the_fingerprint_names_what_differs_field_by_field(
    base: GauntletConfig, change: Callable[[GauntletConfig], None], differs: list[str]
) -> None:
    other = _copy(base)
    change(other)
    ours, theirs = study_fingerprint(base, "vLLM 0.32.0"), study_fingerprint(other, "vLLM 0.32.0")
    assert list(ours) == list(FINGERPRINT_FIELDS)
    problems = fingerprint_problems(ours, theirs, study="small", where="db")
    assert [p.field for p in problems] == differs
    for problem in problems:  # the study's value and this sweep's, each said
        assert problem.value == theirs[problem.field][:160] or str(problem.value).endswith("...")
        assert "the study's own" in problem.allowed and problem.file == "study 'small' at db"


def test_a_field_one_fingerprint_lacks_is_not_compared(base: GauntletConfig) -> None:
    ours = study_fingerprint(base, "vLLM 0.32.0")
    older = {k: v for k, v in ours.items() if k != "baseline"}
    assert fingerprint_problems(older, {**ours, "baseline": "x"}, study="s", where="db") == []
    assert [
        p.field for p in fingerprint_problems(ours, {**ours, "vllm": "vLLM 0.33.0"}, study="s", where="d")
    ] == ["vllm"]


def _probes(version: str | None, resolves: bool = True) -> Probes:
    def resolve(program: object) -> list[str]:
        if not resolves:
            raise LaunchError("vllm: not found")
        return ["/venv/bin/vllm"]

    fail = lambda *a: (_ for _ in ()).throw(AssertionError("not asked"))  # noqa: E731
    return Probes(
        host=fail,
        resolve=resolve,
        version=lambda program: version,
        help_text=fail,
        sim_help=fail,
        read_file=fail,
        hf_snapshot=fail,
        port_in_use=fail,
        environ={},
    )


@pytest.mark.parametrize(
    ("kind", "probes", "said"),
    [
        ("gpu", _probes("0.32.0"), "vLLM 0.32.0"),
        ("gpu", _probes(None), "unknown"),
        ("gpu", _probes("0.32.0", resolves=False), "unknown"),
        ("sim", _probes("never asked"), "simulator (h100x8_deepseek_v4_flash)"),
    ],
)
def test_the_server_version_is_doctors(base: GauntletConfig, kind: str, probes: Probes, said: str) -> None:
    cfg = _copy(base)
    cfg.host.kind = kind
    assert server_version(cfg, probes) == said


@pytest.mark.parametrize(
    ("storage", "parallel", "remote", "refused"),
    [
        (None, 2, True, True),  # search/study.db in the sweep directory, written from SLURM's nodes
        ("sqlite:////shared/study.db", 4, True, True),
        ("postgresql+psycopg://me@db/gauntlet", 4, True, False),
        (None, 1, True, False),  # the sweep alone writes its study
        (None, 2, False, False),  # simulated nodes: one machine, one file system
    ],
)
def test_sqlite_with_trials_reporting_from_other_nodes_is_refused(
    storage: str | None, parallel: int, remote: bool, refused: bool
) -> None:
    search = SearchConfig(storage=storage, parallel=parallel)
    problem = sqlite_parallel_problem(search, remote=remote, where="search.yaml")
    assert (problem is not None) is refused
    if problem is not None:
        assert problem.field == "search.storage" and "corrupts" in problem.allowed


SUBMITIT = "hydra_plugins.hydra_submitit_launcher.submitit_launcher"


@pytest.mark.parametrize(
    ("target", "overrides", "remote"),
    [
        (
            "hydra_plugins.gauntlet_submitit_slurm.GauntletSlurmLauncher",
            ["hydra/launcher=gauntlet_slurm"],
            True,
        ),
        (f"{SUBMITIT}.SlurmLauncher", ["hydra/launcher=submitit_slurm"], True),
        ("hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher", ["hydra/launcher=ray"], True),
        (f"{SUBMITIT}.LocalLauncher", ["hydra/launcher=gauntlet_local"], False),
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", ["search=demo"], False),
    ],
)
def test_a_remote_launcher_is_told_from_its_class_and_from_the_command_line(
    target: str, overrides: list[str], remote: bool
) -> None:
    assert remote_target(target) is remote
    assert remote_launcher(overrides) is remote


# ---------------------------------------------------------------- the adapter, on a SQLite file


def _study(url: str, sweep: str, fingerprint: dict[str, str] | None = None) -> SearchStudy:
    search = SearchConfig(name="shared", space={"max_num_seqs": "choice(8,16,32,64)"}, storage=url)
    return SearchStudy(search, parse_space(search), url, sweep=sweep, fingerprint=fingerprint)


def _state(url: str, number: int) -> optuna.trial.TrialState:
    study = optuna.load_study(study_name="shared", storage=url)
    return study.trials[number].state


def test_a_resume_fails_only_its_own_sweeps_running_trials(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    mine, theirs = _study(url, "mine"), _study(url, "theirs")
    left = mine.ask()  # this sweep's trial, left running by a crash
    live = theirs.ask()  # a colleague's, in flight
    assert {t.user_attrs[SWEEP_ATTR] for t in optuna.load_study(study_name="shared", storage=url).trials} == {
        "mine",
        "theirs",
    }
    resumed = _study(url, "mine")  # the resume of this sweep: its own trial failed, the colleague's not
    assert resumed.interrupted == [(left.number, left.params)]
    assert _state(url, left.number) == optuna.trial.TrialState.FAIL
    assert _state(url, live.number) == optuna.trial.TrialState.RUNNING
    third = _study(url, "third")  # a third sweep opening the study fails nobody's
    assert third.interrupted == []
    theirs.tell(live, TrialOutcome(state="complete", values=[3.0]))  # the colleague's tell still lands
    assert _state(url, live.number) == optuna.trial.TrialState.COMPLETE


def test_a_study_keeps_its_fingerprint_and_refuses_another(tmp_path: Path, base: GauntletConfig) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    ours = study_fingerprint(base, "vLLM 0.32.0")
    search = SearchConfig(name="shared")
    assert stored_fingerprint(search, url) is None  # no study yet: nothing created by asking
    _study(url, "a", ours)
    assert stored_fingerprint(search, url) == ours
    _study(url, "b", ours)  # the same configuration joins
    other = _copy(base)
    other.slo.ttft_s = 0.5
    with pytest.raises(ConfigError) as refused:
        _study(url, "c", study_fingerprint(other, "vLLM 0.33.0"))
    assert [p.field for p in refused.value.problems] == ["vllm", "slo"]
    assert refused.value.hint is not None and "search.name=shared_2" in refused.value.hint
    assert stored_fingerprint(search, url) == ours  # the study's own kept


@pytest.mark.parametrize(
    ("sweep", "pareto", "expected"),
    [
        ("b", False, {"max_num_seqs": 16}),  # a colleague's best, measured again first by the next sweep
        ("a", False, None),  # a resume of the sweep that measured it: its own trials are its own
        ("b", True, None),  # a Pareto study has no one best point
    ],
)
def test_the_previous_winner_of_a_matching_study_is_asked_first(
    tmp_path: Path, sweep: str, pareto: bool, expected: dict[str, int] | None
) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    earlier = _study(url, "a")
    for value in (8, 16, 32):
        earlier.enqueue_again({"max_num_seqs": value})
        asked = earlier.ask()
        earlier.tell(asked, TrialOutcome(state="complete", values=[{8: 1.0, 16: 3.0, 32: 2.0}[value]]))
    search = SearchConfig(name="shared", space={"max_num_seqs": "choice(8,16,32,64)"}, storage=url)
    search.pareto = False
    later = SearchStudy(search, parse_space(search), url, sweep=sweep)
    later.search.pareto = pareto  # asked of the same study as a Pareto search would ask it
    assert later.previous_winner() == expected
    if expected is not None:
        later.enqueue_again(expected)
        assert later.previous_winner() is None  # waiting already: a resume does not ask it twice
        assert later.ask().params == expected
        assert later.previous_winner() is None  # asked by this sweep


@pytest.mark.parametrize("held", [True, False])
def test_an_interrupt_while_a_trial_is_asked_leaves_it_tagged_with_its_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """Ctrl-C between asking a trial and tagging it acts after the tag (the loop's ask_tagged): the
    trial is this sweep's, so its resume fails it. The unheld row is the bug the hold prevents."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(url, "mine")
    real = optuna.trial.Trial.set_user_attr

    def interrupted(trial: optuna.trial.Trial, key: str, value: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands between the ask and the tag
        real(trial, key, value)

    monkeypatch.setattr(optuna.trial.Trial, "set_user_attr", interrupted)
    # Ctrl-C raises KeyboardInterrupt, whatever this process inherited: a shell starts a background job
    # with SIGINT ignored, and Python then installs no handler (both rows read "DID NOT RAISE" so).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ask_tagged(study, lambda _: None) if held else study.ask()
    finally:
        signal.signal(signal.SIGINT, before)
    monkeypatch.undo()
    (trial,) = optuna.load_study(study_name="shared", storage=url).trials
    assert (trial.user_attrs.get(SWEEP_ATTR) == "mine") is held
    _study(url, "mine")  # this sweep resumes: a trial it tagged is failed, an untagged one left running
    expected = optuna.trial.TrialState.FAIL if held else optuna.trial.TrialState.RUNNING
    assert _state(url, 0) == expected


def test_a_study_that_held_its_points_otherwise_is_refused_on_its_space(
    tmp_path: Path, base: GauntletConfig
) -> None:
    """A study made before numeric choices were held as ordered positions (its fingerprint's space has no
    encoding) is refused, not resumed: Optuna would fail its first ask on a field's changed distribution."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    ours = study_fingerprint(base, "vLLM 0.32.0")
    assert ENCODING in ours["space"]
    earlier = dict(ours, space=json.dumps({"layouts": base.search.layouts, "space": base.search.space}))
    _study(url, "a", earlier)
    with pytest.raises(ConfigError) as refused:
        _study(url, "b", ours)
    assert [p.field for p in refused.value.problems] == ["space"]
