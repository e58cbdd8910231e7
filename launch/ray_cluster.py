"""Teardown's ``ray stop`` on every node of a Ray candidate (``multinode_backend: ray``).

Pipeline position: under :meth:`launch.supervisor.Supervisor.teardown`, after the head
(:mod:`launch.ray_head`: ``vllm serve`` and Ray's head) and each node's ``ray start --block`` have been
stopped, and before the per-node check (:mod:`launch.nodecheck`) proves nothing is left. Inside a SLURM
job each node gets a job step that runs its ``ray stop --force`` (Ray's processes a ``ray start`` left
behind: a raylet that outlived its ``--block`` process); a node whose step fails is named in a note and
never keeps the other nodes from theirs. Outside SLURM every node is this machine, where ``ray stop``
would end every Ray of the user, so nothing is run: the per-node check finds and kills the server's
processes by their tag (Ray's processes carry it: they inherit their ``ray start``'s environment).
``srun`` is an injected seam::

    stop_ray(spec, [(0, "n1", "61"), (1, "n2", "61")])
    # ['node 0 (n1): ray stop: Stopped all 5 Ray processes.', 'node 1 (n2): ray stop: ...']
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from contracts.errors import LaunchError
from contracts.network import WRAPPER_MODULE
from contracts.paths import PROJECT_ROOT
from contracts.ray_backend import RAY_JOIN_TIMEOUT_S, head_command, ray_entrypoint, ray_port
from launch.command import resolve_argv
from launch.node_agent import NODE_ENV
from launch.spec import LaunchSpec

#: The prefix of a ``ray stop`` step's name: ``gauntlet-raystop<k>-<port>``.
STEP_PREFIX = "gauntlet-raystop"
#: How long one node's ``ray stop`` step may take (seconds; Ray's own stop waits up to about 16 s).
STOP_TIMEOUT_S = 60.0

Run = Callable[[Sequence[str]], str]


def is_ray(spec: LaunchSpec) -> bool:
    """The spec's followers are each node's ``ray start`` (its head runs inside :mod:`launch.ray_head`)."""
    return ray_port(spec.followers) is not None


def launch_argv(spec: LaunchSpec) -> tuple[str, ...]:
    """The head's command as launched: a Ray spec's inside :mod:`launch.ray_head` (its wait for the nodes
    bounded by :data:`RAY_JOIN_TIMEOUT_S` or half the startup timeout), any other's as is."""
    if not is_ray(spec):
        return spec.argv
    return tuple(head_command(spec.argv, spec.followers, min(RAY_JOIN_TIMEOUT_S, spec.startup_timeout_s / 2)))


def stop_command(spec: LaunchSpec, node: int, name: str, job: str) -> list[str]:
    """Node ``node``'s ``ray stop --force`` as a step of SLURM job ``job``."""
    ray = ray_entrypoint(spec.followers[0]) if spec.followers else ["ray"]
    ray = resolve_argv(ray, PROJECT_ROOT)  # `python` is gauntlet's interpreter, as in a follower's step
    return ["srun", f"--jobid={job}", "--nodes=1", "--ntasks=1", f"--nodelist={name}", "--overlap",
            f"--job-name={STEP_PREFIX}{node}-{spec.port}", "env", f"{NODE_ENV}={name}",
            *ray, "stop", "--force"]  # fmt: skip


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=STOP_TIMEOUT_S, check=False, cwd=PROJECT_ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout


def stop_ray(spec: LaunchSpec, nodes: Sequence[tuple[int, str, str]], run: Run = _run) -> list[str]:
    """``ray stop --force`` on each ``(node, name, SLURM job)`` that is a SLURM node, one step each; a note
    per node (what Ray said, or why the step failed: never raised, so every node gets its stop)."""
    notes: list[str] = []
    for node, name, job in nodes:
        if not job:
            continue
        try:
            said = run(stop_command(spec, node, name, job)).strip().splitlines()
            notes.append(f"node {node} ({name}): ray stop: {said[-1] if said else 'done'}")
        except Exception as exc:  # one node's failure never stops the other nodes' ray stop
            notes.append(f"node {node} ({name}): ray stop failed: {type(exc).__name__}: {exc}")
    return notes


def ray_cli_problems(
    specs: Mapping[str, LaunchSpec], resolve: Callable[[Sequence[str]], list[str]]
) -> list[tuple[str, str]]:
    """``doctor``'s check of each Ray candidate's Ray CLI (``host.ray_entrypoint``, resolved as the launch
    resolves it): ``(candidate, problem)`` where it cannot be found here, so the candidate is refused before
    any node starts."""
    out: list[tuple[str, str]] = []
    for name, spec in specs.items():
        if not is_ray(spec):
            continue
        ray = ray_entrypoint(spec.followers[0])
        if list(ray[1:3]) == ["-m", WRAPPER_MODULE] and "--" in ray:  # behind launch.netif
            ray = ray[ray.index("--") + 1 :]
        try:
            resolve(ray)
        except LaunchError as exc:
            what = f"the Ray CLI {' '.join(ray)} (host.ray_entrypoint) cannot be started here"
            out.append((name, f"multinode_backend ray: {what}: {exc.message}; install Ray where vLLM is"))
    return out
