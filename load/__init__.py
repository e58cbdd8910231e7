"""The load runner: reproducible streaming workloads timed at the user-visible boundary.

``run_profile`` (in :mod:`load.runner`) is the entry point the sweep calls; the modules behind
it are pure (``workload``, ``sse``, ``stats``, ``summary``, ``metrics``) except ``client`` (sockets) and
``progress`` (the terminal).
"""

from load.runner import run_profile

__all__ = ["run_profile"]
