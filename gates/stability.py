"""Stability: zero preemptions, no server restart and no failed request on the accepted workloads.

Pipeline position: reads the summaries of each accepted profile and of the labelled profile, when the
sweep ran it (server /metrics deltas, failed requests), their records (which requests failed) and the
watcher's events in ``run.json``. Absolute requirements: the baseline's values are shown for context, not
compared against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contracts.results import RequestRecord
from contracts.schema import GatesConfig
from contracts.sweepdir import Repeat
from contracts.verdicts import Comparison, Evidence, GateResult, GateStatus
from gates.compare import missing, overall_status, records_evidence
from gates.evidence import lost_how
from gates.registry import Gate, GateContext, register


@register
class Stability(Gate):
    """Every accepted profile ran with zero preemptions, no restart and no failed request."""

    name = "stability"
    order = 20
    requirement = "zero preemptions, no restart, no failed request"
    failure = "stability"

    def evaluate(self, ctx: GateContext) -> GateResult:
        comparisons: list[Comparison] = []
        evidence: list[Evidence] = []
        problems: list[str] = []
        run = ctx.candidate.run
        for event in run.watch if run else []:
            if event.kind in ("died", "hung", "restarted", "unhealthy"):
                problems.append(f"watcher: server {event.kind} at {event.at} ({event.detail})")
                evidence.append(Evidence(file=ctx.candidate.run_file))
        # The accepted profiles the sweep ran (run.profiles): those either side measured. The baseline ran
        # every profile of run.profiles before any candidate; one lost before it is a gap of its own
        # (gates.evidence), and the candidate's own runs are judged all the same (an absolute requirement).
        # The labelled profile counts too whenever the sweep ran it: an item the candidate failed is a
        # failed request here, whatever the accuracy gate makes of it.
        ran = [p for p in watched(ctx.cfg) if ctx.baseline.repeats(p) or ctx.candidate.repeats(p)]
        not_ran = [p for p in ctx.cfg.accepted_profiles if p not in ran]
        for profile in ran:
            repeats = ctx.candidate.repeats(profile)
            if not repeats:
                comparisons.append(missing("stability", profile, "candidate"))
                continue
            comparison, found, shown = _profile_stability(profile, repeats, ctx.baseline.repeats(profile))
            comparisons.append(_cut_by_loss(comparison, repeats, lost_how(ctx.candidate)))
            problems += found
            evidence += shown
        statuses = [c.status for c in comparisons]
        status = "fail" if problems else overall_status(statuses)
        if not comparisons and not problems:
            message = (
                f"none of the accepted profiles ({', '.join(not_ran)}) was measured in this sweep "
                "(run.profiles)"
                if not_ran
                else "no accepted profiles configured (gates.accepted_profiles)"
            )
        elif problems:
            message = "; ".join(problems)
        else:
            message = "; ".join(c.message for c in comparisons)
            if not_ran:
                message += f" ({', '.join(not_ran)}: not measured in this sweep, run.profiles)"
        return GateResult(
            gate=self.name,
            role=self.role,
            status=status,
            threshold=0.0,
            unit="events",
            message=message,
            evidence=evidence,
            comparisons=comparisons,
            # None of its profiles ran on either side: the sweep was not asked for them, by design.
            not_applicable=message if status == "not_run" else "",
        )


def watched(cfg: GatesConfig) -> list[str]:
    """The profiles the gate reads: ``gates.accepted_profiles`` and the labelled profile
    (``gates.accuracy.profile``) where the sweep ran it."""
    labelled = cfg.accuracy.profile
    return [*cfg.accepted_profiles, *([labelled] if labelled not in cfg.accepted_profiles else [])]


def _cut_by_loss(comparison: Comparison, repeats: Sequence[Repeat], lost: str | None) -> Comparison:
    """A profile whose run the lost server cut short fails for that reason, said as such (its counts cover
    only what the cut-short run had finished, which is no evidence of stability)."""
    cut = [rep.summary for rep in repeats if rep.summary.interrupted and not rep.summary.time_bound]
    if lost is None or not cut:
        return comparison
    runs = ", ".join(
        f"r{s.repeat} ({s.completed} of {s.num_requests} request(s) completed)"
        if s.num_requests
        else f"r{s.repeat} (before its measured requests)"
        for s in cut
    )
    return comparison.model_copy(
        update={
            "status": "fail",
            "message": f"{comparison.profile}: server {lost}, which cut short {runs}",
        }
    )


def _not_the_servers(error: str | None, rep: Repeat) -> bool:
    """An error class that is no failure of the server: a request the run's time bound stopped
    (``timeout`` in a time-bound run: the concurrency gate's finding), or one the load client could not
    send (``client``: a harness fault)."""
    return error == "client" or (error == "timeout" and rep.summary.time_bound)


def _failed_in(rep: Repeat) -> Callable[[RequestRecord], bool]:
    """A failed request of ``rep`` that counts against the server."""
    return lambda r: not r.ok and not _not_the_servers(r.error, rep)


def _profile_stability(
    profile: str, repeats: Sequence[Repeat], base: Sequence[Repeat]
) -> tuple[Comparison, list[str], list[Evidence]]:
    """One accepted profile: failed requests, preemptions, restarts; its problems and their evidence."""
    problems: list[str] = []
    evidence: list[Evidence] = []
    # Requests the profile's time bound stopped did not fail: they are the concurrency gate's finding.
    unfinished = sum(rep.summary.errors.get("timeout", 0) for rep in repeats if rep.summary.time_bound)
    # Requests the load client could not send (EMFILE, no local port) are its own fault (a harness gap).
    unsent = sum(rep.summary.errors.get("client", 0) for rep in repeats)
    failed = sum(rep.summary.failed for rep in repeats) - unfinished - unsent
    total = sum(rep.summary.num_requests for rep in repeats)
    servers = [rep.summary.server for rep in repeats]
    preemptions = sum(s.preemptions for s in servers if s is not None)
    restarted = [
        rep.summary_file for rep, s in zip(repeats, servers, strict=True) if s and s.restart_detected
    ]
    unknown = sum(s is None for s in servers)
    status: GateStatus = "pass"
    parts = [f"{failed}/{total} failed", f"{preemptions:g} preemptions"]
    if unfinished:
        parts.append(f"{unfinished} unfinished at the time bound (concurrency)")
    if unsent:
        parts.append(f"{unsent} the load client could not send (a harness fault, not counted)")
    if failed:
        status = "fail"
        errors: dict[str, int] = {}
        for rep in repeats:
            for kind, count in rep.summary.errors.items():
                if not _not_the_servers(kind, rep):
                    errors[kind] = errors.get(kind, 0) + count
        detail = ", ".join(f"{k} {v}" for k, v in sorted(errors.items()))
        problems.append(f"{profile}: {failed}/{total} requests failed ({detail or 'no class'})")
        for rep in repeats:
            evidence.extend(records_evidence([rep], _failed_in(rep)))
    if preemptions > 0:
        status = "fail"
        problems.append(f"{profile}: {preemptions:g} preemptions")
    if restarted:
        status = "fail"
        parts.append("restart detected")
        problems.append(f"{profile}: server restart detected ({', '.join(restarted)})")
    if unknown and status == "pass":
        status = "inconclusive"
        parts.append(f"/metrics unreadable in {unknown} repeat(s): preemptions unknown")
    if status != "pass":
        evidence.extend(Evidence(file=rep.summary_file) for rep in repeats)
    comparison = Comparison(
        metric="stability",
        profile=profile,
        status=status,
        observed=float(failed) + preemptions,
        baseline=float(sum(rep.summary.failed for rep in base)),
        threshold=0.0,
        unit="events",
        n_candidate=len(repeats),
        n_baseline=len(base),
        message=f"{profile}: " + ", ".join(parts),
    )
    return comparison, problems, evidence
