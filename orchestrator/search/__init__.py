"""The search's own wing (conf/search/, docs/search.md): Optuna asks for points, the sweep measures them.

One module per concern, no import circle among them (``acyclic_siblings`` in pyproject.toml): ``loop``
(the run loop: the next point to launch, the winner at the end) over ``batch`` (a batch of trials
launched, told, recorded), ``lines`` (the console lines) and ``rules`` (pure: the stop rule, the best
point, the winner's file); ``study`` (the Optuna adapter, the one module that imports Optuna); ``prune``
(what cannot start, ruled out before anything starts) and ``plan_text`` (``plan``'s lines for a search);
``point`` (a point of the space as a candidate: one encoding, from which the typed candidate, the job's
overrides and the winner's file derive); ``checks`` (a search's settings checked alike by plan, doctor
and the sweep) and ``storage`` (the study's database: where, and whether it can be reached). The space's
expressions are parsed by Hydra's grammar in :mod:`orchestrator.config.space`; a trial is measured by
:mod:`orchestrator.measure.trial`.
"""
