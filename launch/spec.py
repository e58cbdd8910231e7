"""Launch spec rendering (pure): service + candidate + host -> the exact vLLM command, env and config file.

Pipeline position: the first arrow after config validation. The spec is what the launcher starts, what the
journal records and what a restore is checked against: its SHA-256 fingerprint covers the argv, the
environment, the names of passed-through secrets and the rendered ``--config`` YAML, and is the same on
any machine for the same inputs. No shell is involved anywhere.

Example::

    spec = render_spec(service, candidate, host)
    spec.argv          # ('vllm', 'serve', 'deepseek-ai/DeepSeek-V4-Flash', '--served-model-name', ...)
    spec.fingerprint   # 'sha256:3f0c...'
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from contracts.dp_balance import api_port, mode_refusal
from contracts.errors import HarnessError, LaunchError, SpecError, SpecTamperedError
from contracts.multinode import candidate_layout
from contracts.network import network_env, wrap, wrapped_interface
from contracts.pipeline import pipeline_parallel_size
from contracts.placement import NodeLayout
from contracts.ray_backend import RAY_ENV, backend_problems, ray_commands, ray_port
from contracts.schema import CandidateConfig, HostConfig, ServiceConfig
from contracts.secrets import ENV_REFERENCE, referenced
from launch.api_servers import balanced_flags, with_port

SPEC_VERSION = 1

#: Environment variable names whose values are secrets: they may only be passed through by name.
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL)", re.IGNORECASE)
#: vLLM flags whose values are secrets.
SECRET_FLAGS = frozenset({"api-key"})
#: The variable vLLM reads its API key from when --api-key is not given (the server gets the key there).
SERVER_API_KEY_ENV = "VLLM_API_KEY"
#: vLLM's CPU backend binds each worker's OpenMP threads to the cores listed here, one list per local rank
#: separated by "|", ranks in [DP, PP, TP] order ("auto" needs a NUMA node per rank; "0|1" works on one).
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
#: Where a multi-node spec names its head node's address: known only at launch (the node SLURM gives the
#: job), so the spec and its fingerprint carry this placeholder and the launcher puts the address in.
HEAD_ADDRESS = "{head_address}"


#: How to give the API key's variable a value without the line break a file's last line brings.
API_KEY_HINT = "strip it: export {name}=\"$(tr -d '\\r\\n' < KEYFILE)\" (the value is never shown)"


def api_key_problem(name: str, value: str) -> str | None:
    """What is wrong with the API key in ``$name`` (its value is never shown), or None: a line break, which
    would end the Authorization header early (a key read from a file with its newline)."""
    if "\r" not in value and "\n" not in value:
        return None
    body = value.rstrip("\r\n")
    where = "a trailing newline" if body and "\n" not in body and "\r" not in body else "a line break"
    return f"the API key in ${name} (service.api_key_env) has {where}: no request header can carry it"


def _json(value: Any) -> str:
    """Canonical compact JSON: the same bytes on every machine."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping | list | tuple):
        return _json(value)
    return str(value)


def render_flag(name: str, value: Any) -> list[str]:
    """One vLLM flag as argv items: true -> --flag, false -> --no-flag, None -> nothing, JSON for mappings."""
    flag = name if name.startswith("--") else f"--{name}"
    if value is None:
        return []
    if value is True:
        return [flag]
    if value is False:
        return [f"--no-{flag[2:]}"]
    return [flag, _scalar(value)]


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one server, and the fingerprint that identifies it."""

    candidate: str
    host: str
    host_kind: str
    argv: tuple[str, ...]
    env: dict[str, str]
    pass_env: tuple[str, ...]
    config_yaml: str
    bind_host: str
    port: int
    served_model_name: str
    max_model_len: int
    startup_timeout_s: float
    shutdown_grace_s: float
    gpu_release_timeout_s: float
    time_scale: float
    fingerprint: str = field(default="")
    #: Name of gauntlet's environment variable holding the served API's key (None: no key). The value is
    #: read when needed (:meth:`api_key`) and never stored.
    api_key_env: str | None = None
    #: Globs of gauntlet's environment variables the server inherits (host.env_passthrough; secrets never
    #: match). Host plumbing (NCCL_*, VLLM_*), not the candidate: outside the fingerprint, as the
    #: inherited PATH is.
    env_passthrough: tuple[str, ...] = ()
    #: The other nodes' commands of a candidate spanning nodes (node k = index + 1; empty: one node). The
    #: head's is ``argv``; each follower runs ``--headless`` and meets the head at ``HEAD_ADDRESS`` (under
    #: Ray, ``multinode_backend: ray``, a follower is the node's ``ray start``: contracts.ray_backend).
    followers: tuple[tuple[str, ...], ...] = ()
    #: The nice value of the server's scheduling group (host.server_autogroup_nice; None: left alone). How
    #: the host schedules the server, not what the server is: outside the fingerprint.
    autogroup_nice: int | None = None

    @property
    def nodes(self) -> int:
        """Nodes the server runs on (1: a single-node spec)."""
        return 1 + len(self.followers)

    @property
    def rpc_port(self) -> int | None:
        """The port a multi-node server's ranks meet on at the head (None: a single-node spec)."""
        if (ray := ray_port(self.followers)) is not None:  # Ray's cluster port (contracts.ray_backend)
            return ray
        for flag in ("--data-parallel-rpc-port", "--master-port"):
            if self.followers and flag in self.argv[:-1]:
                return int(self.argv[self.argv.index(flag) + 1])
        return None

    @property
    def interface(self) -> str | None:
        """The network interface a multi-node spec's nodes use (host.network.interface; None: not set):
        the head's address on it is where the followers meet the head."""
        return wrapped_interface(self.argv) if self.followers else None

    def node_argv(self, node: int) -> tuple[str, ...]:
        """The command of node ``node`` (0: the head)."""
        return self.argv if node == 0 else self.followers[node - 1]

    def node_fingerprints(self) -> list[str]:
        """Each node's own fingerprint: its command with the spec's environment and config (the head's is
        the whole spec's on one node)."""
        return [
            _digest(
                fingerprint_payload(
                    self.node_argv(k), self.env, self.pass_env, self.config_yaml, api_key_env=self.api_key_env
                )
            )
            for k in range(self.nodes)
        ]

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.bind_host in ("0.0.0.0", "") else self.bind_host
        return f"http://{host}:{self.port}"

    def command_line(self) -> str:
        """The argv as one shell-quoted line, for people to read or paste (gauntlet never uses a shell)."""
        return shlex.join(self.argv)

    def env_line(self) -> str:
        shown = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        shown += [f"{k}=<from environment>" for k in self.pass_env]
        return " ".join(shown)

    def fingerprinted_bytes(self) -> bytes:
        return fingerprint_payload(
            self.argv,
            self.env,
            self.pass_env,
            self.config_yaml,
            api_key_env=self.api_key_env,
            followers=self.followers,
        )

    def api_key(self, environ: Mapping[str, str]) -> str | None:
        """The served API's key from ``environ`` (None when the spec needs none); refuses a missing one, and
        one with a line break (no header can carry it: the harness's input, never the server's fault)."""
        if self.api_key_env is None:
            return None
        value = environ.get(self.api_key_env, "")
        if not value:
            raise LaunchError(
                f"service.api_key_env names {self.api_key_env}, which is not set in gauntlet's environment",
                hint=f"export {self.api_key_env}=<the key> before the sweep (it is never written anywhere)",
            )
        if (problem := api_key_problem(self.api_key_env, value)) is not None:
            raise HarnessError(problem, hint=API_KEY_HINT.format(name=self.api_key_env))
        return value

    def to_json(self) -> str:
        data = asdict(self)
        if data["api_key_env"] is None:
            del data["api_key_env"]  # specs without a key are written as before
        if not data["env_passthrough"]:
            del data["env_passthrough"]  # so are specs that pass nothing through
        else:
            data["env_passthrough"] = list(self.env_passthrough)
        if self.autogroup_nice is None:
            del data["autogroup_nice"]  # as are specs that leave the scheduler alone
        if not self.followers:
            del data["followers"]  # single-node specs are written as before
        else:
            data["followers"] = [list(argv) for argv in self.followers]
        data["spec_version"] = SPEC_VERSION
        data["argv"] = list(self.argv)
        data["pass_env"] = list(self.pass_env)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def parse_json(cls, text: str, *, source: str = "<spec>") -> tuple[LaunchSpec, str]:
        """Read a recorded spec without trusting it: the spec as written and the fingerprint it claims."""
        try:
            data = json.loads(text)
            data.pop("spec_version", None)
            recorded = str(data.pop("fingerprint"))
            spec = cls(
                **{
                    **data,
                    "argv": tuple(data["argv"]),
                    "pass_env": tuple(data["pass_env"]),
                    "env": dict(data["env"]),
                    "env_passthrough": tuple(data.get("env_passthrough", ())),
                    "followers": tuple(tuple(argv) for argv in data.get("followers", ())),
                }
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise SpecError(
                f"{source}: not a launch spec ({exc})", hint="re-render it with `python -m orchestrator plan`"
            ) from exc
        return spec, recorded

    @classmethod
    def read(cls, path: Path) -> LaunchSpec:
        """Read a recorded spec file (``spec.json``), refusing one that no longer matches its fingerprint."""
        return cls.from_json(path.read_text(), source=str(path))

    @classmethod
    def from_json(cls, text: str, *, source: str = "<spec>") -> LaunchSpec:
        """Read a recorded spec; refuses one whose content no longer matches its recorded fingerprint."""
        spec, recorded = cls.parse_json(text, source=source)
        actual = _digest(spec.fingerprinted_bytes())
        if actual != recorded:
            raise SpecTamperedError(
                f"{source}: content does not match its recorded fingerprint {recorded} "
                f"(it hashes to {actual})",
                hint="the recorded spec was edited; restore it from the sweep's copy or re-run the sweep",
            )
        return _with_fingerprint(spec)


def fingerprint_payload(
    argv: tuple[str, ...],
    env: Mapping[str, str],
    pass_env: tuple[str, ...],
    config_yaml: str,
    *,
    api_key_env: str | None = None,
    followers: tuple[tuple[str, ...], ...] = (),
) -> bytes:
    """The exact bytes the fingerprint is taken over (secret values are never part of them; the name of
    the API key's variable is, when there is one, so specs without a key keep their fingerprints; so are
    the followers' commands, when there are any, so single-node specs keep theirs)."""
    payload: dict[str, Any] = {
        "argv": list(argv),
        "env": dict(env),
        "pass_env": sorted(pass_env),
        "config_yaml": config_yaml,
    }
    if api_key_env is not None:
        payload["api_key_env"] = api_key_env
    if followers:
        payload["followers"] = [list(argv) for argv in followers]
    return _json(payload).encode("ascii")


def _digest(payload: bytes) -> str:
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def _with_fingerprint(spec: LaunchSpec) -> LaunchSpec:
    return replace(spec, fingerprint=_digest(spec.fingerprinted_bytes()))


def speculative_json(candidate: CandidateConfig) -> dict[str, Any] | None:
    spec = candidate.speculative
    if spec is None:
        return None
    out: dict[str, Any] = {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "draft_sample_method": spec.draft_sample_method,
    }
    if spec.model is not None:
        out["model"] = spec.model
    out.update(spec.extra)
    return out


def vllm_flags(service: ServiceConfig, candidate: CandidateConfig) -> list[tuple[str, Any]]:
    """The (flag, value) pairs of one candidate on one service, in a fixed order."""
    flags: list[tuple[str, Any]] = [
        ("served-model-name", service.served_model_name),
        ("revision", service.revision),
        ("host", service.bind_host),
        ("port", service.port),
        ("tensor-parallel-size", candidate.tensor_parallel_size),
        ("data-parallel-size", candidate.data_parallel_size),
        # vLLM's defaults are off; only "on" is rendered so the command reads as a difference.
        ("enable-expert-parallel", True if candidate.enable_expert_parallel else None),
        ("enable-eplb", True if candidate.enable_eplb else None),
        ("eplb-config", candidate.eplb_config or None),
        ("speculative-config", speculative_json(candidate)),
        ("moe-backend", candidate.moe_backend),
        ("gpu-memory-utilization", candidate.gpu_memory_utilization),
        ("max-num-batched-tokens", candidate.max_num_batched_tokens),
        ("max-num-seqs", candidate.max_num_seqs),
        ("max-model-len", service.max_model_len),
        ("kv-cache-dtype", candidate.kv_cache_dtype or service.kv_cache_dtype),
        ("reasoning-parser", service.reasoning_parser),
        ("seed", service.seed),
    ]
    fixed = {name for name, _ in flags}
    extra = {**service.extra_args, **candidate.extra_args}
    for name in sorted(extra):
        key = name.removeprefix("--")
        if (
            key.replace("_", "-") in fixed
        ):  # vLLM's parser reads --tensor_parallel_size as --tensor-parallel-size
            raise SpecError(
                f"extra_args sets --{key}, which gauntlet renders from a typed field",
                hint=f"set the typed field instead of extra_args[{name!r}]",
            )
        if key in SECRET_FLAGS:
            raise SpecError(
                f"extra_args sets --{key}: a secret must not be written in a config",
                hint="vLLM reads the API key from VLLM_API_KEY: list it in service.pass_env",
            )
        flags.append((key, extra[name]))
    return flags


def render_config_yaml(flags: list[tuple[str, Any]]) -> str:
    """vLLM's ``--config`` file for the same flags: keys are flag names, nested values JSON (valid YAML).

    False is written in its ``no-`` form: ``vllm serve`` silently drops ``enable-prefix-caching: false``.
    """
    lines = ["# vLLM --config file rendered by gauntlet; equivalent to the flags of the command line."]
    for name, value in flags:
        if value is None:
            continue
        if value is False:
            lines.append(f"no-{name}: true")
        else:
            lines.append(f"{name}: {_json(value)}")
    return "\n".join(lines) + "\n"


def cpu_binding(tensor_parallel_size: int, data_parallel_size: int) -> str:
    """The CPU placement of TP x DP ranks: rank r (DP-major, as vLLM numbers them) on core r.

    On a ``kind: cpu`` host a core is what a GPU is on a GPU host: ``host.gpu_count`` is the number of
    cores handed out, one per rank, as ``CUDA_VISIBLE_DEVICES`` would hand out GPUs::

        cpu_binding(1, 2)  # '0|1'   two replicas, one core each
        cpu_binding(2, 1)  # '0|1'   one replica, its two TP workers on cores 0 and 1
        cpu_binding(1, 1)  # '0'
    """
    return "|".join(str(rank) for rank in range(tensor_parallel_size * data_parallel_size))


def placement_env(candidate: CandidateConfig, host: HostConfig, pipeline: int = 1) -> dict[str, str]:
    """The environment that places ``candidate``'s ranks on ``host`` (empty where vLLM's default placement
    is right: GPU hosts use the first TP x DP devices, simulated hosts have none). On a multi-node cpu host
    every node binds the ranks it runs (its local TP x PP x DP) to its cores 0, 1, ..."""
    if host.kind != "cpu":
        return {}
    tp, dp = candidate.tensor_parallel_size, candidate.data_parallel_size
    layout = candidate_layout(tp, dp, host, pipeline_parallel_size=pipeline)
    if not isinstance(layout, str) and layout.nodes > 1:  # each node binds its own ranks to its own cores
        local = host.gpus_per_node if layout.tp_spans_nodes else tp * pipeline * layout.dp_local
        return {CPU_BIND_ENV: cpu_binding(local, 1)}
    return {CPU_BIND_ENV: cpu_binding(tp * pipeline, dp)}


def node_flags(layout: NodeLayout, node: int, rpc_port: int, balancing: str = "internal") -> list[str]:
    """The flags that place node ``node`` (0: the head) of a multi-node launch, after the candidate's own.

    DP over nodes (vLLM's multi-node data parallel): every node says its local ranks and the head's
    address and RPC port; a follower runs ``--headless`` from its first global rank. A replica spanning
    nodes, its TP or its pipeline stages (vLLM's ``--nnodes`` with the mp backend): every node says the
    node count, its rank and the head's address and port; a follower runs ``--headless``.
    """
    if balancing != "internal":  # hybrid or external: every node serves its own ranks' API
        return balanced_flags(layout, node, rpc_port, balancing, HEAD_ADDRESS)
    head = ["--headless"] if node else []
    if layout.tp_spans_nodes:
        return [*head, "--nnodes", str(layout.nodes), "--node-rank", str(node),
                "--master-addr", HEAD_ADDRESS, "--master-port", str(rpc_port)]  # fmt: skip
    start = ["--data-parallel-start-rank", str(node * layout.dp_local)] if node else []
    return [*head, *start, "--data-parallel-size-local", str(layout.dp_local),
            "--data-parallel-address", HEAD_ADDRESS, "--data-parallel-rpc-port", str(rpc_port)]  # fmt: skip


def serving_port(argv: list[str], port: int, node: int, balancing: str) -> list[str]:
    """A follower's command with its own API port under hybrid or external load balancing
    (:func:`contracts.dp_balance.api_port`)."""
    return argv if balancing == "internal" else with_port(argv, api_port(port, node))


def resolve_head(argv: tuple[str, ...], address: str) -> tuple[str, ...]:
    """``argv`` with the head node's address in place of :data:`HEAD_ADDRESS` (at launch, not in the spec),
    also inside an item (Ray's ``--address {head_address}:PORT``)."""
    return tuple(part.replace(HEAD_ADDRESS, address) for part in argv)


def render_spec(service: ServiceConfig, candidate: CandidateConfig, host: HostConfig) -> LaunchSpec:
    """Render the exact launch of ``candidate`` on ``host`` for ``service`` (pure and deterministic).

    A candidate whose TP x DP needs more than one of the host's nodes gets one command per node
    (:func:`node_flags`); one that fits a node is rendered exactly as on a one-node host.
    """
    flags = vllm_flags(service, candidate)
    if host.kind == "sim":
        sim = {**host.sim_args, **candidate.sim_args}
        flags.extend((name.removeprefix("--"), sim[name]) for name in sorted(sim))
    rendered = [part for name, value in flags for part in render_flag(name, value)]
    common = [*(part.replace("{model}", service.model) for part in host.entrypoint), *rendered]
    # A follower runs --headless, which a host's entry point may lack (the cpu host's module form).
    follower_entry = host.follower_entrypoint or host.entrypoint
    follower_common = [*(part.replace("{model}", service.model) for part in follower_entry), *rendered]
    pp = pipeline_parallel_size(service.extra_args, candidate.extra_args)
    tp, dp = candidate.tensor_parallel_size, candidate.data_parallel_size
    layout = candidate_layout(tp, dp, host, pipeline_parallel_size=pp)
    if isinstance(layout, str):
        raise SpecError(
            f"candidate {candidate.name}: {layout}", hint="change TP, PP or DP, or the host's nodes"
        )
    lb = candidate.data_parallel_load_balancing
    if (refused := mode_refusal(lb, layout, f"host '{host.name}'")) is not None:
        raise SpecError(f"candidate {candidate.name}: data_parallel_load_balancing {lb!r}", hint=refused)
    problems = backend_problems(
        candidate.multinode_backend, [service.extra_args, candidate.extra_args], layout, balancing=lb
    )
    if problems:
        raise SpecError(
            f"candidate {candidate.name}: " + "; ".join(f"{f} = {v!r}: allowed {a}" for f, v, a in problems),
            hint="set multinode_backend to mp or ray (docs/multinode.md)",
        )
    ray = layout.nodes > 1 and candidate.multinode_backend == "ray"
    if ray:  # Ray's cluster, vllm serve on the head
        argv, nodes = ray_commands(host.ray_entrypoint, common, layout, host.rpc_port)
    else:
        argv = [*common, *node_flags(layout, 0, host.rpc_port, lb)] if layout.nodes > 1 else common
        nodes = [
            [*serving_port(follower_common, service.port, k, lb), *node_flags(layout, k, host.rpc_port, lb)]
            for k in range(1, layout.nodes)
        ]
    net: dict[str, str] = {}
    if layout.nodes > 1 and (interface := host.network.interface) is not None:  # every node on that network
        argv, nodes, net = (
            wrap(argv, interface),
            [wrap(cmd, interface) for cmd in nodes],
            network_env(host.network),
        )
    followers = tuple(tuple(cmd) for cmd in nodes)
    # A binding written in a config (host, service or candidate env) wins over the computed placement.
    env = {**placement_env(candidate, host, pp), **net, **(RAY_ENV if ray else {}), **host.env, **service.env,
           **candidate.env}  # fmt: skip
    for name, value in env.items():
        if SECRET_NAME.search(name) and ENV_REFERENCE.fullmatch(value) is None:
            raise SpecError(
                f"environment variable {name} looks like a secret and has a literal value in the config",
                hint=f"remove the value and list {name} in service.pass_env; gauntlet copies it at launch",
            )
    for item in argv:
        for variable in referenced(item):
            raise SpecError(
                f"the server's command line would carry the value of ${variable}, a secret from gauntlet's "
                f"environment ({item!r}); a command line is visible to every user of the host (ps)",
                hint=f"hand it to the server through its environment: list {variable} in service.pass_env, "
                f"or write ${{oc.env:{variable}}} as a value of env",
            )
    spec = LaunchSpec(
        candidate=candidate.name,
        host=host.name,
        host_kind=host.kind,
        argv=tuple(argv),
        env=dict(sorted(env.items())),
        pass_env=tuple(sorted(set(service.pass_env))),
        config_yaml=render_config_yaml(flags),
        bind_host=service.bind_host,
        port=service.port,
        served_model_name=service.served_model_name,
        max_model_len=service.max_model_len,
        startup_timeout_s=float(host.startup_timeout_s),
        shutdown_grace_s=float(host.shutdown_grace_s),
        gpu_release_timeout_s=float(host.gpu_release_timeout_s),
        time_scale=float(host.time_scale),
        api_key_env=service.api_key_env,
        env_passthrough=tuple(host.env_passthrough),
        followers=followers,
        autogroup_nice=host.server_autogroup_nice,
    )
    return _with_fingerprint(spec)


def diff_specs(recorded: LaunchSpec, current: LaunchSpec) -> list[str]:
    """Human-readable differences between two specs (argv items, env, config lines)."""
    out: list[str] = []
    if recorded.argv != current.argv:
        a, b = list(recorded.argv), list(current.argv)
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else "<absent>"
            y = b[i] if i < len(b) else "<absent>"
            if x != y:
                flag = a[i - 1] if 0 < i < len(a) and i <= len(b) and a[i - 1] == b[i - 1] else ""
                named = f" ({flag})" if flag.startswith("--") else ""
                out.append(f"argv[{i}]{named}: recorded {x!r}, now {y!r}")
    for key in sorted(set(recorded.env) | set(current.env)):
        x2, y2 = recorded.env.get(key), current.env.get(key)
        if x2 != y2:
            out.append(f"env {key}: recorded {x2!r}, now {y2!r}")
    if recorded.api_key_env != current.api_key_env:
        out.append(f"api_key_env: recorded {recorded.api_key_env!r}, now {current.api_key_env!r}")
    if recorded.pass_env != current.pass_env:
        out.append(f"pass_env: recorded {list(recorded.pass_env)}, now {list(current.pass_env)}")
    if recorded.config_yaml != current.config_yaml:
        ra, rb = recorded.config_yaml.splitlines(), current.config_yaml.splitlines()
        out.extend(f"config: recorded {line!r}" for line in ra if line not in rb)
        out.extend(f"config: now {line!r}" for line in rb if line not in ra)
    return out
