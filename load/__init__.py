"""The load runner: reproducible streaming workloads timed at the user-visible boundary.

``run_profile`` (in :mod:`load.runner`) is the entry point the sweep calls. It wires four parts: the
planner (``workload``, ``plan``, pure; ``prompts`` asks the server's ``/tokenize``), the dispatcher
(``dispatch`` over ``client``, the hot path and the only sockets that stream), the collector (``collect``
over ``sse``, ``summary``, ``stats``, ``metrics``, all pure) and the writer (``write``); ``scrape`` reads
``/metrics`` and ``progress`` draws the live line.
"""

from load.runner import run_profile

__all__ = ["run_profile"]
