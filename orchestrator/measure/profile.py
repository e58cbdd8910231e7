"""One profile against a live server under a watcher: the unit every measurement is made of.

Pipeline position: the orchestrator's middle step, below a candidate's launch
(:mod:`orchestrator.measure.candidate`), the baseline's blocks and the capacity search's levels. The load
runner writes the profile's records and summary; this module journals the run, watches the server and
turns a load error into evidence (an ``unhealthy`` event), never a crash of the sweep.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import httpx

from contracts.errors import ClientPaused, GauntletError, HarnessError, sweep_dir_error
from contracts.results import WatchEvent
from contracts.schema import WorkloadConfig
from launch.api_servers import server_urls
from launch.spec import LaunchSpec
from load.client import failed_ending
from orchestrator.ledger.events import LoadFinished, LoadStarted
from orchestrator.ledger.journal import utc_now
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import backend_of
from orchestrator.servers.session import ServerSession


def server_lost(events: Sequence[WatchEvent]) -> bool:
    """The server died, or a profile could not run against it: the remaining profiles would only fail."""
    return any(e.kind in LOST for e in events)


#: Called by the load runner at the measured window's start and end.
WindowEdge = Callable[[Literal["start", "end"]], None]
#: Watch events after which a server is lost: the remaining profiles of its launch are skipped.
LOST = ("died", "hung", "unhealthy")
#: Runs of one profile's repeat while the load client is found paused (load.harness): the first is
#: discarded and measured again at once; a second pause is a harness fault (incomplete, resume measures it).
PAUSED_ATTEMPTS = 2


def measure_profile(
    ctx: SweepContext,
    session: ServerSession,
    *,
    profile: str,
    repeat: int,
    out: Path,
    workload: WorkloadConfig | None = None,
    load_level: float | None = None,
    on_window: WindowEdge | None = None,
) -> list[WatchEvent]:
    """Run one profile against a live server while a watcher checks it; returns what the watcher saw.

    A load error (the server vanished mid-profile, /tokenize or /metrics unreachable) is evidence, not a
    crash of the sweep: it is journalled and returned as an ``unhealthy`` event next to whatever the
    watcher saw (``died`` when the process is gone), and the caller moves on. A fault of the load harness
    (:class:`~contracts.errors.HarnessError`) is a ``harness`` event instead, never the server's; a run
    during which the load client stood still (:class:`~contracts.errors.ClientPaused`) is discarded and
    measured again once. ``workload`` replaces the configured profile (the capacity search's load levels:
    its request counts are final, not scaled). ``on_window`` goes to the load runner: called at the
    measured window's start and end (the launch's energy window).
    """
    spec = session.spec
    name = spec.candidate
    ctx.check_stop()
    ctx.journal.append(LoadStarted(candidate=name, profile=profile, repeat=repeat))
    ctx.say(f"{name}: {profile} r{repeat}")
    failure: str | None = None
    harness: str | None = None
    with session.watching() as watch:
        for attempt in range(1, PAUSED_ATTEMPTS + 1):
            try:
                _run(
                    ctx,
                    session,
                    profile=profile,
                    repeat=repeat,
                    out=out,
                    workload=workload,
                    load_level=load_level,
                    stop=watch.stop,
                    on_window=on_window,
                )
            except ClientPaused as exc:
                harness = str(exc).splitlines()[0]
                if attempt == PAUSED_ATTEMPTS or watch.stop.is_set():
                    break
                # The client stood still, not the server: this run is no evidence; discard it and run again.
                ctx.say(f"{name}: {profile} r{repeat}: {harness}; measuring it again")
                ctx.journal.append(
                    LoadFinished(candidate=name, profile=profile, repeat=repeat, events=0, error=harness)
                )
                shutil.rmtree(out, ignore_errors=True)
                harness = None
                ctx.check_stop()
                ctx.journal.append(LoadStarted(candidate=name, profile=profile, repeat=repeat))
                continue
            except HarnessError as exc:
                harness = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            except (GauntletError, httpx.HTTPError, OSError) as exc:
                if (disk := sweep_dir_error(exc, ctx.dir)) is not None:
                    raise disk from exc  # the disk failed, not the candidate: stop, do not measure on
                said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if failed_ending(exc) == "client":  # the client's own host: no descriptor, no local port
                    harness = said
                else:
                    failure = said
                    ctx.say(f"{name}: {profile} r{repeat} could not complete: {failure}")
            except Exception as exc:  # a bug in the load runner is the harness's, never "the server died"
                harness = f"{type(exc).__name__}: {exc}"
            break
    events = watch.events
    for event in events:  # say what the watcher saw: a sweep never waits on a lost server in silence
        if event.kind in ("died", "hung"):
            ctx.say(f"{name}: {profile} r{repeat}: server {event.kind}: {event.detail}")
    if harness is not None:
        failure = f"load harness error (not the server): {harness}"
        ctx.say(f"{name}: {profile} r{repeat}: {failure}; the verdict will be incomplete")
        events.append(WatchEvent(at=utc_now(), kind="harness", detail=f"{profile} r{repeat}: {harness}"))
    elif failure is not None:
        events.append(WatchEvent(at=utc_now(), kind="unhealthy", detail=f"{profile} r{repeat}: {failure}"))
    ctx.journal.append(
        LoadFinished(candidate=name, profile=profile, repeat=repeat, events=len(events), error=failure)
    )
    return events


def _run(
    ctx: SweepContext,
    session: ServerSession,
    *,
    profile: str,
    repeat: int,
    out: Path,
    workload: WorkloadConfig | None,
    load_level: float | None,
    stop: threading.Event,
    on_window: WindowEdge | None,
) -> None:
    """One run of the profile through the sweep's load runner (its summary and records into ``out``)."""
    spec = session.spec
    ctx.seams.run_profile(
        spec.base_url,
        spec.served_model_name,
        workload or ctx.cfg.workloads[profile],
        candidate=spec.candidate,
        fingerprint=spec.fingerprint,
        repeat=repeat,
        out_dir=out,
        backend=backend_of(spec),
        host=spec.host,
        time_scale=spec.time_scale,
        scale=ctx.cfg.run.scale if workload is None else 1.0,
        slo=ctx.cfg.slo,
        load_level=load_level,
        stop=stop,
        api_key=spec.api_key(os.environ),
        load=ctx.cfg.load,
        on_window=on_window,
        **spread_over(session),
    )


def spread_over(session: ServerSession) -> dict[str, list[str]]:
    """``servers`` for the load runner when the candidate runs an API server per node or rank (hybrid or
    external DP load balancing: :func:`launch.api_servers.server_urls`); nothing for one API server."""
    server, spec = session.server, session.spec
    names = [follower.node_name for follower in server.followers] if server is not None else []
    urls = server_urls(spec.base_url, spec.followers, names)
    return {"servers": urls} if len(urls) > 1 else {}


def free_memory(ctx: SweepContext, spec: LaunchSpec) -> list[float] | None:
    """Free GPU memory per GPU now (after the first profile, i.e. after warmup); None when unknown."""
    try:
        gpus = ctx.seams.gpu_memory(spec)
    except (httpx.HTTPError, GauntletError) as exc:
        ctx.say(f"could not read GPU memory: {exc}")
        return None
    return [g.free_gib for g in gpus] if gpus else None
