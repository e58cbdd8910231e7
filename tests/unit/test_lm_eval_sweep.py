"""The lm_eval section of a sweep: its checks before anything starts, what a launch's runs leave and read
back as, and the setting a missing lm-eval names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from contracts.errors import GauntletError, HarnessError, LoadError
from contracts.layout_lmeval import lm_eval_paths
from contracts.lmeval import LmEvalRun
from contracts.lmeval_profile import LmEvalProfile
from contracts.lmeval_sweep import LmEvalConfig, LmEvalFailure, read_launch_lm_eval
from contracts.schema import GauntletConfig, RunConfig
from load.lm_eval import Finished, run_lm_eval
from orchestrator.config.lm_eval import lm_eval_problems
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.measure.lm_eval_runs import failure_of, python_setting, unfinished_profiles
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

GOOD = "kind: lm_eval\nname: {name}\ntasks: [gsm8k]\n"


def _where(dotted: str) -> str:
    return f"<{dotted}>"


@pytest.mark.parametrize(
    ("files", "python", "profiles", "expected"),
    [
        ({"a.yaml": GOOD.format(name="a")}, "exe", [], []),
        ({}, None, [], [("lm_eval.profiles", "missing.yaml", "is not a file")]),
        ({"a.yaml": "kind: lm_eval\nname: a\ntasks: []\n"}, None, [], [("tasks", [], "a non-empty list")]),
        ({"a.yaml": "kind: [\n"}, None, [], [("lm_eval.profiles", "a.yaml", "a readable YAML file")]),
        ({"a.yaml": GOOD.format(name="x"), "b.yaml": GOOD.format(name="x")}, None, [],
         [("name", "x", "a.yaml is named 'x' too")]),
        ({"a.yaml": GOOD.format(name="a")}, "nothere", [], [("lm_eval.python", "nothere", "an interpreter")]),
        ({"a.yaml": GOOD.format(name="a")}, "plain", [], [("lm_eval.python", "plain", "an executable file")]),
        ({"a.yaml": GOOD.format(name="a")}, None, ["lm_eval"],
         [("run.profiles", "lm_eval", "a load profile not named 'lm_eval'")]),
    ],
    ids=["valid", "missing-file", "bad-field", "bad-yaml", "same-name", "no-python", "not-executable",
         "folder-clash"],
)  # fmt: skip
def test_the_section_is_checked_naming_file_field_and_value(  # noqa: PLR0917  (the table's columns)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    python: str | None,
    profiles: list[str],
    expected: list[tuple[str, object, str]],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        Path(name).write_text(text)
    Path("exe").write_text("#!/bin/sh\n")
    Path("exe").chmod(0o755)
    Path("plain").write_text("")
    listed = list(files) or ["missing.yaml"]
    cfg = GauntletConfig(
        lm_eval=LmEvalConfig(profiles=listed, python=python), run=RunConfig(profiles=profiles)
    )
    found = lm_eval_problems(cfg, _where)
    assert [(p.field, p.value) for p in found] == [(f, v) for f, v, _ in expected], found
    for problem, (_, _, words) in zip(found, expected, strict=True):
        assert words in problem.allowed, problem


@pytest.mark.parametrize(
    ("error", "fault", "message"),
    [
        (HarnessError("lm-eval is not installed in py\nmore", evidence=["tail"]), "harness",
         "lm-eval is not installed in py"),
        (LoadError("the server failed lm-eval's requests"), "server", "the server failed lm-eval's requests"),
    ],
    ids=["harness", "server"],
)  # fmt: skip
def test_a_failed_run_is_recorded_by_whose_fault(error: GauntletError, fault: str, message: str) -> None:
    failure = failure_of(error, profile="p", candidate="c")
    assert (failure.fault, failure.message, failure.profile) == (fault, message, "p")
    assert failure.evidence == error.evidence


def _record(profile: str) -> LmEvalRun:
    return LmEvalRun(profile=profile, candidate="c", base_url="u", model="m", argv=[], tasks=["t"], docs=[],
                     wall_s=1.0)  # fmt: skip


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ({}, {}),
        ({"a": "record"}, {"a": LmEvalRun}),
        ({"a": "error", "b": "record"}, {"a": LmEvalFailure, "b": LmEvalRun}),
        ({"a": "both"}, {"a": LmEvalRun}),
    ],
    ids=["none", "record", "error-and-record", "both-files"],
)
def test_a_launchs_runs_read_back(tmp_path: Path, written: dict[str, str], expected: dict[str, type]) -> None:
    for profile, what in written.items():
        paths = lm_eval_paths(tmp_path, profile)
        paths.root.mkdir(parents=True)
        if what in ("record", "both"):
            _record(profile).write(paths.record)
        if what in ("error", "both"):
            LmEvalFailure(profile=profile, candidate="c", fault="harness", message="m").write(paths.error)
    found = read_launch_lm_eval(tmp_path)
    assert {k: type(v) for k, v in found.items()} == expected


def _missing(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, log: Path
) -> Finished:
    return Finished(1, f"{argv[0]}: No module named lm_eval")


@pytest.mark.parametrize(
    ("section", "setting"),
    [
        (LmEvalConfig(python="/opt/venv/bin/python"), "set lm_eval.python (now /opt/venv/bin/python)"),
        (LmEvalConfig(), "set lm_eval.python (now null)"),
        (None, "set the profile's python (lm.yaml)"),
    ],
    ids=["set", "null", "command"],
)
def test_a_missing_lm_eval_names_the_setting_that_chose_the_interpreter(
    tmp_path: Path, section: LmEvalConfig | None, setting: str
) -> None:
    profile = LmEvalProfile(name="p", tasks=["gsm8k"], source="lm.yaml")
    chosen = "" if section is None else python_setting(section)
    with pytest.raises(HarnessError) as info:
        run_lm_eval("http://h:1", "m", profile, candidate="c", out_dir=tmp_path, python_setting=chosen,
                    run=_missing)  # fmt: skip
    assert f"{setting} to an interpreter that has it" in str(info.value)


@pytest.mark.parametrize(
    ("written", "unfinished"),
    [
        ({"a": "record", "b": "error"}, []),
        ({"a": "record"}, ["b"]),  # b's run was interrupted before it left anything
        ({"a": "record", "b": "log only"}, ["b"]),  # interrupted mid-run: its log, no record, no failure
        ({}, ["a", "b"]),
    ],
    ids=["both-ended", "one-never-ran", "one-interrupted", "none"],
)
def test_a_run_that_left_no_scores_and_no_failure_is_unfinished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: dict[str, str], unfinished: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        Path(f"{name}.yaml").write_text(GOOD.format(name=name))
    launch = tmp_path / "candidates" / "c"
    for profile, what in written.items():
        paths = lm_eval_paths(launch, profile)
        paths.root.mkdir(parents=True)
        if what == "record":
            _record(profile).write(paths.record)
        elif what == "error":
            LmEvalFailure(profile=profile, candidate="c", fault="harness", message="m").write(paths.error)
        else:
            paths.log.write_text("Running loglikelihood requests\n")
    section = LmEvalConfig(profiles=["a.yaml", "b.yaml", "edited-away.yaml"], python=None)
    assert unfinished_profiles(section, launch) == unfinished


def test_resume_measures_again_a_launch_interrupted_while_lm_eval_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch's load profiles are complete, its lm-eval run left nothing: not complete (before, resume
    skipped it and the lm_eval_accuracy gate had no baseline scores: INCOMPLETE)."""
    monkeypatch.chdir(tmp_path)
    Path("p.yaml").write_text(GOOD.format(name="p"))
    stub = tmp_path / "python"  # lm-eval that cannot run: a recorded failure, the launch's own result
    stub.write_text("#!/bin/sh\necho 'No module named lm_eval' >&2\nexit 1\n")
    stub.chmod(0o755)
    cfg, _ = load(
        ["run.repeats=1", "run.profiles=[serial]", "lm_eval.profiles=[p.yaml]", f"lm_eval.python={stub}"]
    )
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), FakeLoad(), []))
    run_candidate(ctx, cfg.baseline, role="baseline")
    paths = lm_eval_paths(ctx.candidate_dir("baseline"), "p")
    assert paths.error.exists() and is_complete(ctx, "baseline")
    paths.error.unlink()  # as a sweep interrupted while lm-eval ran leaves it
    assert not is_complete(ctx, "baseline")
