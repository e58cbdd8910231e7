"""Interleaved baseline blocks (ABA): the retained configuration measured again after each candidate.

Pipeline position: the orchestrator's middle step, right after
:func:`orchestrator.measure.candidate.run_candidate`
(``run.interleave``). The sweep's order becomes baseline, candidate, baseline, candidate, ... on the
launching host, and the same per node in a parallel sweep (a node's last block opens its next job). Each
block is a fresh launch of the retained spec that runs ``run.recovery_profiles``
``run.interleave_repeats`` times; it is written beside the baseline it belongs to::

    candidates/<baseline>[@<node>]/blocks/after-<candidate>/
        spec.json  vllm-config.yaml  server.log  run.json (follows: <candidate>)  <profile>/r<k>/
        capacity.json  capacity/<level>/a<k>/      (capacity.profile set and capacity.in_blocks)

With a capacity search configured (and ``capacity.in_blocks``, the default) the block also searches the
baseline's capacity again: the capacity gate averages the baseline's launches and measures how far one
configuration's capacity moves from launch to launch (:mod:`gates.capacity_interval`).

The gates read blocks with the baseline (:func:`contracts.sweepdir.load_baseline`): the drift check
compares the opening repeats with the blocks (and the recovery), and the gates' baseline sample includes
them. A complete block is skipped on resume; a partial one is measured again.
"""

from __future__ import annotations

from contracts.layout import block_dir, block_name
from contracts.results import CandidateRun
from contracts.schema import CandidateConfig
from contracts.sweepdir import Results
from orchestrator.measure.capacity import SearchSite, run_capacity
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
    cap = ctx.cfg.capacity
    search = cap.profile is not None and cap.in_blocks

    def expected(_run: CandidateRun, state: Results) -> list[tuple[str, int]] | None:
        return None if search and state.capacity is None else runs  # a block without its search: again

    state = launch_state(ctx, out, name)  # what resume judges: read once
    if state is not None and launch_complete(state, expected):
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
            if search and not launch.lost:
                own = ctx.cfg.run.interleave_repeats if cap.profile in ctx.cfg.run.recovery_profiles else 0
                launch.watch.extend(run_capacity(ctx, launch.session, baseline, SearchSite(out, label, own)))
    return launch.recorded
