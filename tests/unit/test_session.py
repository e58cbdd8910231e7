"""Server sessions, ``stop`` and the sweep's last lines, with fake seams: journal first, then act."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import StartupFailure
from orchestrator.ledger.journal import Journal
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.recovery.restore import effective_config_checks, expected_cache_config, restore
from orchestrator.recovery.rollback import rollback
from orchestrator.recovery.status import what_runs
from orchestrator.recovery.stop import stop
from orchestrator.servers.context import SweepContext
from orchestrator.servers.session import Servers
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, server_transport

OVERRIDES = ["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[decode_heavy]"]


def sweep(tmp_path: Path, sup: FakeSupervisor, *extra: str) -> tuple[SweepContext, list[str]]:
    cfg, _ = load([*OVERRIDES, *extra])
    messages: list[str] = []
    return SweepContext.open(cfg, tmp_path / "sweep", fake_seams(sup, FakeLoad(), messages)), messages


def restored_sweep(tmp_path: Path, sup: FakeSupervisor) -> SweepContext:
    """A sweep that measured its baseline and restored it: one retained server runs."""
    ctx, _ = sweep(tmp_path, sup)
    begin(ctx)
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    assert restore(ctx, reason="sweep completed").ok
    return ctx


def names(journal: Journal) -> list[str]:
    return [e.name for e in journal.events()]


def with_spec_file(ctx: SweepContext, name: str = "baseline") -> Servers:
    """The sweep's servers, with the baseline's spec written where the journal will point."""
    spec = ctx.render(ctx.cfg.baseline)
    spec_file = ctx.dir / f"{name}.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.to_json())
    return ctx.servers


def test_a_session_journals_each_step_and_tears_down_when_it_ends(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx, _ = sweep(tmp_path, sup)
    servers = with_spec_file(ctx)
    spec = ctx.render(ctx.cfg.baseline)
    with servers.launch(spec, ctx.dir / "baseline.json", ctx.dir / "log", role="baseline") as session:
        assert session.ready and session.startup.ok and list(sup.alive) == [session.pid]
        with session.watching() as watch:
            assert not watch.stop.is_set()
    assert sup.alive == {} and not session.ready
    assert session.teardown_record is not None and session.teardown_record.port_free
    assert names(ctx.journal) == ["launching", "started", "ready", "tearing_down", "torn_down"]
    assert servers.touched and ctx.journal.replay().live == {}


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_session_tears_down_on_an_exception_and_lets_it_through(
    tmp_path: Path, error: type[BaseException]
) -> None:
    sup = FakeSupervisor()
    ctx, _ = sweep(tmp_path, sup)
    spec = ctx.render(ctx.cfg.baseline)
    with (
        pytest.raises(error),
        with_spec_file(ctx).launch(spec, ctx.dir / "baseline.json", ctx.dir / "log", role="baseline"),
    ):
        raise error
    assert sup.alive == {}
    assert names(ctx.journal)[-2:] == ["tearing_down", "torn_down"]


def test_a_kept_session_leaves_its_server_running_and_a_failed_start_is_a_record(tmp_path: Path) -> None:
    failure = StartupFailure("exited", kind="bad-args", exit_code=2, matched_line="error: --x")
    sup = FakeSupervisor(failures={"tp4_dp2": failure})
    ctx, _ = sweep(tmp_path, sup)
    servers = with_spec_file(ctx)
    spec = ctx.render(ctx.cfg.baseline)
    with servers.launch(spec, ctx.dir / "baseline.json", ctx.dir / "log", role="retained") as kept:
        kept.keep()
    assert list(sup.alive) == [kept.pid]
    tp4 = ctx.render(load([*OVERRIDES, "candidate=tp4_dp2"])[0].candidate)
    with servers.launch(tp4, ctx.dir / "baseline.json", ctx.dir / "log", role="candidate") as failed:
        assert not failed.ready
    assert (failed.startup.ok, failed.startup.kind, failed.startup.matched_line) == (
        False,
        "bad-args",
        "error: --x",
    )
    assert names(ctx.journal)[-3:] == ["launching", "started", "startup_failed"]
    assert list(ctx.journal.replay().live) == [kept.pid]


def test_stop_ends_what_the_journal_recorded_without_restoring_and_twice_is_a_no_op(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (retained,) = ctx.journal.replay().live.values()
    stranger = sup.start(ctx.render(ctx.cfg.baseline), tmp_path / "other.log")  # not in the journal
    first, second = io.StringIO(), io.StringIO()
    assert stop(ctx.dir, ctx.seams, out=first) == 1
    assert list(sup.alive) == [stranger.pid]  # only what the journal recorded was stopped
    assert "stopped 1 server(s)" in first.getvalue()
    assert ctx.journal.replay().live == {}
    assert stop(ctx.dir, ctx.seams, out=second) == 0
    assert "nothing to stop" in second.getvalue()
    assert names(ctx.journal)[-6:] == [
        "stop_requested",
        "tearing_down",
        "torn_down",
        "stop_finished",
        "stop_requested",
        "stop_finished",
    ]
    assert not any(e.name == "restoring" for e in ctx.journal.events()[-8:])
    assert retained.pid not in sup.alive


def test_stop_checks_the_start_time_like_rollback(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (retained,) = ctx.journal.replay().live.values()
    # The pid was reused by another process started at another time: it is not ours.
    impostor = sup.alive.pop(retained.pid)
    sup.alive[retained.pid] = replace(impostor, create_time=impostor.create_time + 5)
    assert stop(ctx.dir, ctx.seams, out=io.StringIO()) == 0
    assert retained.pid in sup.alive
    assert "vanished" in names(ctx.journal)


def test_rollback_after_stop_restores_the_retained_configuration(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    stop(ctx.dir, ctx.seams, out=io.StringIO())
    assert sup.alive == {}
    (ctx.dir / "config.yaml").write_text(_config_yaml(ctx))
    out = io.StringIO()
    result = rollback(ctx.dir, ctx.seams, out=out)
    assert result.ok, result.reason
    assert "rollback OK" in out.getvalue()
    (live,) = ctx.journal.replay().live.values()
    assert live.role == "retained" and list(sup.alive) == [live.pid]


@pytest.mark.parametrize(
    ("edit", "refused"),
    [
        ({}, ""),  # the control: nothing to say
        ({"gates": {"cost": {"tolerance": 0.05}}, "host": {"gpu_hour_price": None}}, "gates.cost.tolerance"),
    ],
)
def test_rollback_acts_on_a_recorded_config_that_a_newer_check_refuses(
    tmp_path: Path, edit: dict[str, dict[str, object]], refused: str
) -> None:
    """A sweep recorded before a check existed (here: a cost bound without a GPU-hour price, refused at
    compose time since issue 42) is rolled back as recorded, the check's finding said, never refused: the
    restore relaunches the fingerprint-checked retained spec, and nothing else stands between the user and
    it."""
    import yaml

    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    stop(ctx.dir, ctx.seams, out=io.StringIO())
    raw = yaml.safe_load(_config_yaml(ctx))
    for section, values in edit.items():
        for key, value in values.items():
            if isinstance(value, dict):
                raw[section][key].update(value)
            else:
                raw[section][key] = value
    (ctx.dir / "config.yaml").write_text(yaml.safe_dump(raw))
    said: list[str] = []
    result = rollback(ctx.dir, replace(ctx.seams, say=said.append), out=io.StringIO())
    assert result.ok, result.reason
    notes = [m for m in said if "no longer passes this version's checks" in m]
    assert bool(notes) == bool(refused), said
    assert all(refused in m and "acting on it as recorded" in m for m in notes)


def _config_yaml(ctx: SweepContext) -> str:
    import dataclasses

    import yaml

    return yaml.safe_dump(dataclasses.asdict(ctx.cfg))


def test_the_last_lines_say_what_runs_where_and_how_to_stop_it(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx, _ = sweep(tmp_path, sup)
    begin(ctx)
    assert what_runs(ctx.dir, ctx.seams) == ["nothing gauntlet started for this sweep is running"]
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    restore(ctx, reason="sweep completed")
    (retained,) = ctx.journal.replay().live.values()
    (line,) = what_runs(ctx.dir, ctx.seams)
    assert line.startswith(f"retained server live: pid {retained.pid} at http://127.0.0.1:8000 ")
    assert f"(fingerprint {retained.fingerprint})" in line
    assert f"`make stop SWEEP={ctx.dir}` or `python -m orchestrator stop {ctx.dir}`" in line
    stop(ctx.dir, ctx.seams, out=io.StringIO())
    assert what_runs(ctx.dir, ctx.seams) == [
        "stopped by the user: nothing gauntlet started for this sweep is running"
    ]


def test_the_last_line_never_calls_a_server_live_that_the_process_table_lacks(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (retained,) = ctx.journal.replay().live.values()
    sup.alive.pop(retained.pid)  # gone without a word in the journal (an error while it was stopped)
    lines = what_runs(ctx.dir, ctx.seams)
    assert not any(" live: " in line for line in lines), lines
    assert lines == [
        f"retained server (pid {retained.pid}) is gone: no such process runs; "
        f"`python -m orchestrator rollback {ctx.dir}` restores it",
        "nothing gauntlet started for this sweep is running",
    ]


def test_a_server_that_runs_but_does_not_answer_is_not_called_live(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (retained,) = ctx.journal.replay().live.values()
    sup.dead.add(retained.pid)  # in the process table, /health unanswered
    (line,) = what_runs(ctx.dir, ctx.seams)
    assert line.startswith(f"retained server alive but NOT answering /health: pid {retained.pid} at ")


def test_a_server_whose_spec_cannot_be_read_is_neither_live_nor_gone(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (retained,) = ctx.journal.replay().live.values()
    Path(retained.spec_file).unlink()  # nothing says which process it would be
    (line,) = what_runs(ctx.dir, ctx.seams)
    assert line.startswith(f"retained server (pid {retained.pid}): whether it runs is unknown ("), line


def test_a_deleted_sweep_directory_is_read_from_the_copy_beside_the_lock(tmp_path: Path) -> None:
    import shutil

    from orchestrator.recovery.status import status

    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    state = ctx.journal.replay()
    (retained,) = state.live.values()
    shutil.rmtree(ctx.dir)  # the restored server still serves
    (line,) = what_runs(ctx.dir, ctx.seams)
    assert line.startswith(f"retained server live: pid {retained.pid} at http://127.0.0.1:8000 ")
    out = io.StringIO()
    code = status(ctx.dir, ctx.seams, out=out)
    text = out.getvalue()
    assert f"retained configuration: {state.retained_fingerprint}" in text, text
    assert f"pid {retained.pid}" in text and "healthy" in text
    assert code == 0, text


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], {"gpu_memory_utilization": "0.81", "cache_dtype": "fp8"}),
        (["candidate@baseline=tp4_dp2"], {"gpu_memory_utilization": "0.81", "cache_dtype": "fp8"}),
        (["baseline.gpu_memory_utilization=0.7"], {"gpu_memory_utilization": "0.7", "cache_dtype": "fp8"}),
        (["baseline.kv_cache_dtype=fp8_e5m2"], {"gpu_memory_utilization": "0.81", "cache_dtype": "fp8_e5m2"}),
    ],
)
def test_the_effective_config_is_checked_against_the_typed_values(
    overrides: list[str], expected: dict[str, str]
) -> None:
    cfg, _ = load(overrides)
    assert expected_cache_config(cfg.service, cfg.baseline) == expected


@pytest.mark.parametrize(
    ("gmu", "dtype", "failed"),
    [
        ("0.81", "fp8", []),
        ("0.810", "fp8", []),
        ("0.9", "fp8", ["cache_config_info.gpu_memory_utilization"]),
        ("0.81", "auto", ["cache_config_info.cache_dtype"]),
    ],
)
def test_effective_config_checks_table(gmu: str, dtype: str, failed: list[str]) -> None:
    cfg, _ = load([])
    spec = SweepContext.open(cfg, Path("unused"), fake_seams(FakeSupervisor(), FakeLoad())).render(
        cfg.baseline
    )
    checks = effective_config_checks(
        spec,
        spec.fingerprint,
        expected_cache_config(cfg.service, cfg.baseline),
        transport=server_transport(gmu=gmu, dtype=dtype),
    )
    assert [c.name for c in checks if not c.ok] == failed
    assert {c.name for c in checks} >= {"fingerprint", "max_model_len"}
