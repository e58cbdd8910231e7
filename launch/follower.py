"""The follower record: one process of a multi-node server on another node, as the supervisor hands it out
and the journal's ``started`` line keeps it (one record for both: no conversion between them).

Pipeline position: made by :mod:`launch.tracking` (``Server.node_processes``), written and read by
:mod:`orchestrator.ledger.events`, given back to :meth:`launch.supervisor.Supervisor.adopt`. Its own module,
free of process code, so the ledger imports it without psutil.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class NodeProcess(BaseModel):
    """A follower of a multi-node server: its node, the machine, pid, group and start time; the one record
    the supervisor hands out and the journal's ``started`` line keeps (``followers``), enough to find and
    stop it again."""

    model_config = ConfigDict(frozen=True)

    node: int
    name: str
    pid: int
    pgid: int
    create_time: float
    log_path: str
    slurm_job: str = ""  # the SLURM job whose step it is ("" on this machine)
    #: A SLURM step's process on its node, as the node's agent saw it once the server was ready (``pid`` is
    #: the local ``srun``, the step's handle teardown signals); None: not seen, or on this machine (where
    #: ``pid`` is the process itself).
    node_pid: int | None = None
