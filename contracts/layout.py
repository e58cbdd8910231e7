"""The sweep directory's layout: every file and folder name of a sweep, and the one way to find the latest.

Pipeline position: below everything that writes or reads a sweep (the sweep, the load runner, the judge,
the report); it imports only the error tree. No other module spells one of these names::

    <sweeps>/latest -> <sweep>/                       the last sweep started (point_latest, latest_sweep)
    <sweep>/
        config.yaml  overrides.txt  multirun.yaml     the composed configuration (Hydra's record beside it)
        jobs/<n>-<candidate>/.hydra/hydra.yaml        Hydra's record of each job
        journal.jsonl  journals/<node>-<job>.jsonl    the journal, and one per job of a parallel sweep
        opening.json  host.json  nodes/  .submitit/   the sweep's opening, the host probe, node slots, jobs
        .write-probe-<pid>/                           made and removed at the opening: may the sweep write?
        doctor.json                                   what `doctor` found before anything was stopped
        planned.json                                  the candidates the sweep was asked to measure
        verdicts.json  report.md  report.json  summaries.csv  *.png
        sim-vs-real.json  sim-vs-real.md              simulation against measurement (launch.sim.versus)
        retained/spec.json  retained/vllm-config.yaml the retained configuration as recorded at the start
        candidates/<name>/                            one launch (also <baseline>@<node>)
            spec.json  vllm-config.yaml  server.log  run.json
            candidate.yaml                            the typed candidate it measured (promote reads it)
            <profile>/r<k>/  summary.json  records.jsonl  metrics.json
            capacity.json  capacity/<level>/a<attempt>/
            blocks/after-<candidate>/                 the baseline again after a candidate: one launch
                                                      (its runs, and its capacity.json with capacity/)
        recovery/                                     the restored retained configuration: one launch
            server.log  run.json  validation.json  <profile>/r<k>/
        rollbacks/<stamp>/                            each rollback's own launch or validation (the
            server.log  run.json  validation.json     sweep's recovery/ is never touched again)
        promotions/<stamp>/                           each `promote`: the kept candidate made the retained one
            spec.json  vllm-config.yaml               its recorded spec, copied byte-for-byte
            conf/candidate/<name>.yaml                the candidate as a file (-cd conf candidate@baseline=)
            launch/  restored/                        its launch and validation; the previous one restored
        search/                                       a search (conf/search/): its trials and winner
            trials.json  study.db  winner.yaml        the trial record, Optuna's storage, the winner
            <finalist>.yaml                           each further finalist confirmed (search.confirm_top)
            candidates/<trial>/                       one launch per trial (spec.json ... capacity.json)

Outside the sweep directory, beside the port's lock (``<lock dir>``: orchestrator.ledger.lock)::

    <lock dir>/port-<port>.lock  port-<port>.request.json
    <lock dir>/port-<port>/                          what rollback needs if the sweep directory is lost
        sweep.json  config.yaml  spec.json  journal.jsonl  specs/<candidate>.json  specs/<promoted>.yaml
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import GauntletError
from contracts.layout_search import SearchFiles

# ---------------------------------------------------------------- the sweep directory
#: The composed configuration of a sweep, as the sweep wrote it (resolved YAML, Hydra's own keys removed).
CONFIG_FILE = "config.yaml"
#: The overrides the sweep was started with, one per line.
OVERRIDES_FILE = "overrides.txt"
#: Hydra's own record of a multirun (its launcher, its sweeper).
MULTIRUN_FILE = "multirun.yaml"
#: Hydra's own record: each job's folder (``hydra.sweep.subdir`` in conf/config.yaml) and its ``.hydra/``.
HYDRA_JOBS_DIR = "jobs"
HYDRA_OUTPUT_DIR = ".hydra"
HYDRA_CONFIG_FILE = "hydra.yaml"
#: Where a sweep's Hydra configuration was recorded, relative to it, in the order to try.
RECORDED_HYDRA = (
    MULTIRUN_FILE,
    f"{HYDRA_JOBS_DIR}/*/{HYDRA_OUTPUT_DIR}/{HYDRA_CONFIG_FILE}",
    f"{HYDRA_OUTPUT_DIR}/{HYDRA_CONFIG_FILE}",
)
#: The main journal, and the folder of the job journals beside it.
JOURNAL_FILE = "journal.jsonl"
JOURNALS_DIR = "journals"
#: The opening marker jobs read before they launch anything.
OPENING_FILE = "opening.json"
#: The probe of the host the sweep ran on.
HOST_FILE = "host.json"
#: What the pre-flight checks (``doctor``) found when the sweep opened, before anything was stopped.
DOCTOR_FILE = "doctor.json"
#: The candidates the sweep was asked to measure (every opening's, resumes included): the judge names
#: those it never reached.
PLANNED_FILE = "planned.json"
#: The simulated cluster's node slots (lock files).
NODES_DIR = "nodes"
#: Where the submitit plugin keeps its jobs (its default, ``${hydra.sweep.dir}/.submitit/%j``).
SUBMITIT_DIR = ".submitit"
#: What the gates decided, and the report rendered from it.
VERDICTS_FILE = "verdicts.json"
#: The report as one self-contained page (report/html.py).
REPORT_HTML = "report.html"
REPORT_MD = "report.md"
REPORT_JSON = "report.json"
SUMMARIES_CSV = "summaries.csv"
#: The report's plots, in the sweep directory.
PLOT_TTFT = "ttft.png"
PLOT_THROUGHPUT = "throughput.png"
PLOT_RANKING = "ranking.png"
PLOT_PARETO = "pareto.png"
PLOT_GOODPUT = "goodput.png"
#: A search's trials: objective estimate against launches spent (report.search_plot).
PLOT_SEARCH = "search.png"
#: The retained configuration's spec as recorded when the sweep began.
RETAINED_DIR = "retained"
#: A folder the sweep creates and removes at once when it opens, to learn that it may write (issue 22).
WRITE_PROBE = ".write-probe"
#: The simulator's prediction of the sweep's measured candidates, figure by figure (launch/sim/versus.py).
SIM_VS_REAL_FILE = "sim-vs-real.json"
SIM_VS_REAL_MD = "sim-vs-real.md"

# ---------------------------------------------------------------- one launch's result directory
#: Every launch of a candidate (and of the baseline, per node ``<baseline>@<node>``).
CANDIDATES_DIR = "candidates"
SPEC_FILE = "spec.json"
VLLM_CONFIG_FILE = "vllm-config.yaml"
SERVER_LOG = "server.log"
RUN_FILE = "run.json"
#: One profile run (``<profile>/r<k>/``), as the load runner writes it; the summary goes last.
#: A profile's result in `vllm bench serve`'s JSON shape (contracts/benchserve.py).
BENCH_SERVE_FILE = "bench_serve.json"
SUMMARY_FILE = "summary.json"
RECORDS_FILE = "records.jsonl"
METRICS_FILE = "metrics.json"
REPEAT_PREFIX = "r"
#: A candidate's capacity search, relative to its directory; its runs are under ``capacity/<level>/a<k>/``.
CAPACITY_FILE = "capacity.json"
CAPACITY_ROOT = "capacity"
#: A baseline's interleaved blocks: ``candidates/<baseline>/blocks/after-<candidate>/``.
BLOCKS_DIR = "blocks"
BLOCK_PREFIX = "after-"
#: Where the restored baseline's end-of-sweep measurement lives, relative to the sweep directory.
RECOVERY_ROOT = "recovery"
VALIDATION_FILE = "validation.json"
#: Each rollback's own result directory, ``rollbacks/<stamp>/`` (append-only evidence).
ROLLBACKS_DIR = "rollbacks"
#: The typed candidate a launch measured, in its directory (``promote`` writes it back as a candidate file).
CANDIDATE_FILE = "candidate.yaml"
#: Each ``promote``'s own folder, ``promotions/<stamp>/``: the candidate's spec copied byte-for-byte, the
#: candidate as a file in a config directory (``conf/candidate/<name>.yaml``: Hydra's group of candidates),
#: the promoted launch and its validation (``launch/``), and the previous retained configuration restored
#: when the promotion failed (``restored/``).
PROMOTIONS_DIR = "promotions"
PROMOTED_LAUNCH_DIR = "launch"
PROMOTION_RESTORED_DIR = "restored"
#: The record of the copy kept outside the sweep directory (which sweep, which retained fingerprint).
OFFSITE_FILE = "sweep.json"
#: The launched servers' specs in that copy (``specs/<candidate>.json``).
OFFSITE_SPECS_DIR = "specs"

#: A search's folder and its files: :mod:`contracts.layout_search` (this layout's part, split by concern).

# ---------------------------------------------------------------- the sweeps folder
#: Where sweeps go when no configuration says otherwise (``run.sweeps_dir``).
DEFAULT_SWEEPS_DIR = "sweeps"
#: The link to the last sweep started, inside the sweeps folder.
LATEST_LINK = "latest"


def candidate_root(name: str) -> str:
    """A candidate's result root relative to the sweep directory (``candidates/<name>``), for evidence."""
    return f"{CANDIDATES_DIR}/{name}"


def candidates_dir(sweep: Path) -> Path:
    return sweep / CANDIDATES_DIR


def candidate_dir(sweep: Path, name: str) -> Path:
    return sweep / CANDIDATES_DIR / name


def repeat_name(profile: str, repeat: int) -> str:
    """``<profile>/r<k>``: one profile run, relative to its launch's directory (what run.json lists)."""
    return f"{profile}/{REPEAT_PREFIX}{repeat}"


def repeat_dir(root: Path, profile: str, repeat: int) -> Path:
    """Where one profile run of the launch whose directory is ``root`` lives."""
    return root / profile / f"{REPEAT_PREFIX}{repeat}"


def profile_dir(sweep: Path, candidate: str, profile: str, repeat: int) -> Path:
    """One profile run of a candidate: ``<sweep>/candidates/<candidate>/<profile>/r<k>``."""
    return repeat_dir(candidate_dir(sweep, candidate), profile, repeat)


def repeat_number(dirname: str) -> int | None:
    """``k`` of a folder named ``r<k>``; None for any other name."""
    rest = dirname.removeprefix(REPEAT_PREFIX)
    return int(rest) if rest != dirname and rest.isascii() and rest.isdigit() else None


def summary_glob() -> str:
    """The glob of a profile's repeats' summaries, relative to the profile's folder."""
    return f"{REPEAT_PREFIX}*/{SUMMARY_FILE}"


def block_name(after: str) -> str:
    return f"{BLOCK_PREFIX}{after}"


def block_root(baseline_root: str, after: str) -> str:
    """The result root of the block measured after candidate ``after`` (relative, like ``root``)."""
    return f"{baseline_root}/{BLOCKS_DIR}/{block_name(after)}"


def block_dir(sweep: Path, baseline: str, after: str) -> Path:
    """Where the block of ``baseline`` measured after candidate ``after`` lives."""
    return candidate_dir(sweep, baseline) / BLOCKS_DIR / block_name(after)


def recovery_dir(sweep: Path) -> Path:
    return sweep / RECOVERY_ROOT


def rollback_dir(sweep: Path, stamp: str) -> Path:
    """One rollback's result directory, ``<sweep>/rollbacks/<stamp>``."""
    return sweep / ROLLBACKS_DIR / stamp


def hydra_job_configs(sweep: Path, candidate: str) -> list[Path]:
    """Hydra's record of each job that measured ``candidate`` (``jobs/<n>-<candidate>/.hydra/config.yaml``,
    by ``hydra.sweep.subdir``), in job order."""
    found: list[tuple[int, Path]] = []
    jobs = sweep / HYDRA_JOBS_DIR
    if not jobs.is_dir():
        return []
    for folder in jobs.iterdir():
        number, _, name = folder.name.partition("-")
        config = folder / HYDRA_OUTPUT_DIR / CONFIG_FILE
        if number.isdigit() and name == candidate and config.is_file():
            found.append((int(number), config))
    return [path for _, path in sorted(found)]


def promotion_dir(sweep: Path, stamp: str) -> Path:
    """One promotion's folder, ``<sweep>/promotions/<stamp>``."""
    return sweep / PROMOTIONS_DIR / stamp


def offsite_dir(lock_dir: Path, port: int) -> Path:
    """The copy of what rollback needs for the sweep on ``port``: ``<lock dir>/port-<port>/``."""
    return lock_dir / f"port-{port}"


def write_probe(folder: Path, pid: int) -> tuple[Path, Path]:
    """The folder a writer of ``folder`` makes and removes to learn that it may write
    (``.write-probe-<pid>/``), and the file it writes in it."""
    probe = folder / f"{WRITE_PROBE}-{pid}"
    return probe, probe / WRITE_PROBE


def retained_spec_file(sweep: Path) -> Path:
    return sweep / RETAINED_DIR / SPEC_FILE


def journal_file(sweep: Path) -> Path:
    return sweep / JOURNAL_FILE


def journals_dir(sweep: Path) -> Path:
    return sweep / JOURNALS_DIR


def submitit_folder(sweep: Path) -> Path:
    """submitit's folder pattern of this sweep's jobs (``%j``: the job id)."""
    return sweep / SUBMITIT_DIR / "%j"


# ---------------------------------------------------------------- typed paths
# The layout above as attribute reads: ``SweepPaths(sweep).candidate(name).repeat(profile, k).summary``
# instead of joining a directory and a name. Each object is a directory; its properties are the files
# and folders the layout puts in it.


@dataclass(frozen=True)
class RepeatPaths:
    """One profile run's folder (``<profile>/r<k>/``, or a capacity attempt's ``capacity/<level>/a<k>/``)."""

    root: Path

    @property
    def summary(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def records(self) -> Path:
        return self.root / RECORDS_FILE

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def bench_serve(self) -> Path:
        return self.root / BENCH_SERVE_FILE


@dataclass(frozen=True)
class LaunchPaths:
    """One launch's result directory: ``candidates/<name>/``, a block, ``recovery/``, ``rollbacks/<stamp>/``
    (each is one launch)."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / SPEC_FILE

    @property
    def vllm_config(self) -> Path:
        return self.root / VLLM_CONFIG_FILE

    @property
    def server_log(self) -> Path:
        return self.root / SERVER_LOG

    @property
    def run_file(self) -> Path:
        """The launch's record (``run.json``), written by one writer (orchestrator.measure.launch)."""
        return self.root / RUN_FILE

    @property
    def capacity(self) -> Path:
        """The capacity search's result (``capacity.json``)."""
        return self.root / CAPACITY_FILE

    @property
    def validation(self) -> Path:
        """A restore's or a rollback's validation of the retained server (``validation.json``)."""
        return self.root / VALIDATION_FILE

    @property
    def candidate_config(self) -> Path:
        """The typed candidate this launch measured (``candidate.yaml``)."""
        return self.root / CANDIDATE_FILE

    @property
    def blocks(self) -> Path:
        """A baseline's interleaved blocks' folder (``blocks/``)."""
        return self.root / BLOCKS_DIR

    def repeat(self, profile: str, repeat: int) -> RepeatPaths:
        return RepeatPaths(repeat_dir(self.root, profile, repeat))

    def capacity_run(self, level: str, attempt: int) -> RepeatPaths:
        return RepeatPaths(self.root / capacity_run_root(level, attempt))

    def block(self, after: str) -> LaunchPaths:
        """The block of this baseline measured after candidate ``after``: a launch of its own."""
        return LaunchPaths(self.blocks / block_name(after))


@dataclass(frozen=True)
class SweepPaths(SearchFiles):
    """A sweep directory: its records, and each launch's directory (:class:`LaunchPaths`); a search's
    files (``search/``) are :class:`~contracts.layout_search.SearchFiles`'."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def overrides(self) -> Path:
        return self.root / OVERRIDES_FILE

    @property
    def multirun(self) -> Path:
        return self.root / MULTIRUN_FILE

    @property
    def journal(self) -> Path:
        return journal_file(self.root)

    @property
    def journals(self) -> Path:
        return journals_dir(self.root)

    @property
    def opening(self) -> Path:
        return self.root / OPENING_FILE

    @property
    def host(self) -> Path:
        return self.root / HOST_FILE

    @property
    def doctor(self) -> Path:
        return self.root / DOCTOR_FILE

    @property
    def planned(self) -> Path:
        return self.root / PLANNED_FILE

    @property
    def nodes(self) -> Path:
        return self.root / NODES_DIR

    @property
    def submitit(self) -> Path:
        return self.root / SUBMITIT_DIR

    @property
    def verdicts(self) -> Path:
        return self.root / VERDICTS_FILE

    @property
    def report_md(self) -> Path:
        return self.root / REPORT_MD

    @property
    def report_json(self) -> Path:
        return self.root / REPORT_JSON

    @property
    def report_html(self) -> Path:
        return self.root / REPORT_HTML

    @property
    def summaries_csv(self) -> Path:
        return self.root / SUMMARIES_CSV

    @property
    def sim_vs_real(self) -> Path:
        return self.root / SIM_VS_REAL_FILE

    @property
    def sim_vs_real_md(self) -> Path:
        return self.root / SIM_VS_REAL_MD

    @property
    def retained_spec(self) -> Path:
        return retained_spec_file(self.root)

    @property
    def search_plot(self) -> Path:
        """The search's plot (``search.png``: report.search_plot), beside the report's other plots."""
        return self.root / PLOT_SEARCH

    def trial(self, name: str) -> LaunchPaths:
        """One trial's launch, ``search/candidates/<name>/``."""
        return LaunchPaths(self.search / CANDIDATES_DIR / name)

    @property
    def candidates(self) -> Path:
        return candidates_dir(self.root)

    def candidate(self, name: str) -> LaunchPaths:
        return LaunchPaths(candidate_dir(self.root, name))

    def at(self, root: str) -> LaunchPaths:
        """The launch whose result root, relative to the sweep, is ``root`` (what evidence names)."""
        return LaunchPaths(self.root / root)

    @property
    def recovery(self) -> LaunchPaths:
        return LaunchPaths(recovery_dir(self.root))

    def rollback(self, stamp: str) -> LaunchPaths:
        return LaunchPaths(rollback_dir(self.root, stamp))

    @property
    def promotions(self) -> Path:
        """Every ``promote``'s folder is in it (``promotions/<stamp>/``)."""
        return self.root / PROMOTIONS_DIR

    def promotion(self, stamp: str) -> PromotionPaths:
        return PromotionPaths(promotion_dir(self.root, stamp))


@dataclass(frozen=True)
class PromotionPaths:
    """One ``promote``'s folder (``promotions/<stamp>/``)."""

    root: Path

    @property
    def spec(self) -> Path:
        """The promoted candidate's recorded spec, copied byte-for-byte (what its launch runs)."""
        return self.root / SPEC_FILE

    @property
    def vllm_config(self) -> Path:
        return self.root / VLLM_CONFIG_FILE

    @property
    def conf(self) -> Path:
        """A config directory holding the promoted candidate (``-cd`` it, or copy its file into yours): named
        as Hydra's config directories are, not a name of the sweep's own records."""
        return self.root / "conf"

    def candidate_file(self, name: str) -> Path:
        """The promoted candidate as a file of Hydra's candidate group (``conf/candidate/<name>.yaml``)."""
        return self.conf / "candidate" / f"{name}.yaml"

    @property
    def launch(self) -> LaunchPaths:
        """The promoted candidate's launch and its validation under load."""
        return LaunchPaths(self.root / PROMOTED_LAUNCH_DIR)

    @property
    def restored(self) -> LaunchPaths:
        """The previous retained configuration, restored and validated after a failed promotion."""
        return LaunchPaths(self.root / PROMOTION_RESTORED_DIR)


@dataclass(frozen=True)
class OffsitePaths:
    """The copy of what rollback needs, beside the port's lock (``<lock dir>/port-<port>/``)."""

    root: Path

    @property
    def record(self) -> Path:
        """Which sweep, which retained fingerprint (``sweep.json``)."""
        return self.root / OFFSITE_FILE

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def spec(self) -> Path:
        return self.root / SPEC_FILE

    @property
    def journal(self) -> Path:
        return self.root / JOURNAL_FILE

    @property
    def specs(self) -> Path:
        """The launched servers' specs (``specs/<candidate>.json``)."""
        return self.root / OFFSITE_SPECS_DIR

    def candidate_file(self, name: str) -> Path:
        """A promoted candidate's file (``specs/<candidate>.yaml``): the restore checks its server with it."""
        return self.specs / f"{name}.yaml"


# ---------------------------------------------------------------- the latest sweep
def latest_link(sweeps: Path) -> Path:
    return sweeps / LATEST_LINK


def latest_sweep(sweeps: Path, *, error: type[GauntletError], hint: str) -> Path:
    """The sweep ``<sweeps>/latest`` points at, resolved: the one way to find the latest sweep. When there
    is none, ``error`` (the asking command's kind, for its exit code) says where it looked, with ``hint``."""
    latest = latest_link(sweeps)
    if not latest.exists():
        raise error(f"no sweep found ({latest} does not exist)", hint=hint)
    return latest.resolve()


def previous_latest(sweeps: Path) -> Path | None:
    """The sweep ``<sweeps>/latest`` points at while it is a link to a directory (before it moves on)."""
    latest = latest_link(sweeps)
    return latest.resolve() if latest.is_symlink() and latest.resolve().is_dir() else None


def point_latest(sweeps: Path, target: Path) -> None:
    """Make ``<sweeps>/latest`` point at ``target`` (atomically, relative when it can be)."""
    sweeps.mkdir(parents=True, exist_ok=True)
    link = latest_link(sweeps)
    tmp = sweeps / f".{LATEST_LINK}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    try:
        rel = os.path.relpath(target.resolve(), sweeps.resolve())
    except ValueError:
        rel = str(target.resolve())
    tmp.symlink_to(rel)
    os.replace(tmp, link)


def capacity_run_root(level: str, attempt: int) -> str:
    """One run of a capacity search, relative to its candidate's directory: ``capacity/<level>/a<k>``."""
    return f"{CAPACITY_ROOT}/{level}/a{attempt}"
