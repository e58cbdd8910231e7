"""A SLURM job's state as SLURM reports it: squeue while queued, then the job completion log, scontrol."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestrator.servers.scheduler import (
    SlurmState,
    has_accounting,
    job_lines,
    parse_config,
    parse_jobcomp,
    parse_squeue,
    slurm_states,
)

JOBCOMP = (
    "JobId=10 UserId=root(0) Name=hydra_app JobState=CANCELLED Partition=local NodeList=vm "
    "ArrayJobId=10 ArrayTaskId=0 DerivedExitCode=0:0 ExitCode=0:15\n"
    "JobId=11 Name=hydra_app JobState=REQUEUED NodeList=vm ArrayJobId=10 ArrayTaskId=1\n"
    "JobId=11 Name=hydra_app JobState=COMPLETED NodeList=vm ArrayJobId=10 ArrayTaskId=1\n"
    "JobId=12 Name=wrap JobState=TIMEOUT NodeList=vm\n"
    "a line that is not a record\n"
)


def test_the_job_completion_log_keys_array_tasks_as_submitit_does_and_the_last_line_wins() -> None:
    states = parse_jobcomp(JOBCOMP, "log")
    assert {k: v.state for k, v in states.items()} == {
        "10_0": "CANCELLED",
        "10_1": "COMPLETED",
        "12": "TIMEOUT",
    }
    assert states["10_0"] == SlurmState("10_0", "CANCELLED", "vm", "log")


def test_squeue_lines_and_the_config() -> None:
    assert parse_squeue("10_0|RUNNING|vm\n10_3|PENDING|\n") == {
        "10_0": SlurmState("10_0", "RUNNING", "vm", "squeue"),
        "10_3": SlurmState("10_3", "PENDING", "", "squeue"),
    }
    config = parse_config("AccountingStorageType   = accounting_storage/none\nJobCompLoc = /x/y.log\n")
    assert config == {"AccountingStorageType": "accounting_storage/none", "JobCompLoc": "/x/y.log"}
    assert not has_accounting(config)
    assert has_accounting({"AccountingStorageType": "accounting_storage/slurmdbd"})


def fake_slurm(squeue: tuple[int, str, str], scontrol_job: str = "") -> tuple[list[Sequence[str]], object]:
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, squeue[0], squeue[1], squeue[2])
        if argv[:3] == ["scontrol", "show", "job"]:
            return subprocess.CompletedProcess(argv, 0 if scontrol_job else 1, scontrol_job, "")
        return subprocess.CompletedProcess(argv, 1, "", "")

    return calls, run


@pytest.mark.parametrize(
    ("squeue", "scontrol_job", "expected"),
    [
        # queued: squeue says it; ended: the completion log; neither: scontrol; nothing: UNKNOWN, no source
        ((0, "10_0|RUNNING|vm\n", ""), "", {"10_0": ("RUNNING", "squeue"), "10_1": ("COMPLETED", "log"),
                                              "13": ("UNKNOWN", "")}),
        ((1, "", "slurm_load_jobs error: Invalid job id specified"), "JobId=13 JobState=FAILED NodeList=vm",
         {"10_0": ("CANCELLED", "log"), "10_1": ("COMPLETED", "log"), "13": ("FAILED", "scontrol")}),
        # the controller does not answer: nothing can be said about any job
        ((1, "", "slurm_load_jobs error: Unable to contact slurm controller"), "",
         {"10_0": ("UNKNOWN", ""), "10_1": ("UNKNOWN", ""), "13": ("UNKNOWN", "")}),
    ],
)  # fmt: skip
def test_slurm_states_reads_each_source_in_order(
    tmp_path: Path, squeue: tuple[int, str, str], scontrol_job: str, expected: dict[str, tuple[str, str]]
) -> None:
    log = tmp_path / "jobcomp.log"
    log.write_text(JOBCOMP)
    _, run = fake_slurm(squeue, scontrol_job)
    config = {"JobCompType": "jobcomp/filetxt", "JobCompLoc": str(log)}
    states = slurm_states(["10_0", "10_1", "13"], run=run, config=config)  # type: ignore[arg-type]
    found = {k: (v.state, v.source.replace(f"job completion log {log}", "log")) for k, v in states.items()}
    assert found == expected


def test_job_lines_name_each_job_its_candidate_node_and_final_state(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    (sweep / "journals").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  launcher:\n    _target_: hydra_plugins.gauntlet_submitit_slurm.SubmititSlurmLauncher\n"
    )
    for job in ("14_0", "14_1", "14_10"):
        folder = sweep / ".submitit" / job
        folder.mkdir(parents=True)
        (folder / f"{job}_submitted.pkl").write_bytes(b"")
    (sweep / "journals" / "sim-node-1-14_1.jsonl").write_text(
        '{"at":"2026-12-04T05:44:24.154+00:00","candidate":"eplb","event":"job_started","executor":"slurm",'
        '"job":"14_1","node":"sim-node-1","port":24501}\n'
    )
    log = tmp_path / "jobcomp.log"
    log.write_text(
        "JobId=15 JobState=COMPLETED NodeList=vm ArrayJobId=14 ArrayTaskId=1\n"
        "JobId=14 JobState=CANCELLED NodeList=vm ArrayJobId=14 ArrayTaskId=0\n"
    )
    looks: list[int] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if argv[:3] == ["scontrol", "show", "config"]:
            text = f"JobCompType = jobcomp/filetxt\nJobCompLoc = {log}\n"
            return subprocess.CompletedProcess(argv, 0, text, "")
        if argv[0] == "squeue":
            looks.append(1)
            return subprocess.CompletedProcess(argv, 0, "14_10|PENDING|\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "")

    now = [0.0]
    lines = job_lines(
        sweep, run=run, wait_s=3.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    assert lines[0] == "SLURM jobs of this sweep (3; state as SLURM reports it):"
    assert lines[1].split()[:5] == ["job", "14_0", "(never", "started)", "-"] and "CANCELLED" in lines[1]
    assert lines[2].split()[:5] == ["job", "14_1", "eplb", "sim-node-1", "COMPLETED"]
    assert lines[3].split()[:4] == ["job", "14_10", "(never", "started)"] and lines[3].split()[-2:] == [
        "PENDING",
        "(squeue)",
    ]
    assert lines[4] == "  still in the queue after 3 s: 14_10 (scancel them to stop)"
    assert len(looks) == 4  # the first look, then one a second until the deadline


def test_job_lines_say_nothing_for_a_sweep_that_did_not_run_under_slurm(tmp_path: Path) -> None:
    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n  launcher:\n    _target_: hydra._internal.BasicLauncher\n"
    )
    assert job_lines(tmp_path, run=lambda argv: pytest.fail(f"ran {argv}")) == []
