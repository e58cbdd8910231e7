"""Reading a sweep directory into what the gates judge: runs, repeats and measured requests.

Pipeline position: the only module of ``gates`` that touches the file system on the way in. It reads
the files the sweep and the load runner wrote (:mod:`contracts.results`, validated on read) and
nothing else; every path it hands on is relative to the sweep directory, for evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contracts.results import (
    CandidateRun,
    ProfileSummary,
    RequestRecord,
    read_jsonl,
    read_model,
)
from gates.stats import RunSample

_REPEAT = re.compile(r"^r(\d+)$")


@dataclass(frozen=True)
class Repeat:
    """One (profile, repeat): its summary and its measured requests (warmup excluded)."""

    summary: ProfileSummary
    records: list[RequestRecord]
    summary_file: str  # relative to the sweep directory
    records_file: str

    def throughput_sample(self, metric: str) -> RunSample:
        """``output_tps`` or ``prompt_tps`` of this repeat with its per-request parts."""
        value = float(getattr(self.summary, metric))
        done = [r for r in self.records if r.end_s is not None and r.end_s > 0]
        if metric == "output_tps":
            amounts = [float(r.completion_tokens or 0) for r in done]
        else:
            amounts = [float(r.prompt_tokens or 0) for r in done]
        times = [float(r.end_s or 0.0) for r in done]
        return RunSample(value, np.asarray(amounts, dtype=np.float64), np.asarray(times, dtype=np.float64))


@dataclass(frozen=True)
class Results:
    """Everything stored for one launch: the candidate's run file and its profiles' repeats."""

    name: str
    root: str  # relative to the sweep directory, e.g. "candidates/tp4_dp2" or "recovery"
    run: CandidateRun | None
    profiles: dict[str, list[Repeat]] = field(default_factory=dict)

    @property
    def run_file(self) -> str:
        return f"{self.root}/run.json"

    @property
    def started(self) -> bool:
        return self.run is not None and self.run.startup.ok

    def repeats(self, profile: str) -> list[Repeat]:
        return self.profiles.get(profile, [])


def load_results(sweep_dir: Path, root: str, name: str) -> Results:
    """Read ``<sweep>/<root>/run.json`` and every ``<profile>/r<k>/summary.json`` (+ records) below it."""
    base = sweep_dir / root
    run_path = base / "run.json"
    run = read_model(run_path, CandidateRun) if run_path.exists() else None
    profiles: dict[str, list[Repeat]] = {}
    if base.is_dir():
        for profile_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            repeats: list[tuple[int, Repeat]] = []
            for repeat_dir in profile_dir.iterdir():
                match = _REPEAT.match(repeat_dir.name)
                summary_path = repeat_dir / "summary.json"
                if not match or not summary_path.exists():
                    continue
                summary = read_model(summary_path, ProfileSummary)
                records_path = repeat_dir / summary.records_file
                records = [r for r in read_jsonl(records_path, RequestRecord) if not r.warmup]
                rel = f"{root}/{profile_dir.name}/{repeat_dir.name}"
                repeats.append(
                    (
                        int(match.group(1)),
                        Repeat(summary, records, f"{rel}/summary.json", f"{rel}/{summary.records_file}"),
                    )
                )
            if repeats:
                profiles[profile_dir.name] = [r for _, r in sorted(repeats, key=lambda item: item[0])]
    return Results(name=name, root=root, run=run, profiles=profiles)


def candidate_names(sweep_dir: Path) -> list[str]:
    """Every directory under ``<sweep>/candidates/``, sorted."""
    root = sweep_dir / "candidates"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())
