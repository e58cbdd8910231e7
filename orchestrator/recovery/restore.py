"""Restoring the retained configuration and proving it: relaunch byte-for-byte, check, validate under load.

Pipeline position: the orchestrator's last step before the report (verdict -> restore), also run by
``rollback`` and after a crash, a failed job, Ctrl-C or SIGTERM. The recorded retained spec is checked
against the fingerprint the journal recorded when the sweep began *before* anything is touched (a refused
restore leaves the host as it was); the running server's effective configuration is compared with the
typed configuration (``/v1/models`` max_model_len, ``vllm:cache_config_info`` on ``/metrics``); the
recovery profiles must complete with no restart, no preemption and nothing left queued. The sweep's own
restore writes ``recovery/`` (run.json, validation.json, ``<profile>/r<k>/``), which the judge reads; each
``rollback`` writes its own ``rollbacks/<stamp>/`` and never touches ``recovery/`` (evidence is
append-only: judging a sweep gives the same verdicts before and after any number of rollbacks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import httpx

from contracts.candidate_file import read_candidate
from contracts.errors import ResultFileError, RollbackError, SpecError
from contracts.files import write_model
from contracts.layout import LaunchPaths, recovery_dir
from contracts.results import ProfileSummary, RecoveryCheck, RecoveryValidation, WatchEvent
from contracts.schema import CandidateConfig, ServiceConfig
from launch.spec import LaunchSpec, diff_specs
from orchestrator.ledger.events import (
    Event,
    Restored,
    Restoring,
    RollbackRequested,
    StartupFailed,
    Validated,
    ValidationFailed,
)
from orchestrator.ledger.journal import Journal, JournalState
from orchestrator.ledger.offsite import find_offsite, sweep_dir_gone
from orchestrator.measure.launch import (
    Launch,
    RunLabels,
    fresh_dir,
    measured_launch,
    writable_or_elsewhere,
)
from orchestrator.measure.profile import free_memory
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import stop_leftovers
from orchestrator.servers.session import Servers, ServerSession


def restore(
    ctx: SweepContext, *, reason: str, keep_live: bool = False, out: Path | None = None
) -> RecoveryValidation:
    """Relaunch the retained spec byte-for-byte, check its effective config, validate it under load.

    The restored server stays up afterwards (it is the live service), also when the validation is
    interrupted; a failed validation is a result, not an exception. With ``keep_live`` (the zero-downtime
    mode of a sweep whose candidates ran on other nodes) a healthy retained server with the recorded
    fingerprint is not relaunched: it is validated where it runs, and only other servers are stopped.
    ``out``: where the launch and its validation go (default: the sweep's ``recovery/``; a rollback passes
    its own ``rollbacks/<stamp>/``).
    """
    out = out if out is not None else recovery_dir(ctx.dir)
    state = ctx.journal.replay()
    if state.retained_spec_file is None and (kept := find_offsite(ctx.dir)) is not None:
        # the sweep directory lost its journal: the copy kept beside the port's lock has the live set
        ctx.say(f"{ctx.journal.path} has no retained record: restoring from the copy in {kept.folder}")
        offsite = Journal(kept.journal)
        state = offsite.replay()
        if sweep_dir_gone(ctx.dir):  # the restore journals beside the lock
            ctx = replace(ctx, servers=replace(ctx.servers, journal=offsite))
    if state.retained_spec_file is None or state.retained_fingerprint is None:
        raise RollbackError(
            f"{ctx.journal.path}: no retained configuration was recorded",
            hint="nothing to restore: this sweep never started",
        )
    ctx = as_retained(ctx, state)  # a promoted candidate is the retained configuration's typed config
    # Verify the recorded spec before touching anything: a refused restore must leave the host as it was.
    spec_path = Path(state.retained_spec_file)
    spec = read_retained_spec(spec_path, state.retained_fingerprint, ctx.render(ctx.cfg.baseline))
    live = healthy_retained(ctx.servers, state) if keep_live else None
    if live is not None:
        return _validate_in_place(ctx, live, state, reason=reason, out=out)
    failed = failed_start(ctx.journal.node_events(), spec.fingerprint)
    if failed is not None:
        return _not_relaunched(ctx, spec, state.retained_fingerprint, failed, out=out)
    stop_leftovers(ctx.servers, state, reason=f"before restoring the retained configuration ({reason})")
    ctx.journal.append(Restoring(candidate=spec.candidate, fingerprint=spec.fingerprint, reason=reason))
    ctx.say(f"restoring the retained configuration {spec.candidate} ({reason})")
    with measured_launch(
        ctx,
        spec,
        writable_or_elsewhere(ctx, out),  # the live service first, its evidence second
        role="retained",
        labels=RECOVERY,
        discard_as=None,
        spec_file=spec_path,
    ) as launch:
        if not launch.ready:
            launch.write()
            startup = launch.run.startup
            result = RecoveryValidation(
                ok=False,
                candidate=spec.candidate,
                fingerprint=spec.fingerprint,
                recorded_fingerprint=state.retained_fingerprint,
                pid=None,
                reason=f"the retained configuration did not start ({startup.kind}): {startup.matched_line}",
            )
            write_model(LaunchPaths(launch.out).validation, result)
            ctx.journal.append(ValidationFailed(candidate=spec.candidate, reason=result.reason))
            return result
        session = launch.session
        session.keep()  # the live service from now on, whatever the validation finds
        ctx.journal.append(Restored(candidate=spec.candidate, pid=session.pid, fingerprint=spec.fingerprint))
        return validate_retained(ctx, launch, state.retained_fingerprint)


def as_retained(ctx: SweepContext, state: JournalState) -> SweepContext:
    """``ctx`` with the retained configuration as its baseline: the candidate a promotion made the retained
    one (read from the candidate file it wrote), else the sweep's configured baseline. What the restore
    renders for its evidence and checks the running server's effective configuration against."""
    if state.retained_candidate_file is None:
        return ctx
    try:
        candidate = read_candidate(Path(state.retained_candidate_file))
    except ResultFileError as exc:
        raise RollbackError(
            f"the retained configuration {state.retained_candidate} was promoted, and its candidate file "
            f"cannot be read: {exc.message}",
            hint="put the file back (it is in the sweep's promotions/ folder); its spec alone is not enough "
            "to check the server's effective configuration",
        ) from exc
    return replace(ctx, cfg=replace(ctx.cfg, baseline=candidate))


def failed_start(events: Sequence[Event], fingerprint: str) -> StartupFailed | None:
    """The failed start of ``fingerprint`` in this sweep since the last explicit rollback (pure), or None.

    A spec that could not start once (a bad flag, no GPU, too little memory) fails again the same way:
    on a real host that is another startup timeout (1800 s) for nothing. An explicit ``rollback``
    (its ``RollbackRequested`` line) tries once more: whoever asked for it may have fixed the cause.
    """
    found: StartupFailed | None = None
    for event in events:
        if isinstance(event, RollbackRequested):
            found = None
        elif isinstance(event, StartupFailed) and event.fingerprint == fingerprint:
            found = event
    return found


def _not_relaunched(
    ctx: SweepContext, spec: LaunchSpec, recorded: str, failed: StartupFailed, *, out: Path
) -> RecoveryValidation:
    """The retained spec already failed to start in this sweep: say so once, relaunch nothing, leave
    whatever runs (the previous live service, or nothing) as it is."""
    reason = (
        f"the retained configuration {spec.candidate} failed to start in this sweep ({failed.kind}: "
        f"{failed.matched_line or '-'}); not launched again, what runs is left as it is"
    )
    out = writable_or_elsewhere(ctx, out)
    fresh_dir(ctx, out, discard_as=None)
    result = RecoveryValidation(
        ok=False,
        candidate=spec.candidate,
        fingerprint=spec.fingerprint,
        recorded_fingerprint=recorded,
        pid=None,
        reason=reason,
    )
    write_model(LaunchPaths(out).validation, result)
    ctx.journal.append(ValidationFailed(candidate=spec.candidate, reason=reason))
    ctx.say(reason)
    return result


#: The record of the restored retained configuration's launch.
RECOVERY = RunLabels(is_baseline=True, phase="recovery")


def healthy_retained(servers: Servers, state: JournalState) -> ServerSession | None:
    """The recorded retained server, if it still runs, its spec is intact and /health is 200."""
    for live in state.live.values():
        if live.role != "retained" or live.fingerprint != state.retained_fingerprint:
            continue
        try:
            spec = LaunchSpec.read(Path(live.spec_file))
        except (OSError, SpecError):
            return None
        session = servers.adopt(live, spec)
        if session is None:
            return None
        if servers.seams.supervisor.health(session.running) == 200:
            return session
    return None


def _validate_in_place(
    ctx: SweepContext, session: ServerSession, state: JournalState, *, reason: str, out: Path
) -> RecoveryValidation:
    """Zero-downtime: the live retained server was never stopped; stop the rest, validate it under load."""
    others = replace(state, live={pid: s for pid, s in state.live.items() if pid != session.pid})
    stop_leftovers(ctx.servers, others, reason=f"the sweep ends ({reason}); the live service stays")
    ctx.say(
        f"the live retained server {session.spec.candidate} (pid {session.pid}) was never stopped "
        "(zero-downtime): validating it where it runs"
    )
    assert state.retained_fingerprint is not None
    return validate_running(ctx, session, out, state.retained_fingerprint)


def validate_running(
    ctx: SweepContext, session: ServerSession, out: Path, recorded: str
) -> RecoveryValidation:
    """Validate the running retained server where it runs (kept: the live service), into a fresh ``out``."""
    with measured_launch(
        ctx, session.spec, out, role="retained", labels=RECOVERY, discard_as=None, running=session
    ) as launch:
        return validate_retained(ctx, launch, recorded)


def validate_retained(
    ctx: SweepContext, launch: Launch, recorded: str, *, promoted: bool = False
) -> RecoveryValidation:
    """Check the running retained server's effective config (against ``ctx.cfg.baseline``: the retained
    configuration's typed candidate, :func:`as_retained`), then run the recovery profiles against it;
    writes validation.json, then the launch's run.json. A promotion validates its candidate with this
    (``promoted``: its reason says the candidate was promoted, not restored)."""
    session = launch.session
    spec = session.spec
    expected = expected_cache_config(ctx.cfg.service, ctx.cfg.baseline)
    checks = effective_config_checks(spec, recorded, expected, transport=ctx.seams.transport)
    summaries: list[ProfileSummary] = []
    runs = [(p, r) for r in range(1, ctx.cfg.run.recovery_repeats + 1) for p in ctx.cfg.run.recovery_profiles]
    for profile, repeat in runs:
        seen = launch.measure(profile, repeat)
        summary_file = LaunchPaths(launch.out).repeat(profile, repeat).summary
        if not summary_file.exists():  # the run ended without its summary: say what ended it, stop here
            checks.append(unfinished_run_check(profile, repeat, seen))
            break
        summaries.append(launch.summary(profile, repeat))
    launch.free_gpu_gib = free_memory(ctx, spec)
    checks.extend(recovery_load_checks(summaries, launch.watch))
    ok = all(c.ok for c in checks)
    launched = (
        f"promoted {spec.candidate} (launched byte-for-byte from its recorded spec)"
        if promoted
        else f"restored {spec.candidate} byte-for-byte"
    )
    reason = (
        f"{launched} and served {len(summaries)} recovery run(s) cleanly"
        if ok
        else "; ".join(f"{c.name}: expected {c.expected}, observed {c.observed}" for c in checks if not c.ok)
    )
    result = RecoveryValidation(
        ok=ok,
        candidate=spec.candidate,
        fingerprint=spec.fingerprint,
        recorded_fingerprint=recorded,
        pid=session.pid,
        checks=checks,
        profiles=launch.profiles,
        reason=reason,
    )
    write_model(LaunchPaths(launch.out).validation, result)
    launch.write()
    if ok:
        ctx.journal.append(Validated(candidate=spec.candidate, pid=session.pid, reason=reason))
    else:
        ctx.journal.append(ValidationFailed(candidate=spec.candidate, pid=session.pid, reason=reason))
    what = "the promotion's validation" if promoted else "recovery validation"
    ctx.say((f"{what} passed: " if ok else f"{what.upper()} FAILED: ") + reason)
    return result


def read_retained_spec(
    path: Path, recorded_fingerprint: str, configured: LaunchSpec | None, *, act: str = "restore"
) -> LaunchSpec:
    """The recorded retained spec, refused (saying what differs) unless it has the journal's fingerprint
    (``act``: what is refused, for the message; ``promote`` checks its candidate's spec with it)."""
    text = path.read_text() if path.exists() else None
    if text is None:
        raise RollbackError(f"{path}: the recorded spec is missing", hint=f"it cannot be {act}d safely")
    try:
        spec = LaunchSpec.from_json(text, source=str(path))
    except SpecError as exc:
        evidence: list[str] = []
        if configured is not None:
            try:
                tampered, _ = LaunchSpec.parse_json(text, source=str(path))
                evidence = diff_specs(configured, tampered)
            except SpecError:
                evidence = ["the file is not a launch spec any more"]
        raise RollbackError(
            f"refusing to {act}: {exc.message}",
            evidence=[f"compared with the configured baseline: {d}" for d in evidence],
            hint="the recorded retained spec was modified; put back the original or start a new sweep",
        ) from exc
    if spec.fingerprint != recorded_fingerprint:
        raise RollbackError(
            f"refusing to {act}: {path} is {spec.fingerprint}, the journal recorded {recorded_fingerprint}",
            evidence=diff_specs(configured, spec) if configured else [],
            hint="the recorded retained spec was replaced; put back the original",
        )
    return spec


def expected_cache_config(service: ServiceConfig, candidate: CandidateConfig) -> dict[str, str]:
    """The ``vllm:cache_config_info`` labels the server must report for this configuration (pure).

    The same typed values render the ``--gpu-memory-utilization`` and ``--kv-cache-dtype`` flags
    (:func:`launch.spec.vllm_flags`), so nothing is parsed back out of the command line.
    """
    return {
        "gpu_memory_utilization": str(candidate.gpu_memory_utilization),
        "cache_dtype": candidate.kv_cache_dtype or service.kv_cache_dtype,
    }


def effective_config_checks(
    spec: LaunchSpec,
    recorded: str,
    expected: Mapping[str, str],
    *,
    transport: httpx.BaseTransport | None = None,
) -> list[RecoveryCheck]:
    """Compare what the running server reports (/v1/models, /metrics) with what the configuration asked."""
    checks = [
        RecoveryCheck(
            name="fingerprint", ok=spec.fingerprint == recorded, expected=recorded, observed=spec.fingerprint
        )
    ]
    key = spec.api_key(os.environ)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=spec.base_url, timeout=10.0, transport=transport, headers=headers) as client:
        observed = _served_max_model_len(client, spec.served_model_name)
        labels = _cache_config_labels(client)
    checks.append(
        RecoveryCheck(
            name="max_model_len",
            ok=observed == str(spec.max_model_len),
            expected=str(spec.max_model_len),
            observed=observed,
        )
    )
    for label, want in expected.items():
        seen = labels.get(label)
        checks.append(
            RecoveryCheck(
                name=f"cache_config_info.{label}",
                ok=seen is not None and _same(seen, want),
                expected=want,
                observed=seen if seen is not None else labels.get("error", "absent"),
            )
        )
    return checks


#: What a 401 or 403 from the server means for gauntlet: the API key it sent is not the server's.
UNAUTHORIZED = "unauthorized: check service.api_key_env"


def refused(response: httpx.Response) -> str | None:
    """Why a server's answer cannot be read as data: unauthorized (401/403), or another non-200 status."""
    if response.status_code in (401, 403):
        return f"{UNAUTHORIZED} (HTTP {response.status_code} from {response.request.url.path})"
    if response.status_code != 200:
        return f"HTTP {response.status_code} from {response.request.url.path}"
    return None


def _served_max_model_len(client: httpx.Client, served_model_name: str) -> str:
    """``max_model_len`` of the served model as /v1/models lists it, or why it cannot be read."""
    try:
        response = client.get("/v1/models")
        if (why := refused(response)) is not None:
            return why
        models = response.json()
        entry = next((m for m in models.get("data", []) if m.get("id") == served_model_name), None)
        return str(entry.get("max_model_len")) if entry else "model not listed"
    except (httpx.HTTPError, ValueError) as exc:
        return f"unreadable: {exc}"


def _cache_config_labels(client: httpx.Client) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info`` on /metrics (``{"error": ...}`` when unreadable)."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    try:
        response = client.get("/metrics")
        if (why := refused(response)) is not None:
            return {"error": why}
        text = response.text
        labels: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            if family.name in ("vllm:cache_config_info", "vllm:cache_config"):
                for sample in family.samples:
                    labels.update(sample.labels)
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": str(exc)}
    return labels


def _same(observed: str, expected: str) -> bool:
    try:
        return abs(float(observed) - float(expected)) < 1e-9
    except ValueError:
        return observed == expected


def unfinished_run_check(profile: str, repeat: int, seen: Sequence[WatchEvent]) -> RecoveryCheck:
    """A recovery run that wrote no summary (the server lost, the load runner failed): a failed check
    naming what the watcher saw, instead of a missing file (pure).

    >>> unfinished_run_check("decode_heavy", 1, []).observed
    'no summary written (nothing seen by the watcher)'
    """
    what = "; ".join(f"{e.kind}: {e.detail}" for e in seen) or "nothing seen by the watcher"
    return RecoveryCheck(
        name=f"{profile}/r{repeat} ran",
        ok=False,
        expected="a finished run",
        observed=f"no summary written ({what})",
    )


def recovery_load_checks(
    summaries: Sequence[ProfileSummary], watch: Sequence[WatchEvent]
) -> list[RecoveryCheck]:
    """Every request completes, no restart, no preemption, nothing left queued (pure)."""
    checks: list[RecoveryCheck] = []
    for s in summaries:
        checks.extend(_summary_checks(s))
    bad = [e for e in watch if e.kind in ("died", "hung", "restarted", "unhealthy")]
    checks.append(
        RecoveryCheck(
            name="server events",
            ok=not bad,
            expected="none",
            observed=", ".join(f"{e.kind} at {e.at}" for e in bad) or "none",
        )
    )
    return checks


def _summary_checks(s: ProfileSummary) -> list[RecoveryCheck]:
    tag = f"{s.profile}/r{s.repeat}"
    checks = [
        RecoveryCheck(
            name=f"{tag} completed",
            ok=s.completed == s.num_requests and s.failed == 0,
            expected=f"{s.num_requests}/{s.num_requests}",
            observed=f"{s.completed}/{s.num_requests} ({s.failed} failed)",
        )
    ]
    server = s.server
    if server is None:
        checks.append(
            RecoveryCheck(
                name=f"{tag} metrics", ok=False, expected="/metrics readable", observed="unreadable"
            )
        )
        return checks
    queued = server.waiting_at_end + server.running_at_end
    checks += [
        RecoveryCheck(
            name=f"{tag} preemptions",
            ok=server.preemptions == 0,
            expected="0",
            observed=f"{server.preemptions:g}",
        ),
        RecoveryCheck(
            name=f"{tag} restart",
            ok=not server.restart_detected,
            expected="none",
            observed="detected" if server.restart_detected else "none",
        ),
        RecoveryCheck(name=f"{tag} queued at end", ok=queued == 0, expected="0", observed=f"{queued:g}"),
    ]
    return checks
