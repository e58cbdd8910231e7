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

from pathlib import Path

from contracts.errors import GauntletError
from contracts.results import CandidateRun, ProfileSummary, WatchEvent, read_model, write_model
from contracts.schema import CandidateConfig
from contracts.sweepdir import BLOCK_PREFIX, BLOCKS_DIR
from orchestrator.ledger.events import SkippedComplete
from orchestrator.measure.candidate import fresh_result_dir
from orchestrator.measure.profile import measure_profile, server_lost
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import backend_of


def block_dir(ctx: SweepContext, baseline: str, after: str) -> Path:
    """Where the block of ``baseline`` measured after candidate ``after`` lives."""
    return ctx.candidate_dir(baseline) / BLOCKS_DIR / f"{BLOCK_PREFIX}{after}"


def block_complete(ctx: SweepContext, out: Path) -> bool:
    """The block's results are complete (a block that did not start, or lost its server, is complete too:
    that is its evidence)."""
    try:
        run = read_model(out / "run.json", CandidateRun)
        if not run.startup.ok or server_lost(run.watch):
            return True
        for profile in ctx.cfg.run.recovery_profiles:
            for repeat in range(1, ctx.cfg.run.interleave_repeats + 1):
                summary = read_model(out / profile / f"r{repeat}" / "summary.json", ProfileSummary)
                if summary.interrupted:
                    return False
    except (GauntletError, OSError):
        return False
    return True


def measure_block(ctx: SweepContext, baseline: CandidateConfig, *, after: str) -> CandidateRun:
    """Launch the retained configuration (named ``baseline.name``: ``<baseline>`` or ``<baseline>@<node>``)
    and measure the recovery profiles; results into its block directory. Returns the block's record."""
    name = baseline.name
    out = block_dir(ctx, name, after)
    label = f"{name} (block after {after})"
    if block_complete(ctx, out):
        ctx.say(f"{label}: complete results found, skipping (resume)")
        ctx.journal.append(SkippedComplete(candidate=f"{name}/{out.name}"))
        return read_model(out / "run.json", CandidateRun)
    ctx.check_stop()
    spec, spec_file = fresh_result_dir(ctx, baseline, out, label=f"{name}/{out.name}")
    with ctx.servers.launch(spec, spec_file, out / "server.log", role="baseline") as session:
        run = CandidateRun(
            candidate=name,
            fingerprint=spec.fingerprint,
            backend=backend_of(spec),
            host=spec.host,
            is_baseline=True,
            phase="baseline",
            startup=session.startup,
            node=ctx.node,
            follows=after,
        )
        if not session.ready:
            ctx.say(f"{label}: did not start ({run.startup.kind}): {run.startup.matched_line or '-'}")
            write_model(out / "run.json", run)
            return run
        watch: list[WatchEvent] = []
        profiles: list[str] = []
        runs = [
            (profile, repeat)
            for repeat in range(1, ctx.cfg.run.interleave_repeats + 1)
            for profile in ctx.cfg.run.recovery_profiles
        ]
        try:
            for profile, repeat in runs:
                events = measure_profile(
                    ctx, session, profile=profile, repeat=repeat, out=out / profile / f"r{repeat}"
                )
                profiles.append(f"{profile}/r{repeat}")
                watch.extend(events)
                if server_lost(events):
                    ctx.say(f"{label}: the server died under load; the block ends here")
                    break
        finally:
            run = run.model_copy(
                update={"watch": watch, "teardown": session.teardown(), "profiles": profiles}
            )
            write_model(out / "run.json", run)
    return run
