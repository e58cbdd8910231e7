"""The simulated vLLM host: gauntlet's embedded default when there is no GPU.

``python -m launch.sim`` takes vLLM's command line (plus ``--sim-*`` flags) and speaks vLLM's HTTP API
and metrics, with timing from a scheduler model rather than a sleep per request:

- :mod:`launch.sim.profile`  the simulated hardware and model, as data (``profiles/*.json``)
- :mod:`launch.sim.model`    startup checks, memory/KV capacity, step time, acceptance, reasoning lengths
- :mod:`launch.sim.engine`   DP replicas doing continuous batching with chunked prefill and preemption
- :mod:`launch.sim.runtime`  the scaled virtual clock on the asyncio loop
- :mod:`launch.sim.server`   the HTTP layer (asyncio streams), fault injection
- :mod:`launch.sim.replay`   in-process replay of a workload in virtual time (calibration, what-if)
- :mod:`launch.sim.client`   helpers for gauntlet's side (``sim_gpu_memory``)
- :mod:`launch.sim.versus`   a profile's predictions beside a measured sweep (simulated / measured)

The model, its equations, every parameter and what it leaves out are in ``docs/simulator.md``.
"""
