"""The head node of a Ray candidate: Ray's head, the wait until Ray reports every node, then ``vllm serve``.

Pipeline position: the head's command of a spec with ``multinode_backend: ray``
(:func:`contracts.ray_backend.ray_commands`), started by :mod:`launch.supervisor` as any head (its own
session; the other nodes' ``ray start`` are its followers, SLURM job steps on their nodes)::

    python -m launch.ray_head --nodes 2 --address 10.0.0.1 --ray-port 29550 --join-timeout-s 120 \\
        -- ray start --head ... --block -- vllm serve MODEL ... --distributed-executor-backend ray

It starts the first command (Ray's head on this node), asks ``ray status -v`` until every node's
``gauntlet_node_<k>`` resource is listed (saying how it stands every 5 s, for at most ``--join-timeout-s``),
then runs the second with ``RAY_ADDRESS`` set to the cluster; a node that never joined ends it with exit
code 1 and a line naming the node (its name from ``GAUNTLET_NODE_NAMES``, which the supervisor sets). It
ends with ``vllm serve``: on SIGTERM it stops ``vllm serve`` first, then Ray's head; if Ray's head exits
under a running server, the server is stopped and the exit code is 1 (the server is dead).
The wait (:func:`wait_for_nodes`) is pure but for its injected seams.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from contracts.errors import LaunchError
from contracts.ray_backend import joined_nodes
from launch.command import resolve_argv

#: The environment variable with the nodes' names, comma-separated, node 0 first (set by the supervisor).
NODE_NAMES_ENV = "GAUNTLET_NODE_NAMES"
#: How often the wait says how it stands (seconds).
PROGRESS_EVERY_S = 5.0
#: Between two ``ray status`` (seconds).
POLL_S = 1.0
#: How long Ray's head and ``vllm serve`` get to end after SIGTERM before SIGKILL (seconds).
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class Args:
    nodes: int
    address: str
    ray_port: int
    join_timeout_s: float
    ray_head: list[str]
    serve: list[str]

    @property
    def cluster(self) -> str:
        return f"{self.address}:{self.ray_port}"


def parse(argv: Sequence[str]) -> Args:
    """``--nodes N --address A --ray-port P --join-timeout-s T -- RAY_HEAD... -- SERVE...``."""
    args = list(argv)
    if args.count("--") < 2:
        raise ValueError("expected OPTIONS -- RAY_HEAD_COMMAND... -- SERVE_COMMAND...")
    first = args.index("--")
    second = args.index("--", first + 1)
    options, ray_head, serve = args[:first], args[first + 1 : second], args[second + 1 :]
    if len(options) % 2 or not ray_head or not serve:
        raise ValueError("options come in pairs; both commands must be given")
    values = dict(zip(options[::2], options[1::2], strict=True))
    known = {"--nodes", "--address", "--ray-port", "--join-timeout-s"}
    if set(values) != known:
        raise ValueError(f"options must be exactly {', '.join(sorted(known))}; got {', '.join(values)}")
    return Args(
        nodes=int(values["--nodes"]),
        address=values["--address"],
        ray_port=int(values["--ray-port"]),
        join_timeout_s=float(values["--join-timeout-s"]),
        ray_head=ray_head,
        serve=serve,
    )


def node_label(node: int, names: Sequence[str]) -> str:
    return f"node {node} ({names[node]})" if node < len(names) and names[node] else f"node {node}"


def wait_for_nodes(
    *,
    nodes: int,
    cluster: str,
    timeout_s: float,
    status: Callable[[], str | None],
    head_exit: Callable[[], int | None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    say: Callable[[str], None],
    names: Sequence[str] = (),
) -> str | None:
    """None once ``ray status -v`` (``status``: its output, None while it fails) lists every node's
    resource; why not otherwise: Ray's head exited (``head_exit``: its code, None while it runs), or a
    node never joined within ``timeout_s`` (named). Says how it stands every :data:`PROGRESS_EVERY_S`."""
    start = clock()
    said = start
    joined: set[int] = set()
    while True:
        code = head_exit()
        if code is not None:
            return f"Ray's head (ray start --head) exited with code {code} before every node joined {cluster}"
        output = status()
        joined = joined_nodes(output) if output is not None else joined
        missing = [k for k in range(nodes) if k not in joined]
        elapsed = clock() - start
        if not missing:
            say(f"all {nodes} nodes joined the Ray cluster at {cluster} ({elapsed:.1f} s)")
            return None
        waiting = ", ".join(node_label(k, names) for k in missing)
        if elapsed >= timeout_s:
            have = ", ".join(node_label(k, names) for k in sorted(joined)) or "none"
            up = "" if output is not None else "; ray status did not answer"
            return (
                f"{waiting} never joined the Ray cluster at {cluster} within {timeout_s:g} s "
                f"(joined: {have}{up}); see that node's log (server.node<k>.log)"
            )
        if clock() - said >= PROGRESS_EVERY_S:
            said = clock()
            say(f"{nodes - len(missing)} of {nodes} nodes joined the Ray cluster at {cluster}; waiting for "
                f"{waiting} ({elapsed:.0f} s of at most {timeout_s:g} s)")  # fmt: skip
        sleep(POLL_S)


def _status(ray: Sequence[str], cluster: str) -> str | None:
    try:
        done = subprocess.run([*ray, "status", "--address", cluster, "-v"], capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM, the grace period, SIGKILL; the exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def _say(line: str) -> None:
    sys.stdout.write(f"gauntlet ray_head: {line}\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        root = Path.cwd()
        ray_head, serve = resolve_argv(args.ray_head, root), resolve_argv(args.serve, root)
    except (ValueError, LaunchError) as exc:
        sys.stderr.write(f"launch.ray_head: error: {exc}\n")
        return 2
    ray = ray_head[: ray_head.index("start")] if "start" in ray_head else ray_head[:1]
    names = [n for n in os.environ.get(NODE_NAMES_ENV, "").split(",") if n]
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    _say(f"starting Ray's head: {' '.join(args.ray_head)}")
    head = subprocess.Popen(ray_head)
    why = wait_for_nodes(
        nodes=args.nodes,
        cluster=args.cluster,
        timeout_s=args.join_timeout_s,
        status=lambda: None if stopping else _status(ray, args.cluster),
        head_exit=lambda: head.poll() if not stopping else 0,
        clock=time.monotonic,
        sleep=time.sleep,
        say=_say,
        names=names,
    )
    if stopping:  # stopped while waiting (a teardown): not a failure of the cluster
        _stop(head)
        return 0
    if why is not None:
        sys.stderr.write(f"gauntlet ray_head: RuntimeError: {why}\n")
        sys.stderr.flush()
        _stop(head)
        return 1
    _say(f"starting vLLM with RAY_ADDRESS={args.cluster}: {' '.join(args.serve)}")
    server = subprocess.Popen(serve, env={**os.environ, "RAY_ADDRESS": args.cluster})
    code: int | None = None
    while code is None and not stopping:
        code = server.poll()
        if code is None and (ray_code := head.poll()) is not None:
            sys.stderr.write(f"gauntlet ray_head: RuntimeError: Ray's head exited with code {ray_code} under "
                             "a running vLLM; stopping it\n")  # fmt: skip
            _stop(server)
            return 1
        time.sleep(0.2)
    code = _stop(server)
    _stop(head)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
