"""Sweeps on a real SLURM cluster: this machine's, nodes n1 and n2 (``scripts/slurm-local.sh start
--nodes 2``, as CI starts it; the sweeps also run on the single-node one of a plain ``start``).

Candidates run as real SLURM jobs (``sbatch`` job arrays through Hydra's submitit plugin, ``hydra/launcher=
gauntlet_slurm``), each on a simulated node of its own (``run.simulated_nodes``: one real node here).
``stop`` cancels them through SLURM (``scancel``); SLURM signals each job, whose handler tears its server
down. Skipped when no cluster is up, unless ``GAUNTLET_REQUIRE_SLURM=1`` (CI), which makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.layout import SweepPaths
from contracts.results import CandidateRun
from contracts.trials import read_search
from orchestrator.ledger.events import Started
from orchestrator.ledger.journal import Journal
from orchestrator.servers.scheduler import sweep_job_ids
from tests.integration.sweep_helpers import (
    ROOT,
    assert_finished_capacity_open,
    kill_servers,
    run_cli,
    run_sweep,
    sim_servers,
    start,
    sweep_dir,
    wait_for,
)
from tests.integration.test_search_storage import FAST as SEARCH_FAST
from tests.ports import free_port
from tests.slurm_cluster import left_on_nodes

pytest.importorskip(
    "hydra_plugins.hydra_submitit_launcher", reason="the .[slurm] extra (make setup installs it)"
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.slurm]

#: The local cluster's node has no GPUs and 2 CPUs: what `make demo-slurm` passes (Makefile, SLURM_DEMO).
ON_THIS_CLUSTER = [
    "hydra/launcher=gauntlet_slurm",
    "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
]


def _cluster_is_up() -> str | None:
    """None when the cluster answers and its node takes jobs; else why not."""
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo: {exc}"
    states = done.stdout.split()
    if done.returncode != 0 or not any(s in ("idle", "mixed", "allocated") for s in states):
        return f"sinfo says {done.stdout.strip() or done.stderr.strip() or done.returncode}"
    return None


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    why = _cluster_is_up()
    if why is None:
        return
    message = f"no SLURM cluster is up ({why}); start one: `scripts/slurm-local.sh start --nodes 2` (root)"
    if os.environ.get("GAUNTLET_REQUIRE_SLURM") == "1":
        pytest.fail(f"GAUNTLET_REQUIRE_SLURM=1: {message}")
    pytest.skip(message)


@pytest.fixture
def cluster_port() -> Iterator[int]:
    """A port with the next two free as well (the serving host, then one per simulated node)."""
    base = free_port(span=3)  # below the ephemeral range, its two neighbours free too
    yield base
    for k in range(3):
        kill_servers(base + k)


def queued(job_ids: set[str]) -> set[str]:
    """Which of ``job_ids`` SLURM still lists (pending, running or completing)."""
    done = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=20, check=True
    )
    return job_ids & set(done.stdout.split())


def job_ids(sweep: Path) -> set[str]:
    """The sweep's SLURM job ids as submitit names them (ARRAY_TASK; a lone job: its plain id)."""
    return set(sweep_job_ids(sweep))


@contextmanager
def sweep_process(args: list[str], *, sweeps: Path, port: int) -> Iterator[subprocess.Popen[str]]:
    """A sweep started in the background; interrupted (it restores, stops what it started) if the test fails
    while it still runs, and its jobs cancelled, so a failing test leaves nothing queued or serving."""
    proc = start(args, sweeps=sweeps, port=port)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=240)
            for job in job_ids(sweep_dir(sweeps)):
                subprocess.run(["scancel", job], check=False, timeout=20)


def test_stop_cancels_running_slurm_jobs_and_their_servers_are_torn_down(
    slurm_cluster: None, tmp_path: Path, cluster_port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    args = [
        "-m",
        "candidate=tp4_dp2,twin",
        *ON_THIS_CLUSTER,
        "run.simulated_nodes=2",
        "host.time_scale=2",  # slow enough to be stopped under load
        "run.retained_after_sweep=stop",  # the restore that follows a failed job leaves nothing up
    ]
    with sweep_process(args, sweeps=sweeps, port=cluster_port) as proc:
        sweep = sweep_dir(sweeps)
        journals = sweep / "journals"

        def under_load() -> bool:
            return any(
                e.name == "load_started" for j in journals.glob("*.jsonl") for e in Journal(j).events()
            )

        wait_for(under_load, timeout=180, what="a SLURM job under load")
        jobs = job_ids(sweep)
        assert len(jobs) == 2 and queued(jobs) == jobs, (jobs, queued(jobs))
        servers = [
            e.pid for j in journals.glob("*.jsonl") for e in Journal(j).events() if isinstance(e, Started)
        ]
        assert servers, "a job under load has a server"

        stopped = run_cli(["stop", str(sweep)])
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert stopped.stderr.count("cancelled (scancel)") == 2, stopped.stderr
        wait_for(lambda: not queued(jobs), timeout=60, what=f"jobs {sorted(jobs)} gone from squeue")
        # The launching process sees the cancelled jobs end without accounting (no sacct here) and returns.
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode != 0, out  # its jobs were cancelled: the sweep did not complete
        for journal in sorted(journals.glob("*.jsonl")):
            events = Journal(journal).events()
            said = f"{journal.name}: {[(e.at[11:23], e.name) for e in events]}\nstop said: {stopped.stderr}"
            assert events[-1].name == "job_finished", said
            # SLURM's SIGTERM, or the sweep's stopped marker if the job reached a checkpoint first
            assert getattr(events[-1], "outcome", "").startswith("interrupted: "), said
            starts = {e.pid for e in events if isinstance(e, Started)}
            downs = {getattr(e, "pid", None) for e in events if e.name == "torn_down"}
            assert starts <= downs, said  # each job tore its own server down, on its node
        # the recorded pids are their nodes' (each node of the local cluster has a PID namespace of its own):
        # each node's agent says whether anything of the servers is left there
        assert [left for k in range(3) for left in left_on_nodes(cluster_port + k)] == []
        assert all(not sim_servers(cluster_port + k) for k in range(3))
        # SLURM's own word on each job, in the sweep's last lines.
        for job in jobs:
            assert re.search(rf"job {job}\s+\S+\s+sim-node-\d\s+CANCELLED\s+\(job completion log", out), out[
                -3000:
            ]


def test_demo_slurm_gives_the_case_studys_verdicts_and_leaves_nothing_running(
    slurm_cluster: None, tmp_path: Path, cluster_port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    overrides = f"service.port={cluster_port} run.sweeps_dir={sweeps}"
    done = subprocess.run(  # the Makefile's target as a user runs it, with this interpreter as its PY
        ["make", "-o", sys.executable, "demo-slurm", f"PY={sys.executable}", f"OVERRIDES={overrides}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    sweep = sweep_dir(sweeps)
    verdicts = json.loads((sweep / "verdicts.json").read_text())
    decisions = {v["candidate"]: v["decision"] for v in verdicts["verdicts"]}
    assert decisions == {
        "eplb": "incompatible",
        "mega_moe": "incompatible",
        "spec_probabilistic": "reject",
        "tp4_dp2": "reject",
    }, decisions
    jobs = job_ids(sweep)
    assert len(jobs) == 5, jobs
    # The jobs ran the launching interpreter (the project's environment) through srun.
    (script,) = (sweep / ".submitit").glob("*/*_submission.sh")
    assert (
        "srun --unbuffered" in script.read_text()
        and f" {sys.executable} -u -m submitit" in script.read_text()
    )
    for job in jobs:  # each job's SLURM id and final state as SLURM reports it
        assert re.search(rf"job {job}\s+\S+\s+sim-node-\d\s+COMPLETED\s+\(job completion log", out), out[
            -3000:
        ]
    assert not queued(jobs)
    assert all(not sim_servers(cluster_port + k) for k in range(3))
    assert "nothing left running" in out


def test_a_requeued_job_tears_its_server_down_and_resumes(
    slurm_cluster: None, tmp_path: Path, cluster_port: int
) -> None:
    """What SLURM does on preemption (PreemptMode=REQUEUE) and on a node failure of a batch job: SIGTERM,
    then the job queued again under the same id. ``scontrol requeue`` does exactly that on a running job."""
    sweeps = tmp_path / "sweeps"
    args = [
        "-m",
        "candidate=tp4_dp2",
        *ON_THIS_CLUSTER,
        "run.simulated_nodes=1",
        "host.time_scale=2",
        "run.retained_after_sweep=stop",
    ]
    with sweep_process(args, sweeps=sweeps, port=cluster_port) as proc:
        sweep = sweep_dir(sweeps)
        journals = sweep / "journals"

        def under_load() -> bool:
            return any(
                e.name == "load_started" for j in journals.glob("*.jsonl") for e in Journal(j).events()
            )

        wait_for(under_load, timeout=180, what="the SLURM job under load")
        (job,) = job_ids(sweep)
        subprocess.run(["scontrol", "requeue", job], check=True, timeout=20)
        out, _ = proc.communicate(
            timeout=400
        )  # requeued jobs wait cred_expire (30 s here) before they restart
        assert proc.returncode == 0, out[-5000:]
        (journal,) = journals.glob("*.jsonl")  # the same job id: the requeued job continues its journal
        events = Journal(journal).events()
        outcomes = [getattr(e, "outcome", "") for e in events if e.name == "job_finished"]
        assert len(outcomes) == 2 and outcomes[0].startswith("interrupted: "), outcomes
        assert outcomes[1].startswith("measured"), outcomes
        first_end = next(i for i, e in enumerate(events) if e.name == "job_finished")
        started = {e.pid for e in events[:first_end] if isinstance(e, Started)}
        down = {getattr(e, "pid", None) for e in events[:first_end] if e.name == "torn_down"}
        assert started and started <= down  # torn down before SLURM queued it again
        verdicts = json.loads((sweep / "verdicts.json").read_text())
        assert {v["candidate"]: v["decision"] for v in verdicts["verdicts"]} == {"tp4_dp2": "reject"}
        assert re.search(rf"job {job}\s+tp4_dp2\s+sim-node-0\s+COMPLETED", out), out[-3000:]
        assert all(not sim_servers(cluster_port + k) for k in range(2))


def cluster_nodes() -> list[str]:
    """The cluster's node names, as sinfo lists them."""
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=20, check=True
    )
    return sorted(set(done.stdout.split()))


def test_a_two_node_job_gets_two_nodes_of_the_local_cluster(slurm_cluster: None) -> None:
    """``scripts/slurm-local.sh start --nodes 2``: two slurmd daemons on this machine, so a job of 2 nodes
    gets n1 and n2 from SLURM, one task on each."""
    nodes = cluster_nodes()
    if nodes != ["n1", "n2"]:
        message = f"the cluster's nodes are {nodes}; start it with `scripts/slurm-local.sh start --nodes 2`"
        if os.environ.get("GAUNTLET_REQUIRE_SLURM") == "1":
            pytest.fail(f"GAUNTLET_REQUIRE_SLURM=1: {message}")
        pytest.skip(message)
    step = "echo $SLURMD_NODENAME $SLURM_NODEID $SLURM_JOB_NODELIST $(hostname)"
    done = subprocess.run(
        ["srun", "--nodes=2", "--ntasks-per-node=1", "--job-name=gauntlet-two-nodes", "bash", "-c", step],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    here = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    tasks = sorted(line.split() for line in done.stdout.splitlines())
    assert tasks == [["n1", "0", "n[1-2]", here], ["n2", "1", "n[1-2]", here]], done.stdout


def test_a_search_runs_its_trials_as_parallel_slurm_jobs_each_paired_with_its_nodes_baseline(
    slurm_cluster: None, tmp_path: Path, cluster_port: int, postgres_url: str
) -> None:
    """``search.parallel=2`` on ``hydra/launcher=gauntlet_slurm`` (issue 34, item 6): one batch of two trials
    goes out as one SLURM job array, each job on a simulated node of its own measuring that node's baseline
    first; the winner's confirmation is a SLURM job too; nothing is left queued or serving. The study is a
    PostgreSQL database, as a sweep whose trials run on other nodes requires (SQLite is refused there)."""
    sweeps = tmp_path / "sweeps"
    args = [
        *SEARCH_FAST,
        *ON_THIS_CLUSTER,
        f"search.storage={postgres_url}",
        "search.parallel=2",
        # two trials, their two nodes' baselines (charged with them), three launches kept for the
        # confirmation (its own, the baseline's block after it, its node's baseline should it need one)
        "search.max_launches=7",
        "search.confirm_top=1",
        "run.simulated_nodes=2",
        "run.retained_after_sweep=stop",
    ]
    code, out, sweep = run_sweep(args, sweeps=sweeps, port=cluster_port, timeout=400)
    assert_finished_capacity_open(code, out, sweep)  # its two capacity levels bracket nothing
    record = read_search(sweep)
    assert record is not None, out[-3000:]
    # a trial measured fully, or refused at its screen against its node's baseline (noise can put a point
    # of this small space beyond a limit there): either is a ruling; a fully measured one is confirmed
    complete = [t for t in record.trials if t.state == "complete"]
    confirmations = 1 if complete else 0
    # the first batch's 2 trials and 2 node baselines, then the confirmation as launched; once both nodes'
    # baselines are measured the confirmation needs one launch less, which may go to one more trial
    spent = sum(t.launches + t.baseline_launches for t in record.trials)
    assert record.launches == spent + record.confirm_launches <= 7, out[-3000:]
    assert (record.confirm_launches > 0) == bool(complete), out[-3000:]
    paths = SweepPaths(sweep)
    nodes = []
    for trial in record.trials:
        assert trial.state in ("complete", "infeasible"), (trial.name, trial.state, trial.why)
        if trial.same_as is not None:  # a point asked again: the earlier trial's result, no job, no run
            assert trial.launches == 0 and trial.why.startswith(f"same point as trial {trial.same_as}")
            continue
        run = read_model(paths.trial(trial.name).run_file, CandidateRun)
        assert run.node is not None and run.paired_baseline == f"baseline@{run.node}", run
        nodes.append(run.node)
    assert sorted(nodes[:2]) == ["sim-node-0", "sim-node-1"]  # the first batch: one trial per node
    jobs = job_ids(sweep)
    launched = [t for t in record.trials if t.launches]
    # a job per trial (the batch's two: one array), then the confirmation's
    assert len(jobs) == len(launched) + confirmations, jobs
    for trial in launched:  # each launched trial's SLURM id and final state as SLURM reports it
        assert re.search(rf"job \S+\s+{trial.name}\s+sim-node-\d\s+COMPLETED", out), out[-3000:]
    if complete:
        assert record.winner is not None and record.confirmation is not None
        assert f"search: confirmed {record.winner.name} (1 of 1): " in out
    assert not queued(jobs)
    assert all(not sim_servers(cluster_port + k) for k in range(3))
