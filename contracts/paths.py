"""Where the project's own files are: the checkout root and the config tree (``conf/``).

A shared contract so that no stage works out the project root from its own file's depth.
"""

from __future__ import annotations

from pathlib import Path

#: The checkout (or installed source tree) that holds ``conf/`` and the packages.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: The config tree: Hydra's primary search path.
CONF_DIR = PROJECT_ROOT / "conf"
