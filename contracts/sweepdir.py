"""Reading a sweep directory: runs, repeats and measured requests, as the judge and the report see them.

Pipeline position: the way in for both late stages. The gates judge what this returns and the report
renders it; neither walks the directory itself. It reads the files the sweep and the load runner wrote
(:mod:`contracts.results`, validated on read) and nothing else; every path it hands on is relative to the
sweep directory, for evidence::

    base = load_results(sweep_dir, "candidates/baseline", "baseline")
    base.repeats("decode_heavy")[0].records        # the first repeat's measured requests
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from pydantic import TypeAdapter, ValidationError

from contracts.errors import ResultFileError
from contracts.files import read_jsonl, read_model, write_model
from contracts.layout import (
    BLOCK_PREFIX,
    BLOCKS_DIR,
    CAPACITY_FILE,
    CONFIG_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    RepeatPaths,
    SweepPaths,
    candidates_dir,
    repeat_number,
)
from contracts.lmeval_sweep import LmEvalOutcome, read_launch_lm_eval
from contracts.results import (
    CandidateRun,
    CapacityResult,
    HostProbe,
    ProfileSummary,
    RecoveryValidation,
    RequestRecord,
    SweepPlan,
)
from contracts.schema import GauntletConfig


@dataclass(frozen=True)
class Repeat:
    """One (profile, repeat): its summary and its measured requests (warmup excluded)."""

    summary: ProfileSummary
    records: list[RequestRecord]
    summary_file: str  # relative to the sweep directory
    records_file: str


@dataclass(frozen=True)
class Results:
    """Everything stored for one launch: the candidate's run file and its profiles' repeats."""

    name: str
    root: str  # relative to the sweep directory, e.g. "candidates/tp4_dp2" or "recovery"
    run: CandidateRun | None
    profiles: dict[str, list[Repeat]] = field(default_factory=dict)
    capacity: CapacityResult | None = None  # the capacity search (capacity.json), when one ran
    #: A baseline's interleaved blocks (``blocks/after-<candidate>/``, run.interleave) in measuring order:
    #: the drift check's later runs. They are not in ``profiles``: the gates compare a candidate with the
    #: opening repeats, which an adaptive look already saw (a block after it would change its verdict).
    blocks: tuple[Results, ...] = ()
    #: The launch's lm_eval runs (``lm_eval/<profile>/``, :mod:`contracts.lmeval_sweep`): each profile's
    #: per-document scores, or why lm-eval left none.
    lm_eval: dict[str, LmEvalOutcome] = field(default_factory=dict)

    @property
    def capacity_file(self) -> str:
        return f"{self.root}/{CAPACITY_FILE}"

    @property
    def run_file(self) -> str:
        return f"{self.root}/{RUN_FILE}"

    @property
    def started(self) -> bool:
        return self.run is not None and self.run.startup.ok

    def repeats(self, profile: str) -> list[Repeat]:
        return self.profiles.get(profile, [])

    def samples(self, profile: str) -> list[Repeat]:
        """The repeats of ``profile`` that ran to their end: its throughput and latency samples. A run cut
        short (a stop, a lost server, the time bound) is evidence of what cut it, never a sample."""
        return [r for r in self.repeats(profile) if not r.summary.interrupted]

    def block_repeats(self, profile: str) -> list[Repeat]:
        """A baseline's repeats of ``profile`` in its interleaved blocks, in measuring order."""
        return [r for block in self.blocks for r in block.repeats(profile)]


def _repeat(sweep_dir: Path, root: str, profile: str, name: str) -> Repeat | None:
    directory = sweep_dir / root / profile / name
    summary_path = RepeatPaths(directory).summary
    if not summary_path.exists():
        return None
    summary = read_model(summary_path, ProfileSummary)
    records = [r for r in read_jsonl(directory / summary.records_file, RequestRecord) if not r.warmup]
    rel = f"{root}/{profile}/{name}"
    return Repeat(summary, records, f"{rel}/{SUMMARY_FILE}", f"{rel}/{summary.records_file}")


def load_results(sweep_dir: Path, root: str, name: str) -> Results:
    """Read ``<sweep>/<root>/run.json`` and every ``<profile>/r<k>/summary.json`` (+ records) below it."""
    launch = SweepPaths(sweep_dir).at(root)
    base, run_path = launch.root, launch.run_file
    run = read_model(run_path, CandidateRun) if run_path.exists() else None
    profiles: dict[str, list[Repeat]] = {}
    if base.is_dir():
        for profile_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            repeats: list[tuple[int, Repeat]] = []
            for repeat_dir in profile_dir.iterdir():
                number = repeat_number(repeat_dir.name)
                repeat = (
                    _repeat(sweep_dir, root, profile_dir.name, repeat_dir.name)
                    if number is not None
                    else None
                )
                if number is not None and repeat is not None:
                    repeats.append((number, repeat))
            if repeats:
                profiles[profile_dir.name] = [r for _, r in sorted(repeats, key=lambda item: item[0])]
    capacity_path = launch.capacity
    capacity = read_model(capacity_path, CapacityResult) if capacity_path.exists() else None
    lm_eval = read_launch_lm_eval(base)
    return Results(name=name, root=root, run=run, profiles=profiles, capacity=capacity, lm_eval=lm_eval)


def load_baseline(sweep_dir: Path, root: str, name: str) -> Results:
    """A baseline's results (its opening repeats) with its interleaved blocks in measuring order (by the
    block's first repeat's start; a block that never started last)."""
    return with_blocks(sweep_dir, load_results(sweep_dir, root, name))


def with_blocks(sweep_dir: Path, base: Results) -> Results:
    """A baseline's results ``base`` (read already) with its interleaved blocks, read now, in measuring
    order (:func:`load_baseline`)."""
    root, name = base.root, base.name
    blocks_dir = SweepPaths(sweep_dir).at(root).blocks
    if not blocks_dir.is_dir():
        return base
    blocks = [
        load_results(sweep_dir, f"{root}/{BLOCKS_DIR}/{d.name}", name)
        for d in sorted(blocks_dir.iterdir())
        if d.is_dir() and d.name.startswith(BLOCK_PREFIX)
    ]
    return replace(base, blocks=tuple(sorted(blocks, key=_block_start)))


def _block_start(block: Results) -> str:
    starts = [r.summary.started_at for reps in block.profiles.values() for r in reps]
    return min(starts) if starts else "~"  # after every ISO time


#: ``<baseline>@<node>``: the retained configuration measured on one node of a parallel sweep. Candidate
#: names cannot contain it (orchestrator.config.validate.CANDIDATE_NAME), so such a directory is never a
#: candidate.
NODE_SEPARATOR = "@"


def candidate_names(sweep_dir: Path) -> list[str]:
    """Every candidate directory under ``<sweep>/candidates/``, sorted (node baselines left out)."""
    return [n for n in _result_dirs(sweep_dir) if NODE_SEPARATOR not in n]


def planned_names(sweep_dir: Path) -> list[str]:
    """The candidates the sweep was asked to measure (``planned.json``), in the order asked; [] when the
    sweep recorded none."""
    path = SweepPaths(sweep_dir).planned
    return read_model(path, SweepPlan).candidates if path.exists() else []


def record_planned(sweep_dir: Path, names: Sequence[str]) -> Path:
    """Add ``names`` to ``planned.json`` (a resume keeps what the earlier openings asked for); its path."""
    try:
        earlier = planned_names(sweep_dir)
    except ResultFileError:  # unreadable: this opening's plan replaces it
        earlier = []
    path = SweepPaths(sweep_dir).planned
    write_model(
        path, SweepPlan(candidates=[*earlier, *(n for n in dict.fromkeys(names) if n not in earlier)])
    )
    return path


def node_baseline_names(sweep_dir: Path) -> list[str]:
    """The baselines a parallel sweep measured per node (``<baseline>@<node>``), sorted."""
    return [n for n in _result_dirs(sweep_dir) if NODE_SEPARATOR in n]


def _result_dirs(sweep_dir: Path) -> list[str]:
    root = candidates_dir(sweep_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_host_probe(sweep_dir: Path) -> HostProbe | None:
    """``<sweep>/host.json``, the probe of the host the sweep ran on; None when it was not written."""
    path = SweepPaths(sweep_dir).host
    return read_model(path, HostProbe) if path.exists() else None


def read_recovery_validation(sweep_dir: Path) -> RecoveryValidation | None:
    """``<sweep>/recovery/validation.json``; None when the recovery validation did not run."""
    path = SweepPaths(sweep_dir).recovery.validation
    return read_model(path, RecoveryValidation) if path.exists() else None


def sweep_dir_argument(args: Sequence[str], *, prog: str, description: str) -> Path | int:
    """The one ``SWEEP_DIR`` argument of a stage's command (judge, report); an int is the exit code
    argparse chose instead (2 for a usage error, 0 after ``--help``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("sweep_dir", type=Path, help="the sweep directory (e.g. sweeps/latest)")
    try:
        sweep_dir: Path = parser.parse_args(list(args)).sweep_dir
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return sweep_dir


#: Hydra overrides of a recorded sweep that the resume command sets itself (or that Hydra sets).
_NOT_REPEATED = ("hydra.sweep.dir=", "hydra.run.dir=", "hydra.mode=")


def resume_command(sweep_dir: Path) -> str:
    """The command that resumes a sweep: its own overrides again, with its directory (complete results are
    skipped, partial ones measured again; ``docs/cli.md``). The overrides come from ``multirun.yaml``
    (Hydra's and the task's, launcher included) or else ``overrides.txt``; with neither, the case study's
    ``candidate=glob(*)``. Flags outside Hydra's overrides (``-cd DIR``) are not recorded: add yours.

    >>> resume_command(Path("/nonexistent/sweeps/1"))
    "python -m orchestrator -m 'candidate=glob(*)' hydra.sweep.dir=/nonexistent/sweeps/1"
    """
    overrides: list[str] = []
    paths = SweepPaths(sweep_dir)
    recorded, listed = paths.multirun, paths.overrides
    try:
        if recorded.exists():
            data = yaml.safe_load(recorded.read_text()) or {}
            hydra = data.get("hydra", {}) if isinstance(data, dict) else {}
            given = hydra.get("overrides", {}) if isinstance(hydra, dict) else {}
            for key in ("hydra", "task"):
                overrides += [str(o) for o in (given.get(key) or [])] if isinstance(given, dict) else []
        elif listed.exists():
            overrides = [line.strip() for line in listed.read_text().splitlines() if line.strip()]
    except (OSError, yaml.YAMLError):
        overrides = []
    kept = [o for o in overrides if not o.startswith(_NOT_REPEATED)]
    if not any(o.startswith("candidate=") for o in kept):
        kept.append("candidate=glob(*)")
    return shlex.join(["python", "-m", "orchestrator", "-m", *kept, f"hydra.sweep.dir={sweep_dir}"])


def read_sweep_config(sweep_dir: Path) -> GauntletConfig:
    """The typed configuration a sweep recorded in ``<sweep_dir>/config.yaml``, type-checked on read.

    Every stage that rebuilds from disk (judge, report, rollback, stop) reads the configuration here,
    without Hydra or OmegaConf; a missing file or a value of the wrong type is a
    :class:`~contracts.errors.ResultFileError` naming the file and the field.
    """
    path = SweepPaths(sweep_dir).config
    if not path.is_file():
        raise ResultFileError(
            f"{path}: missing (no {CONFIG_FILE} here)", hint="pass a sweep directory written by gauntlet"
        )
    try:
        raw = yaml.safe_load(path.read_text())
        return _CONFIG_ADAPTER.validate_python(raw)
    except yaml.YAMLError as exc:
        raise ResultFileError(f"{path}: not YAML ({exc})") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])} = {err.get('input')!r}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise ResultFileError(
            f"{path}: not a gauntlet configuration ({problems})",
            hint="the file was edited or written by another version; re-run the sweep or restore the file",
        ) from exc


_CONFIG_ADAPTER: TypeAdapter[GauntletConfig] = TypeAdapter(GauntletConfig)
