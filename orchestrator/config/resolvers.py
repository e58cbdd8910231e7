"""Values the launcher presets (``conf/hydra/launcher/*.yaml``) compute from the composed config.

Pipeline position: registered as OmegaConf resolvers by :func:`orchestrator.config.compose.register_configs`
(``${gauntlet.job_minutes:}``, ``${gauntlet.gpus_per_node:}``); pure, with no Hydra here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def gpus_per_node(*, _root_: Any) -> int:
    """A node's GPUs: ``host.gpus_per_node`` on a multi-node host, else ``host.gpu_count``."""
    host = _root_.host
    return int(host.get("gpus_per_node") or 0) or int(host.gpu_count)


def job_minutes(
    startup_timeout_s: float, profiles: Sequence[tuple[int, float]], *, margin: float = 1.25
) -> int:
    """A scheduler time limit for one job, in minutes: three launches (the node's baseline, the candidate,
    the baseline block after it), each at most every profile given as (repeats, time_limit_s), with a
    margin (an over-estimate: a block runs only the recovery profiles)."""
    load_s = sum(repeats * limit_s for repeats, limit_s in profiles)
    seconds = 3 * (startup_timeout_s + load_s) * margin
    return max(10, int(seconds // 60) + 1)
