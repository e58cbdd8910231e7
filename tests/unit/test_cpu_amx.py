"""launch/cpu_amx.py: the AMX permission the vLLM CPU environment asks for at every interpreter start."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from launch import cpu_amx

ROOT = Path(__file__).resolve().parents[2]
BIT = 1 << cpu_amx.XTILEDATA


class FakeKernel:
    """arch_prctl as a table: what the OS supports, what this process holds, which requests came."""

    def __init__(self, supported: int | None, permitted: int | None) -> None:
        self.masks = {cpu_amx.ARCH_GET_XCOMP_SUPP: supported, cpu_amx.ARCH_GET_XCOMP_PERM: permitted}
        self.requests: list[int] = []

    def __call__(self, code: int, arg: object) -> int | None:
        if code == cpu_amx.ARCH_REQ_XCOMP_PERM:
            assert isinstance(arg, int)
            self.requests.append(arg)
            supported = self.masks[cpu_amx.ARCH_GET_XCOMP_SUPP]
            if supported is None or not supported & (1 << arg):
                return -1
            self.masks[cpu_amx.ARCH_GET_XCOMP_PERM] = (self.masks[cpu_amx.ARCH_GET_XCOMP_PERM] or 0) | (
                1 << arg
            )
            return 0
        mask = self.masks[code]
        if mask is None:  # another OS or CPU: the call is not made, or fails
            return None
        assert isinstance(arg, ctypes.c_ulong)  # the out-parameter
        arg.value = mask
        return 0


@pytest.mark.parametrize(
    ("supported", "permitted", "requested", "holds"),
    [
        (0x600E7, 0x200E7, [cpu_amx.XTILEDATA], True),  # AMX offered, not yet held: asked for once
        (0x600E7, 0x600E7, [], True),  # already held (oneDNN asked, or a second import): not asked again
        (0x200E7, 0x200E7, [], False),  # a CPU without AMX: nothing asked
        (None, None, [], False),  # not x86-64 Linux: nothing asked, nothing raised
    ],
)
def test_permission_is_asked_for_only_where_amx_is_offered_and_not_held(
    supported: int | None,
    permitted: int | None,
    requested: list[int],
    holds: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = FakeKernel(supported, permitted)
    monkeypatch.setattr(cpu_amx, "_arch_prctl", kernel)
    assert cpu_amx.request_amx_permission() is holds
    assert kernel.requests == requested


def test_a_fresh_interpreter_holds_amx_exactly_where_the_os_offers_it() -> None:
    """The real system call, in a child (so the test process is left as it was): after the request the
    permission is held if and only if the OS offers AMX; on a machine without it both are False."""
    code = (
        "from launch import cpu_amx; before = cpu_amx.amx_state(); "
        "held = cpu_amx.request_amx_permission(); print(before[0], before[1], held)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    supported, _, held_after = (word == "True" for word in out)
    assert held_after is supported


def test_importing_it_in_gauntlet_asks_for_nothing() -> None:
    """Only the installed copy (gauntlet_cpu_amx, in the vLLM environment) asks at import."""
    code = "import launch.cpu_amx as m; print(m.amx_state()[1])"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert out == "False"
