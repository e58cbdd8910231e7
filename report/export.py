"""``summaries.csv``: every profile summary of a sweep as one flat table (pandas reads it as is).

Pipeline position: beside the Markdown and the plots in the report stage; reads the summaries the sweep
wrote (:class:`~contracts.sweepdir.Results`, and the capacity search's runs) and writes one row per
candidate x profile x repeat (``source = profile``; a baseline's interleaved blocks follow its opening
repeats as ``source = block``, their ``summary_file`` naming the candidate each followed), then one per
capacity-search run (``source = capacity``, its load level set), then the end-of-sweep recovery run
(``source = recovery``): every run the drift check read is a row. A candidate that never measured a
profile (it did not start, or was never launched) still gets one row (``source = not_started``, its
startup failure in ``startup_failure``), and every row carries its candidate's ``verdict`` (the judge's
decision, ``baseline`` for the baseline; empty when the sweep was not judged).
Columns are fixed (:data:`COLUMNS`), numbers are plain decimals, a missing value is an empty cell (NaN in
pandas), booleans are ``True``/``False``::

    df = pandas.read_csv("sweeps/latest/summaries.csv")
    df[df.source == "profile"].groupby(["candidate", "profile"]).output_tps.mean()
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path

from contracts.errors import GauntletError
from contracts.files import read_model
from contracts.layout import SweepPaths
from contracts.results import ProfileSummary, Stats
from contracts.sweepdir import Results
from contracts.verdicts import SweepVerdict

_STATS = ("ttft", "tpot", "itl", "e2e", "first_visible")
COLUMNS: tuple[str, ...] = (
    "candidate",
    "source",  # profile: a configured profile's repeat; block: a baseline's interleaved block (after the
    # candidate its summary_file names); capacity: a run of the capacity search; recovery: the final run;
    # not_started: a candidate that measured nothing (no other column but its identity is set)
    "verdict",  # keep, reject, neutral, incompatible, inconclusive, incomplete, or baseline
    "startup_failure",  # the startup failure class (incompatible, out-of-memory, ...); empty: it started
    "profile",
    "repeat",
    "load_level",
    "backend",
    "host",
    "time_scale",
    "started_at",
    "fingerprint",
    "duration_s",
    "num_requests",
    "completed",
    "failed",
    "prompt_tokens",
    "output_tokens",
    "prompt_tps",
    "output_tps",
    *(f"{name}_{field}_s" for name in _STATS for field in ("mean", "p50", "p90", "p99")),
    "first_visible_censored",
    "slo",
    "slo_met",
    "slo_margin",
    "slo_attainment",
    "goodput_rps",
    "goodput_tps",
    "preemptions",
    "peak_kv_cache_usage",
    "peak_waiting",
    "restart_detected",
    "prefix_cache_hit_rate",
    "spec_acceptance_rate",
    "spec_mean_accepted_length",
    "dispatch_lag_p99_s",
    "client_saturated",
    "interrupted",
    "summary_file",
)


def _stats(prefix: str, value: Stats | None) -> dict[str, object]:
    fields = ("mean", "p50", "p90", "p99")
    return {f"{prefix}_{f}_s": getattr(value, f) if value is not None else None for f in fields}


def summary_row(candidate: str, source: str, summary: ProfileSummary, file: str) -> dict[str, object]:
    """One CSV row of one summary (column order: :data:`COLUMNS`)."""
    s = summary
    slo, server = s.slo, s.server
    spec = server.speculative if server is not None else None
    row: dict[str, object] = {
        "candidate": candidate,
        "source": source,
        "profile": s.profile,
        "repeat": s.repeat,
        "load_level": s.load_level,
        "backend": s.backend,
        "host": s.host,
        "time_scale": s.time_scale,
        "started_at": s.started_at,
        "fingerprint": s.fingerprint,
        "duration_s": s.duration_s,
        "num_requests": s.num_requests,
        "completed": s.completed,
        "failed": s.failed,
        "prompt_tokens": s.prompt_tokens,
        "output_tokens": s.output_tokens,
        "prompt_tps": s.prompt_tps,
        "output_tps": s.output_tps,
        **_stats("ttft", s.ttft),
        **_stats("tpot", s.tpot),
        **_stats("itl", s.itl),
        **_stats("e2e", s.e2e),
        **_stats("first_visible", s.first_visible),
        "first_visible_censored": s.first_visible_censored.censored,
        "slo": slo.name if slo else None,
        "slo_met": slo.met if slo else None,
        "slo_margin": slo.margin if slo else None,
        "slo_attainment": slo.attainment if slo else None,
        "goodput_rps": slo.goodput_rps if slo else None,
        "goodput_tps": slo.goodput_tps if slo else None,
        "preemptions": server.preemptions if server else None,
        "peak_kv_cache_usage": server.peak_kv_cache_usage if server else None,
        "peak_waiting": server.peak_waiting if server else None,
        "restart_detected": server.restart_detected if server else None,
        "prefix_cache_hit_rate": server.prefix_cache_hit_rate if server else None,
        "spec_acceptance_rate": spec.acceptance_rate if spec else None,
        "spec_mean_accepted_length": spec.mean_accepted_length if spec else None,
        "dispatch_lag_p99_s": s.client.dispatch_lag_p99_s,
        "client_saturated": s.client.saturated,
        "interrupted": s.interrupted,
        "summary_file": file,
    }
    return row


def decisions(verdicts: SweepVerdict | None) -> dict[str, str]:
    """Candidate -> its decision (the baseline: ``baseline``), the ``verdict`` column."""
    if verdicts is None:
        return {}
    return {verdicts.baseline: "baseline", **{v.candidate: v.decision for v in verdicts.verdicts}}


def not_started_row(name: str, res: Results | None, verdict: str | None) -> dict[str, object]:
    """The one row of a candidate that measured no profile: its identity, verdict and startup failure."""
    row: dict[str, object] = dict.fromkeys(COLUMNS)
    run = res.run if res is not None else None
    row.update(
        candidate=name,
        source="not_started",
        verdict=verdict,
        startup_failure=(run.startup.kind or "failed") if run and not run.startup.ok else None,
        backend=run.backend if run else None,
        host=run.host if run else None,
        fingerprint=run.fingerprint if run else None,
        summary_file=res.run_file if res is not None and run is not None else None,
    )
    return row


def _with_verdict(
    rows: Iterator[dict[str, object]], verdicts: Mapping[str, str]
) -> Iterator[dict[str, object]]:
    for row in rows:
        row["verdict"] = verdicts.get(str(row["candidate"]))
        yield row


def summary_rows(
    sweep_dir: Path,
    results: Mapping[str, Results],
    recovery: Results | None = None,
    verdicts: SweepVerdict | None = None,
) -> Iterator[dict[str, object]]:
    """Every profile repeat (a baseline's blocks after its own), then every capacity-search run, candidate
    by candidate (a baseline's blocks' searches after its own), then the recovery run, then one row per
    candidate that measured nothing (every candidate ``results`` or ``verdicts`` names); each with its
    candidate's verdict."""
    decided = decisions(verdicts)
    measured = {name for name, res in results.items() if res.profiles or res.blocks}
    yield from _with_verdict(_measured_rows(sweep_dir, results, recovery), decided)
    for name in dict.fromkeys([*results, *decided]):
        if name not in measured:
            yield not_started_row(name, results.get(name), decided.get(name))


def _measured_rows(
    sweep_dir: Path, results: Mapping[str, Results], recovery: Results | None
) -> Iterator[dict[str, object]]:
    for name, res in results.items():
        for reps in res.profiles.values():
            for rep in reps:
                yield summary_row(name, "profile", rep.summary, rep.summary_file)
        for block in res.blocks:
            for reps in block.profiles.values():
                for rep in reps:
                    yield summary_row(name, "block", rep.summary, rep.summary_file)
    for name, res in results.items():
        for launch in (res, *res.blocks):  # a baseline's blocks search again (capacity.in_blocks)
            if launch.capacity is None:
                continue
            for point in launch.capacity.points:
                file = f"{launch.root}/{point.summary_file}"
                try:
                    summary = read_model(sweep_dir / file, ProfileSummary)
                except GauntletError:
                    continue  # capacity.json names it; a deleted run leaves no row rather than a broken one
                row = summary_row(name, "capacity", summary, file)
                row["load_level"] = point.level  # also for a profile repeat the search reused
                yield row
    if recovery is not None:
        for reps in recovery.profiles.values():
            for rep in reps:
                yield summary_row(recovery.name, "recovery", rep.summary, rep.summary_file)


def _cell(value: object) -> object:
    return "" if value is None else value


def render_csv(rows: Iterator[dict[str, object]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return out.getvalue()


def write_summaries_csv(
    sweep_dir: Path,
    results: Mapping[str, Results],
    recovery: Results | None = None,
    verdicts: SweepVerdict | None = None,
) -> Path:
    """``<sweep>/summaries.csv``; returns its path."""
    path = SweepPaths(sweep_dir).summaries_csv
    path.write_text(render_csv(summary_rows(sweep_dir, results, recovery, verdicts)))
    return path
