"""How a candidate's server was lost under load, in the words that lead its decision-table cell.

Pipeline position: under :mod:`report.model`, which puts :func:`lost_lead` in front of a candidate row's
short cell (what the sweep's last lines print, cut to the terminal's width, and report.md's and report.html's
table show). The gates' reason names the failed requirements in the gates' order (a concurrency regression
before stability's "watcher: server died ..."), so a server that died under load was said only past the
terminal's cut; here it comes first, with the node that was lost. Pure: it reads the launch's watch events
(``run.json``'s ``watch``, :class:`contracts.results.WatchEvent`)::

    >>> from contracts.results import WatchEvent
    >>> lost_lead([WatchEvent(at="t", kind="died", detail="node 1 (n2) pid 7 exited with code 137",
    ...                       node=1, node_name="n2", exit_code=137)])
    'the server died under load (node 1, n2: follower exited with code 137)'
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.results import WatchEvent
from contracts.sweepdir import Results

#: The watch events that say the server was lost, the first found of them leading (a hang before a death:
#: a hung server is killed, and its end is no second loss).
LEADING = ("hung", "died")


def lost_lead(events: Sequence[WatchEvent]) -> str | None:
    """``the server died under load (...)`` (or ``hung``) naming the process and, on a multi-node server,
    its node and role; None when the server was not lost under load."""
    for kind in LEADING:
        event = next((e for e in events if e.kind == kind), None)
        if event is not None:
            return f"the server {kind} under load ({_which(event)})"
    return None


def led_summary(decision: str, summary: str, results: Results | None) -> str:
    """A candidate's decision-table cell led by how its server was lost under load (unchanged for the
    baseline's row, a candidate that never started, and a server that was not lost)."""
    run = results.run if results is not None else None
    if decision in ("baseline", "incompatible") or run is None:
        return summary
    lead = lost_lead(run.watch)
    if lead is None or summary.startswith(lead):
        return summary
    return f"{lead}; {summary}" if summary else lead


def _which(event: WatchEvent) -> str:
    """The lost process: ``node 1, n2: follower exited with code 137``, or the detail's first clause (a
    single-node server's, and a run.json written before events named their node)."""
    if event.node is None:
        return event.detail.split(";")[0].strip()
    role = "head" if event.node == 0 else "follower"
    name = f", {event.node_name}" if event.node_name else ""
    if event.kind == "hung":  # launch.watch: "node 1 (n2) pid 4242 is stopped for 2.0 s while ..."
        how = event.detail.split(";")[0].strip()
        how = how.removeprefix(f"node {event.node} ({event.node_name}) ")
        return f"node {event.node}{name}: {role} {how}"
    code = f" with code {event.exit_code}" if event.exit_code is not None else ""
    return f"node {event.node}{name}: {role} exited{code}"
