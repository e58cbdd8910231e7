"""A candidate whose server died under load: the sweep's last lines (the terminal's decision table) say so
first, naming the node and whether the head or a follower was lost, not only the concurrency regression
the cut-short runs show (issue 45, item 6: the death was in verdicts.json and report.md only).

The watch events are the watcher's own (:class:`launch.watch.Watcher` on a fake process table), so the
table covers the whole path: the process that ended, the event in ``run.json``, the judge, the report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from contracts.results import WatchEvent
from gates.judge import judge_sweep
from launch.spec import LaunchSpec
from launch.tracking import Server, Tracked, Tracker
from launch.watch import Watcher
from report.build import write_report
from report.lost import lost_lead
from tests.unit.gates_fixtures import BASELINE, SweepBuilder, baseline_like, sweep_config, write_config

pytestmark = pytest.mark.unit


class _Child:
    def __init__(self, code: int | None) -> None:
        self.code = code
        self.pid = 0

    def poll(self) -> int | None:
        return self.code


class _Procs:
    """A process table where every pid the test did not end is alive (info None: gone)."""

    def __init__(self, gone: set[int]) -> None:
        self.gone = gone

    def info(self, pid: int) -> object | None:
        if pid in self.gone:
            return None
        return SimpleNamespace(zombie=False, create_time=1.0, state="sleeping")

    def port_holders(self, port: int) -> list[object]:
        return []


def _events(layout: str, lost: str | None, code: int, tmp_path: Path) -> list[WatchEvent]:
    """What the watcher reports after ``lost`` ("head", "follower", or None) ended with ``code``."""
    spec = cast(LaunchSpec, SimpleNamespace(candidate="tp16", port=8000))
    log = tmp_path / "server.log"
    log.write_text("")
    followers = (
        (Server(spec, 200, 200, 1.0, log, 0.0, node=1, node_name="n2", slurm_job="61"),)
        if layout == "multi"
        else ()
    )
    head = Server(spec, 100, 100, 1.0, log, 0.0, followers=followers, node_name="n1" if followers else "")
    gone = {100} if lost == "head" else {200} if lost == "follower" else set()
    procs = _Procs(gone)
    tracker = Tracker(procs, clock=lambda: 0.0, sleep=lambda _s: None)  # type: ignore[arg-type]
    for process in head.processes:
        tracker.add(process, Tracked(_Child(code if process.pid in gone else None), 0.0, None))
    watcher = Watcher(
        tracker,
        procs,  # type: ignore[arg-type]
        lambda _s, _t: 503,
        clock=lambda: 0.0,
        now=lambda: datetime(2026, 12, 6, tzinfo=UTC),
    )
    return watcher.check(head)


ROWS = [
    # layout, lost process, exit code, what the terminal's row says first (None: nothing of a death)
    ("single", "head", -9, "the server died under load (server pid 100 exited with code -9)"),
    ("multi", "follower", 137, "the server died under load (node 1, n2: follower exited with code 137)"),
    ("multi", "head", 137, "the server died under load (node 0, n1: head exited with code 137)"),
    ("multi", None, 0, None),
]


@pytest.mark.parametrize(("layout", "lost", "code", "said"), ROWS)
def test_the_console_verdict_line_names_the_lost_node(
    tmp_path: Path, layout: str, lost: str | None, code: int, said: str | None
) -> None:
    watch = _events(layout, lost, code, tmp_path)
    assert lost_lead(watch) == said
    sweep = tmp_path / "sweep"
    b = SweepBuilder(sweep)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("tp16", free_gib=[1.0] * 8, watch=watch)
    # its runs cut short by the death: next to no output, as the "output tok/s 0x"
    for profile, fig in BASELINE.items():
        tps = fig["output_tps"] * (0.001 if lost else 1.0)
        b.loaded("tp16", profile, output_tps=tps, prompt_tps=fig["prompt_tps"], ttft=fig["ttft"])
    b.serial("tp16", ttft=0.20, e2e=5.0)
    b.answers("tp16", [12.3, 30.2, 43.95, 61.0, None])
    cfg = sweep_config()
    write_config(sweep, cfg)
    judge_sweep(sweep, cfg)
    line = next(x for x in write_report(sweep, cfg).terminal.splitlines() if x.startswith("| tp16 "))
    cell = line.split("|")[3].strip()
    if said is None:
        assert "died" not in line
        return
    assert "REJECT" in line and cell.startswith(said), line
