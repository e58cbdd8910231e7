"""A follower alive but stopped: the look the watcher takes at each follower of a multi-node server.

Pipeline position: under :mod:`launch.watch`, which asks :meth:`StoppedLook.__call__` about every follower
on each check while load runs; the supervisor builds it with its process table and its per-node check.
A follower that stops making progress while its process still runs is invisible to the head: vLLM's head
(and the simulator's) keeps answering ``/health`` with 200, so the single-node rule (``/health`` unanswered
for ``HUNG_AFTER_S``) never fires, and a SIGSTOPped follower under load went unnoticed for the rest of the
candidate's profiles. The signal taken is the process state the kernel reports, ``T`` (``stopped``,
``tracing-stop``): a stopped process's state is the same through psutil on this machine and through the
node's agent (:mod:`launch.node_agent`, a SLURM step there), so one rule serves the simulator and a real
cluster. A follower on this machine is looked at through the process table (its process and its
descendants) on every check; a SLURM step through its node's agent, at most every
:data:`NODE_LOOK_S` (each look is an ``srun``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from launch.nodecheck import NodeChecker
from launch.process import Processes
from launch.tracking import Server

#: The process states of a process that cannot run until someone resumes it (psutil's names).
STOPPED_STATES = ("stopped", "tracing-stop")
#: How long a follower must be seen stopped before the server is declared hung: a stop that long under
#: load is no scheduling blip. Detection bound on this machine: this plus one watch interval (1 s).
STOPPED_AFTER_S = 2.0
#: Between two looks at a SLURM follower through its node's agent (an srun step each). A stop is counted
#: between two looks that saw it, so the detection bound there is 2 x NODE_LOOK_S (at least
#: STOPPED_AFTER_S) + one watch interval + the agents' own time (about a second each): under 15 s.
NODE_LOOK_S = 5.0


def stopped_in(states: Sequence[tuple[int, str]]) -> str | None:
    """The first stopped process of ``(pid, state)`` pairs, described (``pid 4242 is stopped``); None
    when every one runs (pure)."""
    for pid, state in states:
        if state in STOPPED_STATES:
            return f"pid {pid} is {state}"
    return None


@dataclass
class StoppedLook:
    """Whether a follower's process (or one of its tree, on its node) is stopped.

    ``checker``: the per-node check of a follower's nodes (``(node, name, job)`` -> checker); ``clock``:
    monotonic seconds (the rate limit of the agent's looks)."""

    processes: Processes
    checker: Callable[[Sequence[tuple[int, str, str]]], NodeChecker]
    clock: Callable[[], float]
    node_look_s: float = NODE_LOOK_S
    #: A SLURM follower's last look: when, and what it said, by the follower's (pid, create time).
    _last: dict[tuple[int, float], tuple[float, str | None]] = field(default_factory=dict)

    def __call__(self, follower: Server) -> tuple[str, float] | None:
        """The follower's stopped process, described, and when a look saw it so (a SLURM follower's last
        look, up to ``node_look_s`` old); None: it runs, or its node cannot say."""
        if not follower.slurm_job:
            said = self._local(follower)
            return (said, self.clock()) if said is not None else None
        key = (follower.pid, follower.create_time)
        last = self._last.get(key)
        if last is None or self.clock() - last[0] >= self.node_look_s:
            last = self._last[key] = (self.clock(), self._on_node(follower))
        return (last[1], last[0]) if last[1] is not None else None

    def _local(self, follower: Server) -> str | None:
        info = self.processes.info(follower.pid)
        if info is None:
            return None
        tree = [info, *self.processes.descendants(follower.pid)]
        return stopped_in([(p.pid, p.state) for p in tree])

    def _on_node(self, follower: Server) -> str | None:
        """Through the follower's node's agent: its processes there (a node that cannot say: None, the
        watcher's other rules still apply)."""
        checker = self.checker([(follower.node, follower.node_name, follower.slurm_job)])
        try:
            results = checker.check(follower.spec.port, [])
        except OSError:
            return None
        for r in results:
            if r.name == follower.node_name and r.report is not None:
                return stopped_in([(p.pid, p.state) for p in r.report.processes])
        return None
