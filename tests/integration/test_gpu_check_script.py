"""scripts/gpu-check.sh (``make gpu-check``) on a machine without an NVIDIA driver: one clear "no NVIDIA
driver" line per check and the distinct exit code 3, within seconds (nothing else runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _driver() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_driver(), reason="this machine has an NVIDIA driver: the checks would run for real")
def test_gpu_check_without_a_driver() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPU_CHECK_PYTHON": sys.executable},
        check=False,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 3, done.stdout + done.stderr
    assert [ln.split(":")[0] for ln in lines] == ["energy", "mapping", "doctor", "gpu-check"]
    assert all("no NVIDIA driver" in ln for ln in lines), lines
