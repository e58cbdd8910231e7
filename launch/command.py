"""What a launch spec runs as: the program resolved, the environment the server gets, the auth header.

Pipeline position: between the launch spec (:mod:`launch.spec`, pure) and the process supervisor
(:mod:`launch.supervisor`), which spawns ``resolve_argv(spec.argv, root)`` with ``child_env(spec,
os.environ)`` and polls the server with :func:`auth_headers`. Reads the file system and ``PATH``, starts
nothing::

    resolve_argv(["python", "-m", "launch.sim"], root)   # [sys.executable, "-m", "launch.sim"]
    child_env(spec, os.environ)["PATH"]                   # inherited; the host's globs (NCCL_*, ...),
                                                          # spec.env and spec.pass_env on top
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from contracts.errors import LaunchError
from contracts.secrets import ENV_REFERENCE
from launch.spec import SECRET_NAME, SERVER_API_KEY_ENV, LaunchSpec

#: Environment variables a server inherits from the orchestrator's environment (besides spec.env and
#: spec.pass_env): what a shell, Python, CUDA and the Hugging Face cache need to work on the host.
INHERITED_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_CACHE", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT",
    "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "no_proxy",
    "GAUNTLET_SIM_SPEED",  # a simulated node's hardware speed (a parallel sweep's simulated cluster)
)  # fmt: skip


def resolve_argv(argv: Sequence[str], project_root: Path) -> list[str]:
    """The argv to execute: ``python`` -> this interpreter; ``dir/prog`` -> project_root/dir/prog; else PATH.

    Symlinks are not resolved: ``.venv-vllm/bin/python`` must stay the venv's interpreter.
    """
    if not argv:
        raise LaunchError("the launch spec has an empty command line", hint="check host.entrypoint")
    head, rest = argv[0], list(argv[1:])
    if head == "python":
        return [sys.executable, *rest]
    if "/" in head:
        path = Path(head) if os.path.isabs(head) else project_root / head
        if not path.exists():
            raise LaunchError(
                f"the server program {head} does not exist (looked at {path})",
                hint="build it first (for the cpu host: make vllm-cpu) or fix host.entrypoint",
            )
        return [str(path), *rest]
    found = shutil.which(head)
    if found is None:
        raise LaunchError(
            f"the server program {head!r} is not on PATH",
            hint="install it, activate its environment, or give host.entrypoint a path",
        )
    return [found, *rest]


#: vLLM's engine processes talk over ZMQ IPC sockets it names ``$VLLM_RPC_BASE_PATH/<uuid4>`` (default: the
#: temp dir) and never removes: 2,950 were left in this machine's /tmp after 18 hours of tests. The supervisor
#: points each server at a directory of its own (:func:`rpc_dir`) and empties it at teardown.
RPC_BASE_ENV = "VLLM_RPC_BASE_PATH"


def rpc_dir(root: Path, port: int) -> Path:
    """The IPC socket directory of the server on ``port``: one per user and port, so that a later process
    that adopts the server (rollback, ``stop``) finds it again; at most one server holds a port at a time.
    Short (``/tmp/gauntlet-rpc-0-8000/<36-character uuid>``): a Unix socket's path is at most 107 bytes."""
    return root / f"gauntlet-rpc-{os.getuid()}-{port}"


def sets_rpc_dir(spec: LaunchSpec, environ: Mapping[str, str]) -> bool:
    """The spec, or the host's passed-through variables, already choose vLLM's IPC directory (the user's
    choice is kept, and never emptied)."""
    return (
        RPC_BASE_ENV in spec.env
        or RPC_BASE_ENV in spec.pass_env
        or RPC_BASE_ENV in passed_through(spec.env_passthrough, environ)
    )


def clear_rpc_dir(path: Path) -> tuple[int, str | None]:
    """Remove the sockets a stopped server left in ``path``, then the directory if it is empty: (sockets
    removed, what was left and why, or None). Never raises: a socket file left behind is untidy, not a
    reason to fail a teardown whose processes are gone."""
    removed = 0
    if not path.is_dir():
        return 0, None
    try:
        entries = list(path.iterdir())
    except OSError as exc:
        return 0, f"could not read {path}: {exc}"
    for entry in entries:
        try:
            if stat.S_ISSOCK(entry.lstat().st_mode):
                entry.unlink()
                removed += 1
        except OSError as exc:
            return removed, f"could not remove {entry}: {exc}"
    try:
        path.rmdir()
    except OSError as exc:
        return removed, f"{path} kept: {exc.strerror or exc}"
    return removed, None


def passed_through(globs: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` whose names match one of ``globs`` (case-sensitive shell globs), never a
    secret: a name :data:`launch.spec.SECRET_NAME` matches (HF_TOKEN, WANDB_API_KEY) is passed only by
    name, through service.pass_env."""
    return {
        name: value
        for name, value in environ.items()
        if any(fnmatchcase(name, glob) for glob in globs) and not SECRET_NAME.search(name)
    }


def env_value(name: str, value: str, environ: Mapping[str, str]) -> str:
    """A value of spec.env as the server gets it: each ``<from $VAR>`` replaced by ``environ[VAR]`` (a
    secret read through ``${oc.env:VAR}``, written nowhere); refuses a variable that is not set."""

    def value_of(match: re.Match[str]) -> str:
        variable = match.group(1)
        if variable not in environ:
            raise LaunchError(
                f"the server's {name} takes its value from ${variable}, which is not set in gauntlet's "
                "environment",
                hint=f"export {variable} before the sweep, rollback or stop (its value is never written)",
            )
        return environ[variable]

    return ENV_REFERENCE.sub(value_of, value)


def child_env(spec: LaunchSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: a small inherited base, the host's passed-through globs, then spec.env
    (``<from $VAR>`` read from ``environ``), then spec.pass_env by name, then the API key (from the
    variable ``spec.api_key_env`` names) as vLLM's VLLM_API_KEY."""
    env = {name: environ[name] for name in INHERITED_ENV if name in environ}
    env.update(passed_through(spec.env_passthrough, environ))
    env.update({name: env_value(name, value, environ) for name, value in spec.env.items()})
    env.update({name: environ[name] for name in spec.pass_env if name in environ})
    key = spec.api_key(environ)
    if key is not None:
        env[SERVER_API_KEY_ENV] = key
    return env


def auth_headers(spec: LaunchSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The Authorization header the served API needs (none when the spec has no API key)."""
    key = spec.api_key(environ)
    return {"Authorization": f"Bearer {key}"} if key is not None else {}
