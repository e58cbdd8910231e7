"""``hydra/sweeper=gauntlet``: Hydra instantiates plugins only from ``hydra_plugins``, so the class is named
here; the sweep itself is :class:`orchestrator.app.sweeper.SweeperCore`."""

from __future__ import annotations

from orchestrator.app.sweeper import SweeperCore, register_sweeper

register_sweeper()


class GauntletSweeper(SweeperCore):
    """A gauntlet sweep as a Hydra sweeper (selected by ``conf/config.yaml``)."""
