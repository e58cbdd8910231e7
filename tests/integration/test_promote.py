"""``promote`` on the simulator (issue 43, item 14): a sweep whose candidate the gates keep ends with the
baseline live and the candidate recommended; ``promote`` makes the candidate the live, validated, retained
configuration (the running server's command line is the candidate's recorded spec); ``rollback`` after it
died restores the promoted candidate, not the baseline. Row of ``docs/reliability.md``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from contracts.layout import SweepPaths
from launch.spec import LaunchSpec
from orchestrator.ledger.journal import Journal
from orchestrator.servers.leftovers import runs
from tests.integration.sweep_helpers import (
    ROOT,
    assert_one_healthy_retained,
    kill_servers,
    run_cli,
    sim_servers,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The baseline on a simulated host four times as fast (a node property the simulator takes as a flag, so
#: the candidate's spec differs): half the latency or less on every profile, a KEEP the gates find at two
#: repeats; at time scale 5 its gain is many times the load client's lag on 2 cores.
FAST = (
    "defaults:\n  - baseline\n  - _self_\nname: fast\ndescription: the baseline, four times as fast "
    "(simulator only)\nsim_args:\n  sim-speed: 4.0\n"
)


def serving(port: int, specs: list[LaunchSpec]) -> str | None:
    """The candidate whose spec the one simulator on ``port`` runs, read from its process's command line
    (None: not exactly one simulator there, or it runs none of ``specs``)."""
    servers = sim_servers(port)
    if len(servers) != 1:
        return None
    cmdline = tuple(servers[0].cmdline())
    return next((spec.candidate for spec in specs if runs(cmdline, spec.argv)), None)


def test_a_kept_candidate_promoted_serves_and_rollback_restores_it(tmp_path: Path, port: int) -> None:
    conf = tmp_path / "conf" / "candidate"
    conf.mkdir(parents=True)
    (conf / "fast.yaml").write_text(FAST)
    sweeps = tmp_path / "sweeps"
    cmd = [
        sys.executable, "-m", "orchestrator", "-m", "candidate=fast", f"run.sweeps_dir={sweeps}",
        f"service.port={port}", "+experiment=sim_small",
        f"hydra.searchpath=[file://tests/integration/conf,file://{tmp_path / 'conf'}]",
        "host.time_scale=5", "workloads.serial.num_requests=4",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout + done.stderr
    sweep = (sweeps / "latest").resolve()
    try:
        paths = SweepPaths(sweep)
        verdict = next(
            v for v in json.loads(paths.verdicts.read_text())["verdicts"] if v["candidate"] == "fast"
        )
        if verdict["decision"] != "keep":  # the gates' word on a loaded machine: nothing to promote then
            pytest.skip(f"the gates gave fast {verdict['decision']} here ({verdict['reason'][:200]})")
        assert done.returncode == 0, out[-3000:]
        # The baseline is what runs; the candidate is recommended, with the command that adopts it. The
        # closing lines wrap at the terminal's width wherever the reason's figures put the break: read them
        # with the wraps undone (the line once broke between "not" and "live").
        closing = " ".join(out.split())
        assert "recommended: fast (" in closing and "not live; restored after the sweep: baseline" in closing
        last = out.strip().splitlines()[-1]
        assert last.startswith(
            f"gauntlet: recommended: fast (KEEP), not serving: `python -m orchestrator promote {sweep} fast`"
        )
        specs = [LaunchSpec.read(paths.candidate(name).spec) for name in ("baseline", "fast")]
        fast = specs[1]
        assert serving(port, specs) == "baseline"
        assert_one_healthy_retained(sweep, port)

        promoted = run_cli(["promote", str(sweep), "fast"], timeout=300)
        assert promoted.returncode == 0, promoted.stdout + promoted.stderr
        assert promoted.stdout.startswith(f"promote OK: fast {fast.fingerprint} pid "), promoted.stdout
        assert serving(port, specs) == "fast"  # the process's command line is the candidate's spec
        state = Journal(sweep / "journal.jsonl").replay()
        assert (state.retained_candidate, state.retained_fingerprint) == ("fast", fast.fingerprint)
        assert_one_healthy_retained(sweep, port)  # status: settled, on the promoted server
        # promote rendered the sweep's report again; `report` reads the same records (promotions/<stamp>/)
        assert "live: **fast** (promoted " in paths.report_md.read_text()
        reported = run_cli(["report", str(sweep)], timeout=120)
        assert reported.returncode == 0, reported.stdout + reported.stderr
        said = " ".join(reported.stdout.split())
        assert "live: fast (promoted " in said and "validation PASSED)" in said, said
        assert "replaced by fast (promoted)" in said and "not live" not in said, said

        kill_servers(port)  # the promoted server dies: rollback restores it, not the baseline
        rolled = run_cli(["rollback", str(sweep)], timeout=300)
        assert rolled.returncode == 0, rolled.stdout + rolled.stderr
        assert f"rollback OK: fast {fast.fingerprint}" in rolled.stdout
        assert serving(port, specs) == "fast"
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        assert_one_healthy_retained(sweep, port)
    finally:
        run_cli(["stop", str(sweep)], timeout=120)
