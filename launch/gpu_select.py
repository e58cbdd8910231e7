"""The candidate's own GPUs: the server's devices found in its launch spec and mapped to NVML by UUID.

Pipeline position: the GPU meter (:class:`launch.nvml.NvmlEnergy`) asks :func:`device_request` which
devices the server uses and :func:`resolve` which NVML devices those are, and meters only them; a TP4
candidate on an 8-GPU host is charged for its 4 GPUs, not the host's 8. The devices are, in order:

- ``CUDA_VISIBLE_DEVICES`` of the launch spec's environment (``spec.env``), else of gauntlet's own
  environment when ``host.env_passthrough`` passes it to the server; its entries are indices or UUIDs
  (``GPU-8f2...``, a unique prefix is enough, as CUDA accepts). The server uses the first TP x DP of them.
- otherwise vLLM's default placement: the first TP x DP devices (TP x DP local to the head node).

An index is CUDA's: vLLM numbers devices in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``), the order
NVML's indices follow. MIG instances are refused (NVML's energy counter is the physical GPU's). A
multi-node candidate is metered on every node (:mod:`launch.node_energy`): each node's share of the ranks
(:func:`node_ranks`, TP x PP over the nodes a replica spans, else TP x PP x its local DP) among the GPUs its
agent reports, chosen the same way::

    request = device_request(spec, environ={})      # DeviceRequest(visible=None, count=4, nodes=1, ...)
    resolve(request, ["GPU-a", "GPU-b", ..., "GPU-h"])   # [0, 1, 2, 3], or why it cannot be mapped
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from launch.spec import LaunchSpec

VISIBLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class DeviceRequest:
    """The devices a server's head node uses, as its launch spec says."""

    visible: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES entries; None: not set
    selected_by: str  # where that came from, in words
    count: int  # devices the head's ranks use (TP x DP local)
    nodes: int  # nodes the candidate runs on


def _flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(f"{name}="):
                return arg.split("=", 1)[1]
    return None


def _int_setting(argv: Sequence[str], config: Mapping[str, object], names: Sequence[str]) -> int | None:
    """A flag's integer value: the command line's, else the --config file's (the command line wins)."""
    raw: object = _flag(argv, names)
    if raw is None:
        raw = next((config[n.lstrip("-")] for n in names if n.startswith("--") and n[2:] in config), None)
    try:
        return int(str(raw)) if raw is not None else None
    except ValueError:
        return None


def _dashed(arg: str) -> str:
    """``--a_b=c`` as ``--a-b=c`` (a flag's name only; values and short flags unchanged)."""
    if not arg.startswith("--"):
        return arg
    name, sep, value = arg.partition("=")
    return name.replace("_", "-") + sep + value


def _normalized(argv: Sequence[str], config_yaml: str) -> tuple[list[str], Mapping[str, object]]:
    """The command's flags and its ``--config`` YAML's keys, dashed (vLLM reads ``a_b`` as ``a-b``)."""
    loaded = yaml.safe_load(config_yaml) if config_yaml.strip() else None
    config: Mapping[str, object] = (
        {str(k).replace("_", "-"): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}
    )
    return [_dashed(arg) for arg in argv], config


def node_ranks(argv: Sequence[str], config_yaml: str = "") -> int:
    """Devices one node's ranks use, from that node's command: a replica spanning ``--nnodes`` nodes puts
    TP x PP / nnodes on each (TP within a node, PP across nodes; or TP itself across nodes); otherwise a
    node holds TP x PP x its local DP (``--data-parallel-size-local``)::

        node_ranks(["-tp", "8", "--pipeline-parallel-size", "2", "--nnodes", "2"])   # 8
        node_ranks(["-tp", "4", "--data-parallel-size-local", "2"])                   # 8

    A flag spelt with underscores (``--pipeline_parallel_size``, as ``extra_args`` may render it) counts:
    vLLM's parser reads it as the dashed one.
    """
    argv, config = _normalized(argv, config_yaml)
    tp = _int_setting(argv, config, ("--tensor-parallel-size", "-tp")) or 1
    pp = _int_setting(argv, config, ("--pipeline-parallel-size", "-pp")) or 1
    nnodes = _int_setting(argv, config, ("--nnodes",)) or 1
    if nnodes > 1:
        return max(1, tp * pp // nnodes)
    dp = (
        _int_setting(argv, config, ("--data-parallel-size-local", "-dpl"))
        or _int_setting(argv, config, ("--data-parallel-size", "-dp"))
        or 1
    )
    return tp * pp * dp


def head_ranks(argv: Sequence[str], config_yaml: str = "") -> int:
    """Devices the head node's ranks use: its share of the ranks, as every node's (:func:`node_ranks`)."""
    return node_ranks(argv, config_yaml)


def used_gpus(argv: Sequence[str], config_yaml: str = "") -> int:
    """GPUs the whole candidate uses, every node together: TP x PP x DP (what it is priced on)."""
    argv, config = _normalized(argv, config_yaml)
    tp = _int_setting(argv, config, ("--tensor-parallel-size", "-tp")) or 1
    pp = _int_setting(argv, config, ("--pipeline-parallel-size", "-pp")) or 1
    return tp * pp * (_int_setting(argv, config, ("--data-parallel-size", "-dp")) or 1)


def device_request(spec: LaunchSpec, environ: Mapping[str, str]) -> DeviceRequest:
    """Which devices ``spec``'s server uses on its head node (``environ``: gauntlet's own environment,
    which the server inherits only where ``spec.env_passthrough`` passes it)."""
    count = head_ranks(spec.argv, spec.config_yaml)
    raw, source = spec.env.get(VISIBLE), f"{VISIBLE} of the launch spec"
    if raw is None and any(fnmatch.fnmatchcase(VISIBLE, g) for g in spec.env_passthrough):
        raw, source = environ.get(VISIBLE), f"{VISIBLE} passed through from gauntlet's environment"
    if raw is None:
        return DeviceRequest(None, f"vLLM's default placement (the first {count} devices)", count, spec.nodes)
    entries = tuple(e.strip() for e in raw.split(",") if e.strip())
    return DeviceRequest(entries, f"{source} ({raw})", count, spec.nodes)


def _match(entry: str, uuids: Sequence[str]) -> int | str:
    """The NVML index ``entry`` (an index or a UUID prefix) names, or why it names none."""
    if entry.isdigit():
        index = int(entry)
        return index if index < len(uuids) else f"{VISIBLE} entry {entry!r}: NVML sees {len(uuids)} GPU(s)"
    if entry.upper().startswith("MIG"):
        return (
            f"{VISIBLE} entry {entry!r} is a MIG instance: NVML's energy counter is the whole GPU's, "
            "so a MIG candidate's energy cannot be told apart"
        )
    key = entry if entry.startswith("GPU-") else f"GPU-{entry}"
    found = [i for i, uuid in enumerate(uuids) if uuid.startswith(key)]
    if len(found) == 1:
        return found[0]
    what = "matches no" if not found else f"matches {len(found)}"
    return f"{VISIBLE} entry {entry!r} {what} GPU UUID NVML lists ({', '.join(uuids)})"


def resolve(request: DeviceRequest, uuids: Sequence[str]) -> list[int] | str:
    """The NVML indices of the GPUs ``request`` uses (``uuids``: each NVML device's UUID, by index), or
    why they cannot be mapped (an entry NVML does not list, a MIG instance, fewer devices than ranks)."""
    if request.visible is None:
        if request.count > len(uuids):
            return f"the server's {request.count} ranks need {request.count} GPUs; NVML sees {len(uuids)}"
        return list(range(request.count))
    chosen: list[int] = []
    for entry in request.visible[: request.count]:
        index = _match(entry, uuids)
        if isinstance(index, str):
            return index
        chosen.append(index)
    if len(chosen) < request.count:
        return f"{request.selected_by} lists {len(chosen)} device(s) for the server's {request.count} ranks"
    return chosen
