"""``promote``: a KEEP made the live, validated, retained configuration, with fake servers and load.

A sweep with a KEEP (tp4_dp2) is built in-process: its baseline and candidate measured, the baseline
restored, the gates' verdict written. Then ``promote``, and what must follow from it: the candidate live
and retained, ``status``, ``rollback`` and the next sweep's opening using it, the copy beside the port's
lock holding its spec; a refused, a failed and an interrupted promotion; ``run.promote_keep``.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from contracts.candidate_file import read_candidate
from contracts.errors import (
    PreflightError,
    PromotionError,
    PromotionRefused,
    ResultFileError,
    SpecError,
    StartupFailure,
    SweepLockedError,
)
from contracts.layout import SweepPaths, offsite_dir
from contracts.verdicts import DriftResult, SweepVerdict, Verdict, write_verdicts
from launch.spec import LaunchSpec
from orchestrator.config.compose import ConfigLocation
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.lock import SweepLock, lock_dir
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.recovery.promote import main_promote, promote
from orchestrator.recovery.recommend import recommendation_lines
from orchestrator.recovery.restore import restore
from orchestrator.recovery.rollback import rollback
from orchestrator.recovery.status import status
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

OVERRIDES = ["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[decode_heavy]"]
KEEP_REASON = "keep: latency gain beyond noise (serial TTFT p50 0.5x); no requirement failed"


def kept_sweep(
    tmp_path: Path, sup: FakeSupervisor, *, decision: str = "keep", load_: FakeLoad | None = None
) -> SweepContext:
    """Sweep A: baseline and tp4_dp2 measured, the baseline restored and live, tp4_dp2 judged ``decision``."""
    cfg, _ = load(OVERRIDES)
    sweeps = tmp_path / "sweeps"
    ctx = SweepContext.open(cfg, sweeps / "A", fake_seams(sup, load_ or FakeLoad()))
    begin(ctx, sweeps=sweeps)
    run_candidate(ctx, cfg.baseline, role="baseline")
    run_candidate(ctx, load([*OVERRIDES, "candidate=tp4_dp2"])[0].candidate)
    assert restore(ctx, reason="sweep completed").ok
    ctx.paths.config.write_text(yaml.safe_dump(dataclasses.asdict(cfg)))
    reason = KEEP_REASON if decision == "keep" else f"{decision}: the gates' reason"
    verdicts = SweepVerdict(
        baseline="baseline",
        retained="tp4_dp2" if decision == "keep" else "baseline",
        retained_reason="tp4_dp2 is kept" if decision == "keep" else "no candidate is keep: baseline stays",
        drift=DriftResult(status="pass", message="no drift"),
        verdicts=[Verdict(candidate="tp4_dp2", decision=decision, reason=reason)],  # type: ignore[arg-type]
    )
    write_verdicts(ctx.dir, verdicts)
    return ctx


def fingerprint(ctx: SweepContext, *overrides: str) -> str:
    return ctx.render(load([*OVERRIDES, *overrides])[0].candidate).fingerprint


def live_fingerprints(sup: FakeSupervisor) -> list[str]:
    return [server.spec.fingerprint for server in sup.alive.values()]


def said_status(ctx: SweepContext) -> tuple[int, str]:
    out = io.StringIO()
    return status(ctx.dir, ctx.seams, out=out), out.getvalue()


# ------------------------------------------------------------------------------------------ promote OK


def promoted(tmp_path: Path) -> tuple[SweepContext, FakeSupervisor, str]:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    out = io.StringIO()
    assert promote(ctx.dir, "tp4_dp2", ctx.seams, out=out) == 0
    return ctx, sup, out.getvalue()


def check_live(ctx: SweepContext, sup: FakeSupervisor) -> None:
    """The promoted candidate is the one live server, the journal's retained one, validated."""
    tp4 = fingerprint(ctx, "candidate=tp4_dp2")
    assert live_fingerprints(sup) == [tp4]
    state = Journal.of_sweep(ctx.dir).replay()
    assert (state.retained_fingerprint, state.retained_candidate, state.promoting) == (tp4, "tp4_dp2", None)
    assert [s.role for s in state.live.values()] == ["retained"]


def check_status(ctx: SweepContext, sup: FakeSupervisor) -> None:
    code, text = said_status(ctx)
    assert code == 0, text
    assert f"retained configuration: {fingerprint(ctx, 'candidate=tp4_dp2')} (tp4_dp2, promoted)" in text
    assert "promoted: tp4_dp2 (KEEP) is the retained configuration" in text
    assert "state: the retained configuration is the one healthy server, validated" in text
    facts = io.StringIO()
    status(ctx.dir, ctx.seams, out=facts, as_json=True)
    data = json.loads(facts.getvalue())
    assert data["retained_candidate"] == "tp4_dp2" and data["recommended"] == {
        "candidate": "tp4_dp2",
        "promoted": True,
    }


def check_rollback(ctx: SweepContext, sup: FakeSupervisor) -> None:
    sup.alive.clear()  # the promoted server died: rollback restores the promoted configuration
    result = rollback(ctx.dir, ctx.seams, out=io.StringIO())
    assert result.ok and result.candidate == "tp4_dp2", result.reason
    assert live_fingerprints(sup) == [fingerprint(ctx, "candidate=tp4_dp2")]


def check_offsite(ctx: SweepContext, sup: FakeSupervisor) -> None:
    """The copy beside the port's lock (what rollback reads when the sweep directory is lost)."""
    copy = offsite_dir(lock_dir(), ctx.cfg.service.port)
    assert LaunchSpec.read(copy / "spec.json").fingerprint == fingerprint(ctx, "candidate=tp4_dp2")
    assert json.loads((copy / "sweep.json").read_text())["sweep_dir"] == str(ctx.dir.resolve())


def check_deleted_sweep(ctx: SweepContext, sup: FakeSupervisor) -> None:
    """The sweep directory deleted, the promoted server dead: rollback puts the sweep back from the copy
    beside the port's lock and restores the promoted candidate (its file kept there too)."""
    shutil.rmtree(ctx.dir)
    sup.alive.clear()
    result = rollback(ctx.dir, ctx.seams, out=io.StringIO())
    assert result.ok and result.candidate == "tp4_dp2", result.reason
    assert live_fingerprints(sup) == [fingerprint(ctx, "candidate=tp4_dp2")]


def check_next_sweep(ctx: SweepContext, sup: FakeSupervisor) -> None:
    """The next sweep selects the candidate file promote wrote as its baseline, and takes the service over;
    one configured with the old baseline is refused, naming that file."""
    (candidate_file,) = ctx.dir.glob("promotions/*/conf/candidate/tp4_dp2.yaml")
    sweeps = ctx.dir.parent
    old = SweepContext.open(load(OVERRIDES)[0], sweeps / "B", ctx.seams)
    with pytest.raises(PreflightError) as refused:
        begin(old, sweeps=sweeps)
    assert f"{candidate_file} describes it" in str(refused.value.hint)
    assert f"-cd {candidate_file.parent.parent} candidate@baseline=tp4_dp2" in str(refused.value.hint)
    location = ConfigLocation(config_dir=str(candidate_file.parent.parent))
    cfg, _ = load([*OVERRIDES, "candidate@baseline=tp4_dp2"], location=location)
    nxt = SweepContext.open(cfg, sweeps / "C", ctx.seams)
    begin(nxt, sweeps=sweeps)
    adopted = [e for e in Journal.of_sweep(nxt.dir).events() if e.name == "adopted"]
    assert [(e.candidate, getattr(e, "source", "")) for e in adopted] == [("tp4_dp2", str(ctx.dir))]
    assert sup.alive == {}  # taken over and stopped, to be measured as the baseline


def check_no_resume(ctx: SweepContext, sup: FakeSupervisor) -> None:
    """A promoted sweep is finished: resuming it is refused before anything is touched."""
    with pytest.raises(SpecError, match="promoted tp4_dp2"):
        begin(SweepContext.open(ctx.cfg, ctx.dir, ctx.seams))
    assert live_fingerprints(sup) == [fingerprint(ctx, "candidate=tp4_dp2")]


@pytest.mark.parametrize(
    "check",
    [
        check_live,
        check_status,
        check_rollback,
        check_offsite,
        check_deleted_sweep,
        check_next_sweep,
        check_no_resume,
    ],
    ids=lambda f: f.__name__.removeprefix("check_"),
)
def test_a_promoted_keep_is_the_live_validated_retained_configuration(
    tmp_path: Path, check: Callable[[SweepContext, FakeSupervisor], None]
) -> None:
    ctx, sup, said = promoted(tmp_path)
    assert said.startswith("promote OK: tp4_dp2 "), said
    assert "the next sweep's baseline: -cd " in said
    check(ctx, sup)


# ------------------------------------------------------------------------------------------ refused


@pytest.mark.parametrize(
    ("name", "decision", "said"),
    [
        ("tp4_dp2", "reject", "its verdict is REJECT, not KEEP (REJECT: the gates' reason)"),
        ("tp4_dp2", "neutral", "its verdict is NEUTRAL, not KEEP (NEUTRAL: the gates' reason)"),
        ("tp4_dp2", "inconclusive", "its verdict is INCONCLUSIVE, not KEEP"),
        ("tp4_dp2", "incompatible", "its verdict is INCOMPATIBLE, not KEEP"),
        ("tp4_dp2", "incomplete", "its verdict is INCOMPLETE, not KEEP"),
        ("baseline", "keep", "baseline is the sweep's baseline"),
        (
            "eplb",
            "keep",
            "eplb is not a candidate of this sweep: only a candidate the gates kept is promoted",
        ),
    ],
)
def test_promote_refuses_what_the_gates_did_not_keep_and_touches_nothing(
    tmp_path: Path, name: str, decision: str, said: str
) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup, decision=decision)
    before = (sorted(sup.alive), len(Journal.of_sweep(ctx.dir).events()), list(sup.started))
    with pytest.raises(PromotionRefused) as refused:
        promote(ctx.dir, name, ctx.seams)
    assert said in str(refused.value), refused.value
    assert refused.value.exit_code == 2
    assert (sorted(sup.alive), len(Journal.of_sweep(ctx.dir).events()), list(sup.started)) == before
    assert not SweepPaths(ctx.dir).root.joinpath("promotions").exists()


def test_the_command_line_says_why_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup, decision="reject")
    assert main_promote([str(ctx.dir), "tp4_dp2"], lambda: ctx.seams) == 2
    assert "gauntlet promote: refusing to promote tp4_dp2: its verdict is REJECT" in capsys.readouterr().err
    assert main_promote([str(ctx.dir)], lambda: ctx.seams) == 2


@pytest.mark.parametrize(
    ("role", "same_sweep", "said"),
    [
        ("sweep", True, "is still running (pid "),  # its verdicts are not final
        ("rollback", True, "another rollback (pid "),
        ("promote", True, "another promote (pid "),
        ("sweep", False, "is held by the sweep of "),
    ],
)
def test_promote_takes_the_port_as_rollback_does_and_waits_its_turn(
    tmp_path: Path, role: str, same_sweep: bool, said: str
) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    holder = SweepLock.for_port(ctx.cfg.service.port)
    holder.acquire(ctx.dir if same_sweep else tmp_path / "sweeps" / "other", role=role)
    before = (sorted(sup.alive), len(Journal.of_sweep(ctx.dir).events()))
    try:
        with pytest.raises(SweepLockedError) as refused:
            promote(ctx.dir, "tp4_dp2", ctx.seams)
    finally:
        holder.release()
    assert said in str(refused.value), refused.value
    assert (sorted(sup.alive), len(Journal.of_sweep(ctx.dir).events())) == before


@pytest.mark.parametrize(
    ("record", "job_record", "promoted_"),
    [
        (True, None, True),  # this version's sweep: the typed candidate beside its launch
        (False, {}, True),  # an earlier gauntlet's sweep: Hydra's record of the job
        (False, {"max_num_seqs": 7}, False),  # a record that does not render the measured spec
        (False, None, False),  # nothing says which configuration it was
    ],
)
def test_the_candidate_file_comes_from_a_record_that_renders_the_measured_spec(
    tmp_path: Path, record: bool, job_record: dict[str, object] | None, promoted_: bool
) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    tp4 = dataclasses.asdict(load([*OVERRIDES, "candidate=tp4_dp2"])[0].candidate)
    if not record:
        ctx.paths.candidate("tp4_dp2").candidate_config.unlink()
    if job_record is not None:
        hydra = ctx.dir / "jobs" / "0-tp4_dp2" / ".hydra"
        hydra.mkdir(parents=True)
        (hydra / "config.yaml").write_text(yaml.safe_dump({"candidate": {**tp4, **job_record}}))
    if promoted_:
        assert promote(ctx.dir, "tp4_dp2", ctx.seams, out=io.StringIO()) == 0
        (written,) = ctx.dir.glob("promotions/*/conf/candidate/tp4_dp2.yaml")
        assert ctx.render(read_candidate(written)).fingerprint == fingerprint(ctx, "candidate=tp4_dp2")
        return
    with pytest.raises(ResultFileError, match="no recorded configuration of tp4_dp2 renders its measured"):
        promote(ctx.dir, "tp4_dp2", ctx.seams)
    assert live_fingerprints(sup) == [fingerprint(ctx)]  # nothing stopped or started


# ------------------------------------------------------------------------------------------ failed


def did_not_start(sup: FakeSupervisor) -> FakeLoad:
    sup.failures["tp4_dp2"] = StartupFailure(
        "exited", kind="bad-args", exit_code=2, matched_line="error: --x"
    )
    return FakeLoad()


def dies_under_load(sup: FakeSupervisor) -> FakeLoad:
    def kill(candidate: str, profile: str, repeat: int) -> None:
        if candidate == "tp4_dp2" and profile == "decode_heavy":  # the promotion's validation
            (pid,) = [p for p, s in sup.alive.items() if s.spec.candidate == "tp4_dp2"]
            sup.dead.add(pid)

    return FakeLoad(before=kill)


@pytest.mark.parametrize(
    ("failure", "why"),
    [(did_not_start, "tp4_dp2 did not start (bad-args): error: --x"), (dies_under_load, "server events")],
)
def test_a_failed_promotion_restores_the_previous_configuration_validated(
    tmp_path: Path, failure: Callable[[FakeSupervisor], FakeLoad], why: str
) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)  # its candidate started and was measured: the fault comes now
    seams = fake_seams(sup, failure(sup))
    with pytest.raises(PromotionError) as failed:
        promote(ctx.dir, "tp4_dp2", seams)
    assert failed.value.exit_code == 7
    assert f"the promotion of tp4_dp2 failed: {why}" in str(failed.value), failed.value
    assert "the previous retained configuration baseline is live again, validated" in str(failed.value)
    baseline = fingerprint(ctx)
    assert live_fingerprints(sup) == [baseline]
    state = Journal.of_sweep(ctx.dir).replay()
    assert (state.retained_fingerprint, state.retained_candidate, state.promoting) == (
        baseline,
        "baseline",
        None,
    )
    assert "promotion_failed" in [e.name for e in Journal.of_sweep(ctx.dir).events()]
    code, text = said_status(ctx)
    assert code == 0 and "recommended: tp4_dp2 (KEEP), not serving" in text, text


# ------------------------------------------------------------------------------------------ interrupted


class Crash(BaseException):
    """The orchestrator's process ends mid-promotion (an exception no handler takes)."""


#: What interrupts the candidate's validation, as the hook raises it (SIGKILL: a Crash, then undone).
RAISED: dict[str, type[BaseException]] = {
    "ctrl-c": KeyboardInterrupt,
    "error": RuntimeError,
    "exit": Crash,
    "sigkill": Crash,
}


def interrupted(tmp_path: Path, how: str) -> tuple[SweepContext, FakeSupervisor, type[BaseException]]:
    """Promote, interrupted during the candidate's validation: Ctrl-C, an error, an exit no handler takes,
    or SIGKILL (the journal ends where the kill found it and the candidate's server keeps running)."""
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    journal = Journal.of_sweep(ctx.dir)
    at_kill: dict[str, object] = {}

    def hook(candidate: str, profile: str, repeat: int) -> None:
        if candidate == "tp4_dp2" and profile == "decode_heavy":
            at_kill["journal"] = journal.path.read_bytes()
            at_kill["alive"] = dict(sup.alive)
            raise RAISED[how]

    # An error under load reaches promote as the validation's own (a profile without its summary).
    error = Exception if how == "error" else RAISED[how]
    with pytest.raises(error):
        promote(ctx.dir, "tp4_dp2", fake_seams(sup, FakeLoad(before=hook)))
    if how == "sigkill":  # nothing after the kill was written or torn down
        journal.path.write_bytes(at_kill["journal"])  # type: ignore[arg-type]
        sup.alive = at_kill["alive"]  # type: ignore[assignment]
    return ctx, sup, error


@pytest.mark.parametrize(
    ("how", "state_before", "live_before"),
    [
        # Ctrl-C or an error: promote restores the previous configuration itself; rollback validates it.
        ("ctrl-c", "the retained configuration is the one healthy server, validated", ["baseline"]),
        ("error", "the retained configuration is the one healthy server, validated", ["baseline"]),
        # An exit no handler takes: the candidate torn down while unwinding, nothing restored.
        ("exit", "the promotion of tp4_dp2 (begun ", []),
        # SIGKILL: the candidate still runs, unvalidated, not the retained configuration.
        ("sigkill", "the promotion of tp4_dp2 (begun ", ["tp4_dp2"]),
    ],
)
def test_an_interrupted_promotion_is_a_known_state_that_rollback_repairs(
    tmp_path: Path, how: str, state_before: str, live_before: list[str]
) -> None:
    ctx, sup, _ = interrupted(tmp_path, how)
    assert [s.spec.candidate for s in sup.alive.values()] == live_before
    state = Journal.of_sweep(ctx.dir).replay()
    assert (state.retained_candidate, state.retained_fingerprint) == ("baseline", fingerprint(ctx))
    code, text = said_status(ctx)
    assert f"state: {state_before}" in text, text
    assert code == (0 if how in ("ctrl-c", "error") else 1)
    assert rollback(ctx.dir, ctx.seams, out=io.StringIO()).ok
    assert live_fingerprints(sup) == [fingerprint(ctx)]
    code, text = said_status(ctx)
    assert code == 0 and "state: the retained configuration is the one healthy server, validated" in text
    assert Journal.of_sweep(ctx.dir).replay().promoting is None


# ------------------------------------------------------------------------------------------ the sweep's end


def test_the_recommendation_is_said_apart_from_what_runs(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    state = Journal.of_sweep(ctx.dir).replay()
    assert recommendation_lines(ctx.dir, state) == [
        f"recommended: tp4_dp2 (KEEP), not serving: `python -m orchestrator promote {ctx.dir} tp4_dp2` "
        "launches it, validates it under load and makes it the retained configuration (the live service "
        "stops for its start; a failure restores the current one)"
    ]


@pytest.mark.parametrize(
    ("retained", "restored", "line"),
    [
        ("baseline", "baseline", "retained: baseline (why); recovery validation PASSED"),
        ("fast", "fast", "retained: fast (why); recovery validation PASSED"),  # a promoted sweep's restore
        (
            "fast",
            "baseline",
            "recommended: fast (why), not live; restored after the sweep: baseline, recovery validation "
            "PASSED",
        ),
        (
            "fast",
            None,
            "recommended: fast (why), not live; restored after the sweep: baseline, recovery validation "
            "NOT RUN",
        ),
    ],
)
def test_the_sweeps_summary_never_reads_as_if_the_kept_candidate_were_serving(
    retained: str, restored: str | None, line: str
) -> None:
    from contracts.results import RecoveryValidation
    from report.markdown import retained_line
    from report.model import ReportModel

    recovery = None
    if restored is not None:
        recovery = RecoveryValidation(
            ok=True, candidate=restored, fingerprint="f", recorded_fingerprint="f", pid=1, reason="ok"
        )
    report = ReportModel.model_construct(
        baseline="baseline", retained=retained, retained_reason="why", recovery=recovery
    )
    assert retained_line(report) == line


# ------------------------------------------------------------------------------------------ said truthfully


@pytest.mark.parametrize(
    ("act", "reason"),
    [
        ("sweep", "restored baseline byte-for-byte and served 1 recovery run(s) cleanly"),
        (
            "promote",
            "promoted tp4_dp2 (launched byte-for-byte from its recorded spec) and served 1 recovery run(s) "
            "cleanly",
        ),
        ("rollback", "restored tp4_dp2 byte-for-byte and served 1 recovery run(s) cleanly"),  # after promote
    ],
)
def test_each_validation_says_how_its_server_was_launched(tmp_path: Path, act: str, reason: str) -> None:
    """The sweep's restore and a rollback restored the retained configuration; a promotion launched a
    candidate that was never the retained one: its validation says so, in its file and on the console."""
    from contracts.files import read_model
    from contracts.results import RecoveryValidation

    if act == "sweep":
        ctx = kept_sweep(tmp_path, FakeSupervisor())
        said = read_model(SweepPaths(ctx.dir).recovery.validation, RecoveryValidation).reason
    else:
        ctx, sup, out = promoted(tmp_path)
        (file,) = ctx.dir.glob("promotions/*/launch/validation.json")
        said = read_model(file, RecoveryValidation).reason
        assert f"\n  {said}\n" in out
        if act == "rollback":
            sup.alive.clear()
            said = rollback(ctx.dir, ctx.seams, out=io.StringIO()).reason
    assert said == reason


def _promoted_ok(ctx: SweepContext, sup: FakeSupervisor) -> None:
    assert promote(ctx.dir, "tp4_dp2", ctx.seams, out=io.StringIO()) == 0


def _promotion_fails(ctx: SweepContext, sup: FakeSupervisor) -> None:
    with pytest.raises(PromotionError) as failed:
        promote(ctx.dir, "tp4_dp2", fake_seams(sup, did_not_start(sup)))
    assert "the sweep's report says so: " in str(failed.value.hint)


def _promotion_interrupted(ctx: SweepContext, sup: FakeSupervisor) -> None:
    def hook(candidate: str, profile: str, repeat: int) -> None:
        if candidate == "tp4_dp2" and profile == "decode_heavy":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        promote(ctx.dir, "tp4_dp2", fake_seams(sup, FakeLoad(before=hook)))


@pytest.mark.parametrize(
    ("act", "says", "baseline"),
    [
        (_promoted_ok, "- live: tp4_dp2 (promoted ", "replaced by tp4_dp2 (promoted)"),
        (
            _promotion_fails,
            "- the promotion of tp4_dp2 failed (",
            "recommended: tp4_dp2",
        ),
        (
            _promotion_interrupted,
            "stopped before its validation (interrupted or an error)); the previous configuration baseline "
            "was restored, validation PASSED",
            "recommended: tp4_dp2",
        ),
    ],
    ids=["promoted", "failed", "interrupted"],
)
def test_promote_renders_the_sweeps_report_again_from_the_records(
    tmp_path: Path, act: Callable[[SweepContext, FakeSupervisor], None], says: str, baseline: str
) -> None:
    """The report the sweep rendered before the promotion said the KEEP was not live; after ``promote``
    (done, failed or Ctrl-C) report.md, report.html and ``report`` say what the promotion left live."""
    from report import write_report

    sup = FakeSupervisor()
    ctx = kept_sweep(tmp_path, sup)
    write_report(ctx.dir)  # as the sweep's end rendered it
    act(ctx, sup)
    paths = SweepPaths(ctx.dir)
    text = paths.report_md.read_text().replace("**", "")
    assert says in text, text.split("## Retained configuration")[-1][:2000]
    row = next(line for line in text.splitlines() if line.startswith("| baseline "))
    assert f"| {baseline} " in row, row
    page = html.unescape(paths.report_html.read_text()).replace("<code>", "").replace("</code>", "")
    assert says.removeprefix("- ") in page
    assert (baseline == "recommended: tp4_dp2") == ("not live" in text)
