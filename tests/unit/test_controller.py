"""The sweep behind ``python -m orchestrator -m ...``: Hydra in-process with gauntlet's sweeper, fake servers
and load (named to the sweeper by ``hydra.sweeper.seams``, as a user would name any Hydra target)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from contracts.errors import GauntletError
from orchestrator.app import entry
from orchestrator.ledger.events import SweepFinished
from orchestrator.ledger.journal import Journal
from orchestrator.servers.seams import Seams
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

SMALL = ["run.repeats=1", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]


#: The fakes of the sweep in progress (a test runs one sweep at a time); read by :func:`current_seams`.
_FAKES: list[tuple[FakeSupervisor, FakeLoad, list[str]]] = []
SEAMS = f"hydra.sweeper.seams={__name__}.current_seams"


def current_seams() -> Seams:
    sup, load, messages = _FAKES[-1]
    return fake_seams(sup, load, messages)


def run_sweep(
    tmp_path: Path,
    sup: FakeSupervisor,
    *overrides: str,
    load: FakeLoad | None = None,
    candidates: str = "tp4_dp2",
) -> tuple[int, list[str], Path]:
    messages: list[str] = []
    _FAKES.append((sup, load or FakeLoad(), messages))
    try:
        code = entry.main(
            ["-m", f"candidate={candidates}", f"run.sweeps_dir={tmp_path}", SEAMS, *SMALL, *overrides]
        )
    finally:
        _FAKES.pop()
    return code, messages, (tmp_path / "latest").resolve()


@pytest.mark.parametrize(
    ("interleave", "launches"),
    [
        # ABA: the opening baseline, the candidate, the baseline's block after it, the restore.
        ("true", ["baseline", "tp4_dp2", "baseline", "baseline"]),
        ("false", ["baseline", "tp4_dp2", "baseline"]),
    ],
)
def test_a_stop_sweep_ends_with_nothing_running_and_says_so(
    tmp_path: Path, interleave: str, launches: list[str]
) -> None:
    sup = FakeSupervisor()
    code, messages, sweep = run_sweep(
        tmp_path, sup, "run.retained_after_sweep=stop", f"run.interleave={interleave}"
    )
    assert code == 0
    assert sup.started == launches
    assert (sweep / "candidates/baseline/blocks/after-tp4_dp2/run.json").exists() == (interleave == "true")
    assert sup.alive == {}
    assert messages[-1] == "retained server stopped (run.retained_after_sweep=stop): nothing left running"
    finished = [e for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, SweepFinished)]
    assert [(e.validated, e.retained) for e in finished] == [(True, "stopped")]


def test_a_keep_sweep_ends_naming_the_live_retained_server(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    code, messages, sweep = run_sweep(tmp_path, sup)
    assert code == 0
    (pid,) = sup.alive
    assert messages[-1].startswith(f"retained server live: pid {pid} at http://127.0.0.1:8000 (fingerprint ")
    assert messages[-1].endswith(f"`make stop SWEEP={sweep}` or `python -m orchestrator stop {sweep}`")


def test_ctrl_c_in_a_job_restores_then_says_what_runs(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def interrupt(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            raise KeyboardInterrupt

    code, messages, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=interrupt))
    assert code == 130
    state = Journal(sweep / "journal.jsonl").replay()
    (live,) = state.live.values()
    assert live.role == "retained" and list(sup.alive) == [live.pid]
    assert state.last_event == "sweep_finished"
    assert messages[-1].startswith(f"retained server live: pid {live.pid}")


def test_a_baseline_that_does_not_start_fails_the_sweep_with_its_exit_code(tmp_path: Path) -> None:
    from contracts.errors import StartupFailure

    failure = StartupFailure("exited", kind="bad-args", exit_code=2, matched_line="error: --x")
    sup = FakeSupervisor(failures={"baseline": failure})
    code, messages, _ = run_sweep(tmp_path, sup)
    assert code == GauntletError.exit_code
    assert not any(m.startswith("tp4_dp2:") for m in messages)  # the jobs did not run
    assert messages[-1] == "nothing gauntlet started for this sweep is running"


def test_a_job_launched_by_another_sweeper_refuses_to_run() -> None:
    """Only gauntlet's sweeper opens a sweep (baseline, restore); Hydra's basic one would skip both."""
    from omegaconf import OmegaConf

    with pytest.raises(GauntletError, match="another Hydra sweeper"):
        entry.job(OmegaConf.create({}))


def test_each_job_is_composed_exactly_once_per_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra's config loader composes each job once (the sweeper's validation); the launcher gets a copy."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    composed: list[tuple[str, ...]] = []
    real = ConfigLoaderImpl.load_sweep_config

    def spy(self: ConfigLoaderImpl, master_config: object, sweep_overrides: list[str]) -> object:
        composed.append(tuple(o for o in sweep_overrides if o.startswith("candidate=")))
        return real(self, master_config, sweep_overrides)  # type: ignore[arg-type]

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", spy)
    sup = FakeSupervisor()
    code, _, _ = run_sweep(tmp_path, sup, "run.interleave=false", candidates="tp4_dp2,eplb")
    assert code == 0
    assert sorted(composed) == [("candidate=eplb",), ("candidate=tp4_dp2",)]
    assert sup.started == ["baseline", "tp4_dp2", "eplb", "baseline"]


def test_a_candidate_edited_after_the_sweep_opened_runs_as_validated(tmp_path: Path) -> None:
    """The typed config is frozen at validation: a YAML edit during the sweep changes nothing planned."""
    conf = tmp_path / "conf" / "candidate"
    conf.mkdir(parents=True)
    edited = conf / "late.yaml"
    edited.write_text("defaults:\n  - baseline\n  - _self_\nname: late\nmax_num_seqs: 64\n")
    sup = FakeSupervisor()
    specs: list[str] = []

    def edit(name: str, profile: str, repeat: int) -> None:
        if name == "baseline" and not specs:
            edited.write_text("defaults:\n  - baseline\n  - _self_\nname: late\nmax_num_seqs: 1\n")
            specs.append("edited")

    code, _, sweep = run_sweep(
        tmp_path,
        sup,
        "run.interleave=false",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        candidates="late",
        load=FakeLoad(before=edit),
    )
    assert code == 0 and specs == ["edited"]
    spec = (sweep / "candidates/late/spec.json").read_text()
    assert '"--max-num-seqs", "64"' in spec.replace("\n", "").replace(" ", "").replace('","', '", "')


def test_a_baseline_edited_after_the_sweep_opened_is_measured_as_planned_in_every_block(
    tmp_path: Path,
) -> None:
    """The baseline's YAML edited mid-sweep: the interleaved block after the candidate and the restore run
    the fingerprint recorded at the opening (the drift check compares like with like)."""
    import json

    from contracts.layout import SPEC_FILE, block_dir

    conf = tmp_path / "conf" / "candidate"
    conf.mkdir(parents=True)
    edited = conf / "base2.yaml"
    edited.write_text("defaults:\n  - baseline\n  - _self_\nname: base2\nmax_num_seqs: 64\n")
    sup = FakeSupervisor()
    done: list[str] = []

    def edit(name: str, profile: str, repeat: int) -> None:
        if name == "base2" and not done:  # the opening baseline is under load: the candidate is next
            edited.write_text("defaults:\n  - baseline\n  - _self_\nname: base2\nmax_num_seqs: 1\n")
            done.append("edited")

    code, _, sweep = run_sweep(
        tmp_path,
        sup,
        "candidate@baseline=base2",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        candidates="tp4_dp2",
        load=FakeLoad(before=edit),
    )
    assert code == 0 and done == ["edited"]
    assert sup.started == ["base2", "tp4_dp2", "base2", "base2"]  # opening, block, restore
    state = Journal(sweep / "journal.jsonl").replay()
    opening = json.loads((sweep / "candidates/base2" / SPEC_FILE).read_text())
    block = json.loads((block_dir(sweep, "base2", "tp4_dp2") / SPEC_FILE).read_text())
    assert opening["fingerprint"] == block["fingerprint"] == state.retained_fingerprint
    assert "64" in block["argv"][block["argv"].index("--max-num-seqs") + 1]


def test_an_unexpected_exception_keeps_its_type_and_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug reaches the user as its type and message, with the traceback saved (not `str(exc)` alone).
    (A bug inside the load runner is the harness's: that candidate is incomplete, docs/gates.md.)"""
    from orchestrator.app import controller

    sup = FakeSupervisor()

    def bug(*args: object, **kwargs: object) -> None:
        missing: dict[str, int] | None = None
        missing["x"]  # type: ignore[index]

    monkeypatch.setattr(controller, "measure_block", bug)
    code, messages, sweep = run_sweep(tmp_path, sup)
    err = capsys.readouterr().err
    assert code == 1
    assert "unexpected TypeError: 'NoneType' object is not subscriptable" in err
    log = sweep / "gauntlet-error.log"
    assert f"traceback in {log}" in err
    assert "Traceback (most recent call last)" in log.read_text() and "in bug" in log.read_text()
    assert messages[-1].startswith("retained server live: pid ")  # restored all the same


def test_sigint_interrupts_the_sweep_even_when_the_parent_ignored_it(tmp_path: Path) -> None:
    """A sweep started with `&` from a script inherits SIGINT ignored; Ctrl-C must still restore."""
    sup = FakeSupervisor()

    def interrupt(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, messages, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=interrupt))
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # put back when the sweep ended
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130
    assert Journal(sweep / "journal.jsonl").replay().last_event == "sweep_finished"
    assert messages[-1].startswith("retained server live: pid ")


def test_a_baseline_that_failed_to_start_is_not_launched_again_by_the_restore(tmp_path: Path) -> None:
    from contracts.errors import StartupFailure
    from contracts.files import read_model
    from contracts.results import RecoveryValidation

    failure = StartupFailure("exited", kind="out-of-memory", exit_code=1, matched_line="CUDA out of memory")
    sup = FakeSupervisor(failures={"baseline": failure})
    code, messages, sweep = run_sweep(tmp_path, sup)
    assert code == GauntletError.exit_code
    assert sup.started == ["baseline"]  # once: the restore relaunched nothing
    said = [m for m in messages if "failed to start in this sweep" in m]
    assert len(said) == 1 and "out-of-memory: CUDA out of memory" in said[0], messages
    assert not any(m.startswith("restoring the retained configuration") for m in messages)
    validation = read_model(sweep / "recovery" / "validation.json", RecoveryValidation)
    assert not validation.ok and validation.pid is None
    assert messages[-1] == "nothing gauntlet started for this sweep is running"


def _failed(fingerprint: str, kind: str = "timeout") -> object:
    from orchestrator.ledger.events import StartupFailed

    return StartupFailed(candidate="baseline", pid=1, fingerprint=fingerprint, kind=kind)


def _rollback() -> object:
    from orchestrator.ledger.events import RollbackRequested

    return RollbackRequested(live=0)


@pytest.mark.parametrize(
    ("events", "failed"),
    [
        ([], None),
        ([_failed("sha256:a")], "timeout"),
        ([_failed("sha256:b")], None),  # another spec failed, not the retained one
        ([_failed("sha256:a"), _rollback()], None),  # an explicit rollback tries once more
        ([_rollback(), _failed("sha256:a", "bad-args")], "bad-args"),
    ],
)
def test_a_failed_start_of_the_retained_spec_is_found_in_the_journal(
    events: list[object], failed: str | None
) -> None:
    from orchestrator.recovery.restore import failed_start

    found = failed_start(events, "sha256:a")  # type: ignore[arg-type]
    assert (found.kind if found is not None else None) == failed


@pytest.mark.parametrize(
    ("promote_keep", "live", "last", "report"),
    [
        # The baseline is restored and stays live; the last line says what is recommended, how to adopt it.
        (
            "false",
            "baseline",
            "recommended: tp4_dp2 (KEEP), not serving: `python -m orchestrator promote ",
            ["| recommended: tp4_dp2 ", "recommended: tp4_dp2 (", "not live"],
        ),
        # run.promote_keep: the KEEP is promoted at the sweep's end, by the path `promote` takes; the report
        # is rendered after the promotion, so that it says the same as the last lines.
        (
            "true",
            "tp4_dp2",
            "promoted: tp4_dp2 (KEEP) is the retained configuration; the next sweep's baseline: ",
            ["| replaced by tp4_dp2 (promoted) ", "- live: tp4_dp2 (promoted ", "validation PASSED)"],
        ),
    ],
)
def test_a_sweep_with_a_keep_says_what_is_live_and_what_is_recommended(
    tmp_path: Path, promote_keep: str, live: str, last: str, report: list[str]
) -> None:
    sup = FakeSupervisor()
    faster = FakeLoad(speed={"tp4_dp2": 2.0})  # half the latency, twice the output: the gates keep it
    code, messages, sweep = run_sweep(
        tmp_path, sup, "run.repeats=3", f"run.promote_keep={promote_keep}", load=faster
    )
    assert code == 0, messages[-5:]
    (server,) = sup.alive.values()
    assert server.spec.candidate == live
    state = Journal(sweep / "journal.jsonl").replay()
    assert (state.retained_candidate, state.retained_fingerprint) == (live, server.spec.fingerprint)
    assert messages[-2].startswith(f"retained server live: pid {server.pid} at ")
    assert f"configuration {live};" in messages[-2]
    assert messages[-1].startswith(last), messages[-1]
    finished = [e for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, SweepFinished)]
    assert [(e.validated, e.retained) for e in finished] == [(True, "kept")]
    text = (sweep / "report.md").read_text().replace("**", "")
    for said in report:
        assert said in text, text.split("## Retained configuration")[-1][:2000]
    assert ("not live" in text) == (live == "baseline")
