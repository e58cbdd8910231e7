"""The per-node check: what one node holds of a server gauntlet started, as one JSON report on stdout.

Pipeline position: run by the launcher on every node of a multi-node candidate (a SLURM job step there,
:mod:`launch.nodecheck`), at launch and after teardown; its report is what teardown, ``rollback`` and
``status`` decide from. A server's processes are the ones whose environment carries :data:`TAG_ENV` with
the server's API port (the supervisor sets it in every node's command; vLLM's engines inherit it), so a
process that left its job step's tree is still found. The core (:func:`node_report`,
:func:`parse_report`) is pure; the process table, sockets, NVML and signals are :class:`Host`'s::

    python -m launch.node_agent --port 8000 --rpc-port 29550          # report only
    python -m launch.node_agent --port 8000 --kill                    # SIGKILL the server's processes first
    {"node": "n2", "processes": [{"pid": 4242, ...}], "ports": [...], "gpus": null,
     "gpu_note": "no NVIDIA driver (...)", "killed": []}
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

import psutil
from pydantic import BaseModel, ConfigDict, ValidationError

from contracts.errors import TeardownError
from launch.nvml import NvmlProbe
from launch.process import started_since_boot

#: The environment variable every process of a server carries: the server's API port.
TAG_ENV = "GAUNTLET_SERVER_PORT"
#: And the node it was started for (a multi-node server): a node's check never reports another node's
#: process, even where it could see it (every node of the local test cluster is this machine).
NODE_ENV = "GAUNTLET_SERVER_NODE"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentProcess(_Record):
    """One process of the server on this node."""

    pid: int
    pgid: int
    create_time: float  # seconds after boot (launch.process.started_since_boot)
    state: str  # psutil's status: "sleeping", "stopped", ...
    cmdline: str
    slurm_step: str = ""  # "JOB.STEP" of the SLURM step it runs in ("" outside one)

    def describe(self) -> str:
        step = f", step {self.slurm_step}" if self.slurm_step else ""
        return f"pid {self.pid} ({self.cmdline[:120]}{step}, {self.state})"


class AgentPort(_Record):
    """A port of the server's held (listening) on this node, and by which pids."""

    port: int
    pids: list[int]


class AgentGpu(_Record):
    """One GPU of this node: its memory in use and its NVML energy counter."""

    index: int
    used_gib: float
    total_gib: float
    energy_mj: (
        int | None
    )  # nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded); None: unsupported
    uuid: str = ""  # nvmlDeviceGetUUID (GPU-...): what a CUDA_VISIBLE_DEVICES entry may name; "": unknown


class NodeReport(_Record):
    """What one node holds of the server: its processes, the ports, its GPUs (None: no NVIDIA driver)."""

    node: str
    processes: list[AgentProcess]
    ports: list[AgentPort]
    gpus: list[AgentGpu] | None
    gpu_note: str = ""  # why ``gpus`` is None ("no NVIDIA driver (...)")
    killed: list[int] = []  # the pids --kill sent SIGKILL to before this report


@dataclass(frozen=True)
class Seen:
    """One process as the host's table shows it, with the environment the tag is read from."""

    pid: int
    ppid: int
    pgid: int
    create_time: float
    state: str
    cmdline: tuple[str, ...]
    environ: Mapping[str, str]


def is_tagged(environ: Mapping[str, str], port: int) -> bool:
    return environ.get(TAG_ENV) == str(port)


def server_processes(
    seen: Sequence[Seen], port: int, exclude: set[int], node: str = ""
) -> list[AgentProcess]:
    """The processes of the server on ``port`` (by the tag) started for ``node`` (or for no node in
    particular), but not the agent and its ancestors (pure)."""
    out = []
    for p in seen:
        if p.pid in exclude or not is_tagged(p.environ, port) or p.state == "zombie":
            continue
        if node and p.environ.get(NODE_ENV, node) != node:
            continue
        job, step = p.environ.get("SLURM_JOB_ID", ""), p.environ.get("SLURM_STEP_ID", "")
        command = " ".join(" ".join(p.cmdline).split())  # setproctitle pads with spaces
        out.append(
            AgentProcess(pid=p.pid, pgid=p.pgid, create_time=p.create_time, state=p.state, cmdline=command,
                         slurm_step=f"{job}.{step}" if job and step else "")
        )  # fmt: skip
    return sorted(out, key=lambda a: a.pid)


def node_report(
    name: str,
    seen: Sequence[Seen],
    ports: Mapping[int, Sequence[int]],
    gpus: list[AgentGpu] | None,
    gpu_note: str,
    *,
    port: int,
    exclude: set[int],
    killed: Sequence[int] = (),
    node: str = "",
) -> NodeReport:
    """The report of one node (pure): the server's processes, the ports held (with their holders; a port
    held by another node's process of the server is that node's), GPUs."""
    elsewhere = {
        p.pid for p in seen if node and is_tagged(p.environ, port) and p.environ.get(NODE_ENV, node) != node
    }
    held = [
        AgentPort(port=p, pids=sorted(here))
        for p, pids in sorted(ports.items())
        if (here := [pid for pid in pids if pid not in elsewhere])
    ]
    return NodeReport(
        node=name, processes=server_processes(seen, port, exclude, node), ports=held, gpus=gpus,
        gpu_note="" if gpus is not None else gpu_note, killed=sorted(killed),
    )  # fmt: skip


def parse_report(text: str, *, node: str) -> NodeReport:
    """The agent's stdout as its report; anything else is a :class:`TeardownError` quoting it."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        return NodeReport.model_validate_json(lines[-1] if lines else "")
    except ValidationError as exc:
        quoted = " | ".join(lines[-3:])[:300] or "<nothing>"
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the report"
        raise TeardownError(
            f"node {node}'s check printed no report: {where}: {first['msg']} (stdout: {quoted})",
            hint="run `python -m launch.node_agent --port PORT` on that node to see what it says",
        ) from exc


class Host(Protocol):
    """This node's process table, sockets, GPUs and signals."""

    def name(self) -> str: ...

    def processes(self) -> list[Seen]: ...

    def listeners(self, ports: Sequence[int]) -> dict[int, list[int]]:
        """Each port of ``ports`` someone listens on, with the listening pids (empty: free)."""
        ...

    def gpus(self) -> tuple[list[AgentGpu] | None, str]:
        """Every GPU's memory and energy counter, or None and why (no NVIDIA driver)."""
        ...

    def kill(self, pid: int) -> bool: ...

    def own_lineage(self) -> set[int]:
        """This process and its ancestors (a check started from inside a server never reports itself)."""
        ...


class PsutilHost:
    """The real node: psutil, a bind test for ports held by processes it cannot see, pynvml."""

    def __init__(self, nvml: NvmlProbe | None = None) -> None:
        self._nvml = nvml if nvml is not None else NvmlProbe()

    def name(self) -> str:
        return os.environ.get("SLURMD_NODENAME") or socket.gethostname()

    def processes(self) -> list[Seen]:
        out = []
        for proc in psutil.process_iter():
            try:
                with proc.oneshot():
                    environ = proc.environ()
                    if TAG_ENV not in environ:
                        continue
                    out.append(
                        Seen(proc.pid, proc.ppid(), os.getpgid(proc.pid), started_since_boot(proc),
                             proc.status(), tuple(proc.cmdline()), environ)
                    )  # fmt: skip
            except (psutil.Error, ProcessLookupError, PermissionError):
                continue
        return out

    def listeners(self, ports: Sequence[int]) -> dict[int, list[int]]:
        held: dict[int, list[int]] = {p: [] for p in ports}
        with contextlib.suppress(psutil.AccessDenied, PermissionError):
            for conn in psutil.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port in held:
                    held[conn.laddr.port].append(conn.pid or 0)
        for port in ports:
            if not held[port] and _bound(port):
                held[port] = [0]  # taken by a process this agent cannot see
        return {p: sorted(set(pids)) for p, pids in held.items()}

    def gpus(self) -> tuple[list[AgentGpu] | None, str]:
        nvml = self._nvml.module()
        snapshot = self._nvml.snapshot()
        if nvml is None or snapshot is None:
            return None, self._nvml.reason or "no NVIDIA driver"
        gpus = [
            AgentGpu(index=g.index, used_gib=g.used_gib, total_gib=g.total_gib,
                     energy_mj=_energy(nvml, g.index), uuid=_uuid(nvml, g.index))
            for g in snapshot
        ]  # fmt: skip
        return gpus, ""

    def kill(self, pid: int) -> bool:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def own_lineage(self) -> set[int]:
        pids = {os.getpid()}
        with contextlib.suppress(psutil.Error):
            pids.update(p.pid for p in psutil.Process().parents())
        return pids


def _bound(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _energy(nvml: Any, index: int) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.nvmlDeviceGetHandleByIndex(index)))
    except Exception:  # NVMLError_NotSupported on GPUs before Volta: the counter is absent
        return None


def _uuid(nvml: Any, index: int) -> str:
    try:
        value = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
    except Exception:  # an NVML error: the GPU is still reported, matched by its index alone
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def check(
    host: Host, *, port: int, other_ports: Sequence[int] = (), kill: bool = False, node: str = ""
) -> NodeReport:
    """This node's report; with ``kill``, SIGKILL every process of the server first (the report after).
    ``node``: only the processes started for that node (every one of the server's where it is empty)."""
    exclude = host.own_lineage()
    killed: list[int] = []
    if kill:
        for p in server_processes(host.processes(), port, exclude, node):
            if host.kill(p.pid):
                killed.append(p.pid)
    gpus, note = host.gpus()
    listening = host.listeners([port, *other_ports])
    return node_report(host.name(), host.processes(), listening, gpus, note, port=port, exclude=exclude,
                       killed=killed, node=node)  # fmt: skip


def main(argv: Sequence[str] | None = None, *, host: Host | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch.node_agent", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the server's API port (its tag)")
    parser.add_argument("--rpc-port", type=int, action="append", default=[], help="another port it holds")
    parser.add_argument("--kill", action="store_true", help="SIGKILL the server's processes first")
    parser.add_argument("--node", default="", help="only the processes started for this node (its name)")
    args = parser.parse_args(argv)
    report = check(
        host or PsutilHost(), port=args.port, other_ports=args.rpc_port, kill=args.kill, node=args.node
    )
    out.write(report.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
