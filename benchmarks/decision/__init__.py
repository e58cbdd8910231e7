"""The decision-quality benchmark's parts; ``benchmarks/decision_quality.py`` is its driver (the command line,
the work split over seeds and noise models).

``scenarios`` (what is measured and the bars each verdict rate is held to) ▶ ``replays`` (the simulator's
engine model replayed in-process, once per engine, profile and pool index) ▶ ``synthetic_sweep`` (a sweep
directory written run by run with the noise model's draws, then judged as a sweep is) ▶ ``tables`` (the
rows the driver prints).
"""
