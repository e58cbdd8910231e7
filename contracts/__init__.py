"""Shared contracts of gauntlet: what the stages agree on, and nothing else.

The bottom of the house: every stage (``launch``, ``load``, ``gates``, ``report``) and the sweep layer
(``orchestrator``) import from here, and this package imports no stage, no Hydra and no OmegaConf.

- :mod:`contracts.errors`    the one exception tree and its exit codes
- :mod:`contracts.schema`    the typed configuration (plain dataclasses)
- :mod:`contracts.results`   result records and summaries, validated on write and on read
- :mod:`contracts.verdicts`  what the gates decided (``verdicts.json``)
"""
