"""The local SLURM cluster's two nodes for a test (`scripts/slurm-local.sh start --nodes 2`): an allocation
of n1 and n2, cancelled afterwards; skipped without the cluster, failed with GAUNTLET_REQUIRE_SLURM=1."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def squeue(*args: str) -> str:
    return subprocess.run(
        ["squeue", "-h", *args], capture_output=True, text=True, timeout=20, check=True
    ).stdout


@contextmanager
def two_node_allocation(job_name: str) -> Iterator[tuple[str, str]]:
    """A job holding the local cluster's nodes n1 and n2 (its id and node list); cancelled, and waited for
    until SLURM no longer lists it (at most 60 s), afterwards."""
    try:
        sinfo = ["sinfo", "-h", "-N", "-o", "%N %T"]
        nodes = subprocess.run(sinfo, capture_output=True, text=True, timeout=20, check=True).stdout.split(
            "\n"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        nodes = [f"sinfo: {exc}"]
    usable = sorted({line.split()[0] for line in nodes if re.fullmatch(r"n[12] (idle|mixed)", line.strip())})
    if usable != ["n1", "n2"]:
        message = (
            f"no 2-node SLURM cluster with n1 and n2 free (sinfo: {[n for n in nodes if n]}); "
            "start one: `scripts/slurm-local.sh start --nodes 2` (root)"
        )
        if os.environ.get("GAUNTLET_REQUIRE_SLURM") == "1":
            pytest.fail(f"GAUNTLET_REQUIRE_SLURM=1: {message}")
        pytest.skip(message)
    done = subprocess.run(
        ["salloc", "--nodes=2", "--ntasks-per-node=1", "--no-shell", "--immediate=60",
         f"--job-name={job_name}"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    granted = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert done.returncode == 0 and granted, done.stderr
    job = granted.group(1)
    try:
        yield job, squeue("-j", job, "-o", "%N").strip()
    finally:
        subprocess.run(["scancel", job], timeout=20, check=False)
        deadline = time.monotonic() + 60
        while job in squeue("-o", "%i").split() and time.monotonic() < deadline:
            time.sleep(0.5)
