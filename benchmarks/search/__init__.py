"""The search-quality benchmark's parts; ``benchmarks/search_quality.py`` is its driver (the command line).

``scoring`` (pure: the SLO margin, the exact capacity, the within-5% rule, the summary against the goal,
the table) ▶ ``surface`` (the simulator's true surface: every point's exact capacity, the brute force's
cached table) ▶ ``runner`` (the experiment composed, a trial's job measured in-process on the surface, one
seed's search judged by the truth).
"""
