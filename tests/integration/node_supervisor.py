"""A supervisor that runs on the local SLURM cluster's n1, as the job's gauntlet does: a test starts it as a
step of its allocation (``srun --overlap --nodelist=n1``), so it sees n1's processes only (the nodes have
PID namespaces of their own, ``scripts/slurm-local.sh``), and whatever it learns of n2 it learns through
n2's agent. It starts the 2-node server of a spec file (head here, follower a step on n2), prints one JSON
line once it is ready (``{"pid": ..., "followers": [...]}``), optionally records it in a sweep's journals
as the job's gauntlet would (``--journal SWEEP``); with ``--escape PIDFILE`` its follower first leaves a
process of its own behind on n2 (:data:`ESCAPE`). It then waits until its stdin closes, tears the server down
and prints the teardown's record (``{"record": ..., "error": ...}``)::

    srun --jobid=J --nodelist=n1 --overlap python -m tests.integration.node_supervisor SPEC.json \\
        --job-nodelist 'n[1-2]' [--journal SWEEP] [--escape PIDFILE]

``--job-nodelist``: the job's nodes (a step started with ``srun --jobid --nodelist=n1`` from outside the job
gets ``SLURM_JOB_NODELIST=n1``, a job's own first task the job's list).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from contracts.errors import GauntletError
from launch.spec import LaunchSpec
from launch.supervisor import Supervisor
from orchestrator.ledger.events import JobStarted, Launching
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import Place, launching_place

ROOT = Path(__file__).resolve().parents[2]

#: A follower that first leaves a process of its own behind, outside its step's tree (double fork and
#: setsid: reparented to its node's init), writes that process's pid (its node's) to a file, then runs the
#: real follower.
ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({pidfile!r}, "w").write(str(os.getpid()))
        time.sleep(600)
        os._exit(0)
    os._exit(0)
os.wait()
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", type=Path)
    parser.add_argument("--job-nodelist", required=True)
    parser.add_argument("--journal", type=Path, default=None)
    parser.add_argument("--escape", type=Path, default=None)
    args = parser.parse_args()
    spec = LaunchSpec.from_json(args.spec.read_text(), source=str(args.spec))
    if args.escape is not None:
        (follower,) = spec.followers
        escaping = ("python", "-c", ESCAPE.format(pidfile=str(args.escape)), *follower[1:])
        spec = replace(spec, followers=(escaping,))
    log = args.spec.with_name("server.log")
    environ = {**os.environ, "SLURM_JOB_NODELIST": args.job_nodelist}
    sup = Supervisor(project_root=ROOT, environ=environ, poll_interval_s=0.1)
    server = sup.start(spec, log)
    try:
        sup.wait_ready(server)
        server = sup.locate(server)
        if args.journal is not None:
            job = os.environ["SLURM_JOB_ID"]
            Journal.of_sweep(args.journal, launching_place()).append(
                JobStarted(candidate=spec.candidate, executor="slurm")
            )
            journal = Journal.of_sweep(args.journal, Place("n1", job, "slurm"))
            journal.append(JobStarted(candidate=spec.candidate, executor="slurm"))
            launch = Launching(candidate=spec.candidate, fingerprint=spec.fingerprint, port=spec.port,
                               spec_file=str(args.spec))  # fmt: skip
            journal.append(launch.started(pid=server.pid, pgid=server.pgid, create_time=server.create_time,
                                          log_path=str(log), followers=server.node_processes()))  # fmt: skip
        followers = [f.model_dump(mode="json") for f in server.node_processes()]
        print(json.dumps({"pid": server.pid, "followers": followers}), flush=True)
        sys.stdin.read()
    finally:
        error = ""
        try:
            record = sup.teardown(server).model_dump(mode="json")
        except GauntletError as exc:
            error, last = exc.message, sup.last_teardown
            record = last.model_dump(mode="json") if last is not None else {}
        print(json.dumps({"record": record, "error": error}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
