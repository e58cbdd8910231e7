"""Interleaved baseline blocks (ABA): the retained configuration measured again after each candidate.

Pipeline position: the orchestrator's middle step, right after
:func:`orchestrator.measure.candidate.run_candidate`
(``run.interleave``). The sweep's order becomes baseline, candidate, baseline, candidate, ... on the
launching host, and the same per node in a parallel sweep (a node's last block opens its next job). Each
block is a fresh launch of the retained spec that runs ``run.recovery_profiles``
``run.interleave_repeats`` times; it is written beside the baseline it belongs to::

    candidates/<baseline>[@<node>]/blocks/after-<candidate>/
        spec.json  vllm-config.yaml  server.log  run.json (follows: <candidate>)  <profile>/r<k>/

The gates read blocks with the baseline (:func:`contracts.sweepdir.load_baseline`): the drift check
compares the opening repeats with the blocks (and the recovery), and the gates' baseline sample includes
them. A complete block is skipped on resume; a partial one is measured again.
"""

from __future__ import annotations

from contracts.layout import block_dir, block_name
from contracts.results import CandidateRun
from contracts.schema import CandidateConfig
from orchestrator.measure.launch import (
    RunLabels,
    launch_complete,
    launch_state,
    measured_launch,
    skip_complete,
)
from orchestrator.measure.profile import server_lost
from orchestrator.servers.context import SweepContext


def measure_block(ctx: SweepContext, baseline: CandidateConfig, *, after: str) -> CandidateRun:
    """Launch the retained configuration (named ``baseline.name``: ``<baseline>`` or ``<baseline>@<node>``)
    and measure the recovery profiles; results into its block directory. Returns the block's record."""
    name = baseline.name
    out = block_dir(ctx.dir, name, after)
    label, journal_as = f"{name} (block after {after})", f"{name}/{block_name(after)}"
    runs = [
        (profile, repeat)
        for repeat in range(1, ctx.cfg.run.interleave_repeats + 1)
        for profile in ctx.cfg.run.recovery_profiles
    ]
    state = launch_state(ctx, out, name)  # what resume judges: read once
    if state is not None and launch_complete(state, lambda _run, _state: runs):
        return skip_complete(ctx, state, label=label, journal_as=journal_as)
    ctx.check_stop()
    labels = RunLabels(is_baseline=True, phase="baseline", node=ctx.node, follows=after)
    spec = ctx.render(baseline)
    with measured_launch(ctx, spec, out, role="baseline", labels=labels, discard_as=journal_as) as launch:
        if not launch.ready:
            startup = launch.run.startup
            ctx.say(f"{label}: did not start ({startup.kind}): {startup.matched_line or '-'}")
        else:
            for profile, repeat in runs:
                if server_lost(launch.measure(profile, repeat)):
                    ctx.say(f"{label}: the server died under load; the block ends here")
                    break
    return launch.recorded
