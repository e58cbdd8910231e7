"""``stop``: stop every server gauntlet started for a sweep, the retained one included; restore nothing.

Pipeline position: outside the sweep, beside :mod:`.rollback` and :mod:`.status` (the sweep found by
:mod:`.locate`; a running sweep asked first, under the port's lock, by :mod:`.handover`). The newcomer's
exit; ``rollback`` brings the retained configuration back. A pid is trusted only when its start time matches
the journal's record. Running it twice is a no-op.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError
from orchestrator.ledger import offsite
from orchestrator.ledger.events import StopFinished, StopRequested
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import launching_place
from orchestrator.recovery.handover import STOP_WAIT_S, acting_on, cancel_remote_jobs
from orchestrator.recovery.locate import acting_sweep, reinstate_if_lost, sweep_port
from orchestrator.servers.leftovers import stop_leftovers
from orchestrator.servers.seams import Seams
from orchestrator.servers.session import Servers


def stop(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout, wait_s: float = STOP_WAIT_S) -> int:
    """Stop every server gauntlet started for this sweep, the retained one included; restore nothing.

    A running sweep of ``sweep_dir`` is asked to stop (it tears down what it started and restores nothing);
    whatever is left afterwards is stopped here. Returns how many servers were stopped (by the sweep and
    here; 0 when nothing was running: running it twice is a no-op).
    """
    reinstate_if_lost(sweep_dir, seams)
    with acting_on(sweep_dir, sweep_port(sweep_dir), "stop", seams, wait_s=wait_s) as act:
        servers = Servers(Journal.of_sweep(sweep_dir, launching_place()), seams)
        offsite.attach(servers.journal, sweep_dir)
        state = servers.journal.replay()
        if act.holder is None:
            servers.journal.append(StopRequested(live=len(state.live)))
            cancel_remote_jobs(servers.journal, sweep_dir, seams)
        here = stop_leftovers(servers, state, reason="stop requested (nothing is restored)")
        by_sweep = act.torn_down_by_sweep() if act.holder is not None else []
        servers.journal.append(StopFinished(stopped=here + len(by_sweep)))
    if act.holder is not None:
        names = ", ".join(by_sweep) or "nothing was running"
        out.write(
            f"stopped: the running sweep (pid {act.holder.pid}) unwound at once and stopped {len(by_sweep)} "
            f"server(s) it started ({names}); nothing was restored"
            + (f"; {here} more stopped here" if here else "")
            + f".\n  nothing gauntlet started for {sweep_dir} is running now; "
            f"`python -m orchestrator rollback {sweep_dir}` brings the retained configuration back\n"
        )
    elif here:
        out.write(
            f"stopped {here} server(s) gauntlet started for {sweep_dir}; nothing it started is running "
            f"now.\n  `python -m orchestrator rollback {sweep_dir}` brings the retained configuration back\n"
        )
    else:
        out.write(f"nothing to stop: no server gauntlet started for {sweep_dir} is running\n")
    return here + len(by_sweep)


def main_stop(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    try:
        seams = seams_factory()
        stop(acting_sweep(args[0] if args else None, seams, command="stop"), seams)
    except GauntletError as exc:
        print(f"gauntlet stop: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
