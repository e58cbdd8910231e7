"""The search-quality benchmark's parts; ``benchmarks/search_quality.py`` is its driver (the command line),
``benchmarks/search_launched.py`` the launched run with failure injected.

``scoring`` (pure: the SLO margin, the exact capacity, the within-5% rule) ▶ ``surface`` (the simulator's
true surface: every point's exact capacity, the brute force's cached table) ▶ ``constrained`` (the
constrained truth: each point's gated requirements, the best point the gates would accept; the screen's
noisy sizes by the product's rule) ▶ ``spaces`` (the spaces measured, two written before any tuning) ▶
``methods`` (TPE, random, a grid at one budget) ▶ ``runner`` (a trial's job measured in-process, one seed's
search judged) ▶ ``goals`` (pure: the answers against the truth, the equal-budget accounting, the goals);
``launched`` (pure: a launched search's record against the failure rule).
"""
