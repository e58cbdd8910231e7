"""``python -m launch.sim``: the simulated vLLM server (see :mod:`launch.sim`).

The heap its imports made is frozen before it serves (``gc.freeze``): a full collection then walks only
what the server made since, not every module's objects. Unfrozen, one took about 100 wall ms every few
runs of a 128-request wave, 2 virtual s at 20x, and the requests behind it missed their steps
(``benchmarks/wave_arrival.py --repeats``; docs/measurements/search-quality.md).
"""

import gc
import sys

from launch.sim.server import main

gc.collect()
gc.freeze()
sys.exit(main())
