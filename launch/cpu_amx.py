"""AMX permission for real vLLM on CPU: installed into gauntlet's vLLM CPU environment, not used by gauntlet.

Pipeline position: host plumbing of the ``cpu`` host (conf/host/cpu.yaml). ``make vllm-cpu`` copies this file
into ``.venv-vllm``'s site-packages as ``gauntlet_cpu_amx.py`` with a ``.pth`` file that imports it, so every
interpreter of that environment runs :func:`request_amx_permission` at start: the API server, its
EngineCore and the workers vLLM spawns (spawned, so a fresh interpreter each; the permission is per
process and an ``exec`` clears it).

Why: on a CPU with AMX (Intel Sapphire Rapids and later), vLLM 0.32.0 picks its AMX attention kernel for
bf16 (``vllm/v1/attention/backends/cpu_attn.py: _get_attn_isa``) but never asks Linux for the AMX tile
state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, which ``torch.cpu._init_amx`` and oneDNN's
own first AMX use do). A worker whose first AMX instruction comes from that kernel dies with SIGILL
(``Worker proc VllmWorker-0 died unexpectedly (exit code: -4)``): seen on the first request with a prompt
of 1-3 tokens, while a longer first prompt went through oneDNN first and got the permission (2026-12-05,
an AMX machine, kernel 6.18). Standard library only; three arch_prctl calls at most; nothing happens on
another OS or CPU, and a refusal is never an error (vLLM then behaves as it would without this file).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

#: x86-64 Linux: the arch_prctl system call and its extended-state permission codes (asm/prctl.h).
SYS_ARCH_PRCTL = 158
ARCH_GET_XCOMP_SUPP = 0x1021
ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
#: The AMX tile data state component (XFEATURE_XTILEDATA).
XTILEDATA = 18


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _arch_prctl(code: int, arg: int | ctypes.c_ulong) -> int | None:
    libc = _libc()
    if libc is None:
        return None
    try:
        value = ctypes.byref(arg) if isinstance(arg, ctypes.c_ulong) else ctypes.c_ulong(arg)
        return int(libc.syscall(SYS_ARCH_PRCTL, code, value))
    except AttributeError:
        return None


def _mask(code: int) -> int | None:
    out = ctypes.c_ulong(0)
    return int(out.value) if _arch_prctl(code, out) == 0 else None


def amx_state() -> tuple[bool, bool]:
    """(the OS offers this process AMX tile data, this process holds the permission to use it)."""
    supported, permitted = _mask(ARCH_GET_XCOMP_SUPP), _mask(ARCH_GET_XCOMP_PERM)
    bit = 1 << XTILEDATA
    return supported is not None and bool(supported & bit), permitted is not None and bool(permitted & bit)


def request_amx_permission() -> bool:
    """Ask for AMX tile data where the OS offers it; True when this process then holds the permission."""
    supported, permitted = amx_state()
    if supported and not permitted:
        return _arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) == 0  # 0: granted
    return permitted


#: The module's name in the vLLM CPU environment (``make vllm-cpu``), where importing it asks at once.
INSTALLED_AS = "gauntlet_cpu_amx"

if __name__ == INSTALLED_AS:
    request_amx_permission()
