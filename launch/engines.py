"""Ready across ranks: a multi-node server is ready only when its ``/metrics`` reports every engine.

Pipeline position: under :mod:`launch.readiness`, whose readiness poll of a multi-node server asks
``/metrics`` after ``/health`` and ``/v1/models``. vLLM's head labels every series with its engine
(``engine="0"`` .. ``engine="D-1"``, one per data-parallel rank, the remote nodes' included) once every rank
has joined (docs/multinode.md, "Real vLLM across nodes"); a rank missing there is a node that has not
joined, or one the head does not count. Pure: the text of ``/metrics`` and the spec's command line in, the
missing engines out::

    >>> missing_engines('vllm:num_requests_running{engine="0",model_name="m"} 0', 2)
    ['1']
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.dp_balance import engines_in


def data_parallel_size(argv: Sequence[str]) -> int:
    """The ``--data-parallel-size`` of a server's command line (1 where it is not given).

    >>> data_parallel_size(["vllm", "--data-parallel-size", "4"]), data_parallel_size(["vllm"])
    (4, 1)
    """
    for flag in ("--data-parallel-size", "-dp"):
        if flag in argv[:-1]:
            return int(argv[list(argv).index(flag) + 1])
    return 1


def missing_engines(metrics: str, dp_size: int) -> list[str]:
    """The engines ``0`` .. ``dp_size - 1`` that ``metrics`` does not report, in order."""
    seen = engines_in(metrics)
    return [str(k) for k in range(dp_size) if str(k) not in seen]
