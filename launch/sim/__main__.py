"""``python -m launch.sim``: the simulated vLLM server (see :mod:`launch.sim`)."""

import sys

from launch.sim.server import main

sys.exit(main())
