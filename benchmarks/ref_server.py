"""The local reference server (``benchmarks/sse_server.py``) in its own process pinned to its core(s), as the
benchmarks that measure a client against it start it (``load_client.py``, ``fleet.py``, ``peers.py``).

``pinned`` is the one way those benchmarks pin a process: ``taskset -c CORES`` when cores are given and
taskset is installed, else the command as it is.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).resolve().parent / "sse_server.py"


def pinned(cores: str | int | None, argv: list[str]) -> list[str]:
    """``argv`` under ``taskset -c CORES`` (a list such as ``1-2``, or one core number)."""
    pin = cores is not None and cores != "" and shutil.which("taskset")
    return ["taskset", "-c", str(cores), *argv] if pin else argv


class RefServer:
    """The reference server in its own pinned process, on a free port; ``flags`` go to sse_server.py, its
    stderr to ``stderr`` (a ``subprocess`` destination)."""

    def __init__(self, cores: str | int | None, *flags: str, stderr: int | IO[Any]) -> None:
        argv = [sys.executable, str(SERVER), "--port", "0", *flags]
        self.proc = subprocess.Popen(pinned(cores, argv), stdout=subprocess.PIPE, stderr=stderr, text=True)
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline().split()[-1])}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
