"""What the load runner's tests against the reference server share (test_load_ref_server, test_load_fleet):
the type of the ``ref_server`` fixture (conftest.py) and one profile run against its URL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.results import ProfileSummary
from contracts.schema import WorkloadConfig
from load import run_profile

#: The ``ref_server`` fixture: start the reference server with these flags, get its base URL.
Server = Callable[..., str]


def run(url: str, out: Path, wl: WorkloadConfig, **kw: Any) -> ProfileSummary:
    """Run ``wl`` against ``url`` into ``out`` as candidate ``c`` (fingerprint ``f``, repeat 0)."""
    return run_profile(
        url,
        "ref-model",
        wl,
        candidate="c",
        fingerprint="f",
        repeat=0,
        out_dir=out,
        backend="sim",
        host="loopback",
        progress=False,
        **kw,
    )
