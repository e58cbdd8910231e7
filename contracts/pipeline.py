"""Pipeline parallelism, a vLLM flag without a typed field: read where a candidate's GPUs are counted.

Pipeline position: under the stages, beside :mod:`contracts.schema` (read by the configuration's placement
check, doctor's memory fit, the search's pruning and its GPU-hours, and the simulator). gauntlet renders
``--pipeline-parallel-size`` from a candidate's ``extra_args`` as any other flag (a search varies it as
``extra_args.pipeline_parallel_size``). On one node vLLM runs each data-parallel replica as TP x PP
workers, one GPU each, and splits the model's layers over the PP stages: a candidate holds TP x PP x DP
GPUs, and each GPU holds about 1/PP of the weights and of the KV cache that TP alone leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: vLLM's flag (``--pipeline-parallel-size``; ``extra_args`` may spell it with underscores or ``--``).
PIPELINE_FLAG = "pipeline-parallel-size"


def pipeline_parallel_size(*extra_args: Mapping[str, Any]) -> int:
    """The pipeline-parallel size the flags set (1: not set, vLLM's default); a later mapping wins (the
    service's ``extra_args``, then the candidate's, as the command line merges them). A value that is no
    whole number is left to vLLM to refuse and counts as 1 here.

    >>> pipeline_parallel_size({"pipeline_parallel_size": 2}), pipeline_parallel_size({"block-size": 16})
    (2, 1)
    """
    size = 1
    for args in extra_args:
        for name, value in args.items():
            if name.removeprefix("--").replace("_", "-") != PIPELINE_FLAG or isinstance(value, bool):
                continue
            try:
                size = int(value)
            except (TypeError, ValueError):
                continue
    return size


def gpus_held(tensor_parallel_size: int, data_parallel_size: int, extra_args: Mapping[str, Any]) -> int:
    """The GPUs a candidate holds on its host: TP x PP x DP.

    >>> gpus_held(2, 4, {}), gpus_held(2, 2, {"pipeline-parallel-size": 2})
    (8, 8)
    """
    return tensor_parallel_size * pipeline_parallel_size(extra_args) * data_parallel_size
