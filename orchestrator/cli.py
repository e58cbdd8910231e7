"""Hydra's command-line flags on the commands that act on a sweep directory (rollback, stop, status,
judge, report).

Pipeline position: the command line, before a command that reads a sweep's recorded files. Those commands
do not load Hydra: without a Hydra flag or an override this module passes the arguments on untouched, and
Hydra is imported only to parse flags (Hydra's own parser, so every flag is spelled and checked exactly as
for ``@hydra.main``) and for the flags that need it. What each flag means here (a recorded sweep already
has its configuration; ``docs/cli.md``):

- ``--config-dir/-cd``, ``--config-path/-cp``, ``--config-name/-cn`` and ``key=value`` overrides compose
  the configuration only to find ``run.sweeps_dir`` when no SWEEP_DIR is given (its ``latest``); with a
  SWEEP_DIR they change nothing, and the command says so.
- ``--cfg job|hydra|all`` (with ``--resolve``, ``--package``) prints the configuration the sweep recorded
  (``config.yaml``, the ``hydra`` node of ``multirun.yaml``) and runs nothing.
- ``--info [all|config|defaults|defaults-tree|plugins|searchpath]`` prints where that configuration came
  from (search path, group choices, launcher/sweeper, overrides), and runs nothing.
- ``--help`` prints the command's help; ``--hydra-help`` Hydra's; ``--version`` Hydra's version.
- ``-m/--run``, ``--shell-completion`` and ``--experimental-rerun`` start or complete a Hydra run: they
  belong to the sweep, and are refused here with a pointer to it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import GauntletError, SweepLockedError
from contracts.layout import DEFAULT_SWEEPS_DIR, latest_sweep


class UsageError(GauntletError):
    """A command line that asks for something the command does not do (exit 2, as argparse's)."""

    exit_code = 2


#: Commands that act on a sweep directory, and what each does (their help).
SWEEP_DIR_COMMANDS = {
    "rollback": "stop what gauntlet started, restore the retained configuration byte-for-byte and "
    "validate it under load, into rollbacks/<stamp>/ (a running sweep of SWEEP_DIR is asked to unwind, "
    "restore and validate itself)",
    "stop": "stop every server gauntlet started for the sweep, the retained one included, restoring nothing "
    "(a running sweep of SWEEP_DIR is asked to unwind at once)",
    "status": "say what gauntlet has running, its fingerprint, whether it is healthy, and the sweep's state ("
    "settled, restored but not yet validated, stopped by the user, running; --json: the same facts as "
    "one JSON object)",
    "judge": "judge the stored results again and write verdicts.json (on a sweep that is still running: "
    "refused, exit 4; `judge --force SWEEP_DIR` prints what has landed, marked PARTIAL, exit 8, and writes "
    "nothing)",
    "report": "render the decision table, report.md, report.html, report.json and the plots from "
    "verdicts.json and the files (refused on a sweep that is still running, exit 4)",
}
#: judge and report need the directory (or config flags/overrides that locate the latest sweep); the
#: others default to the latest sweep.
NEEDS_DIR = ("judge", "report")

FLAGS_HELP = """Hydra flags (the same parser as the sweep; what they mean for a recorded sweep):
  -cd, --config-dir DIR      add DIR to the config search path; with -cp/-cn and key=value overrides it
                             only locates run.sweeps_dir (its `latest`) when SWEEP_DIR is not given
  -cp, --config-path PATH    the primary config directory (default: the project's conf/)
  -cn, --config-name NAME    the primary config (default: config)
  -c,  --cfg job|hydra|all   print the configuration the sweep recorded (config.yaml, multirun.yaml's
                             hydra node) and run nothing; --resolve resolves it, -p/--package selects a node
  -i,  --info [WHAT]         print where the recorded configuration came from: all, config, defaults,
                             defaults-tree, plugins, searchpath
  -h,  --help                this help; --hydra-help: Hydra's own; --version: Hydra's version
  -m, -r, -sc                runs and shell completion belong to the sweep: python -m orchestrator -m ...
"""


def command_help(command: str) -> str:
    """The help of a sweep-directory command, flags included."""
    arg = "SWEEP_DIR" if command in NEEDS_DIR else "[SWEEP_DIR]"
    default = (
        " (or the latest under run.sweeps_dir of the config flags and overrides given)"
        if command in NEEDS_DIR
        else " (default: sweeps/latest; with config flags or overrides, the latest under their "
        "run.sweeps_dir)"
    )
    return (
        f"usage: python -m orchestrator {command} [hydra flags] [overrides] {arg}\n\n"
        f"{SWEEP_DIR_COMMANDS[command]}{default}.\n\n{FLAGS_HELP}"
    )


def uses_hydra_flags(args: Sequence[str]) -> bool:
    """Whether ``args`` carry a flag or an override (anything Hydra parses) besides a plain SWEEP_DIR."""
    return any(a.startswith("-") or "=" in a for a in args)


def run_sweep_dir_command(
    command: str,
    args: Sequence[str],
    run: Callable[[list[str]], int],
    *,
    err: Callable[[str], None] | None = None,
) -> int:
    """Parse Hydra's flags for ``command``, do what they ask, and call ``run([SWEEP_DIR])`` when it runs."""
    say = err or _stderr
    if any(a in ("-h", "--help") for a in args):
        print(command_help(command), end="")
        return 0
    if not uses_hydra_flags(args):
        return run(list(args))
    from orchestrator.config import compose as config  # noqa: PLC0415  (Hydra: only when a flag or override needs it)

    try:
        parsed = config.parse_hydra_args(args)
    except SystemExit as exc:  # argparse printed the usage error
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return _dispatch(command, parsed, run, say)
    except GauntletError as exc:
        say(f"gauntlet {command}: {exc}")
        return exc.exit_code


def _dispatch(
    command: str, parsed: object, run: Callable[[list[str]], int], say: Callable[[str], None]
) -> int:
    from orchestrator.config import compose as config  # noqa: PLC0415

    args = vars(parsed)
    refused = [f for f, on in (("-m", args["multirun"]), ("--run", args["run"]),
                               ("--shell-completion", args["shell_completion"]),
                               ("--experimental-rerun", args["experimental_rerun"])) if on]  # fmt: skip
    if refused:
        raise UsageError(
            f"{', '.join(refused)} starts or completes a Hydra run; `{command}` acts on a recorded sweep",
            hint="run the sweep with `python -m orchestrator -m 'candidate=glob(*)' ...`",
        )
    if args["hydra_help"]:
        return config.show(parsed, command=command)  # type: ignore[arg-type]
    positional = [o for o in args["overrides"] if "=" not in o]
    overrides = [o for o in args["overrides"] if "=" in o]
    if len(positional) > 1:
        raise UsageError(f"one SWEEP_DIR at most, got {' '.join(positional)}", hint=command_help(command))
    location = config.ConfigLocation.from_args(parsed)  # type: ignore[arg-type]
    composing = bool(overrides) or location != config.ConfigLocation()
    if positional:
        sweep_dir = Path(positional[0])
        if composing:
            say(
                f"gauntlet {command}: {sweep_dir} recorded its configuration; the config flags and overrides "
                "only locate the latest sweep when no SWEEP_DIR is given, and change nothing here"
            )
    elif composing:
        sweeps = config.composed_sweeps_dir(location, overrides)
        sweep_dir = _latest(sweeps)
    elif command in NEEDS_DIR:
        raise UsageError(f"`{command}` needs a SWEEP_DIR", hint=command_help(command))
    else:
        sweep_dir = _latest(Path(DEFAULT_SWEEPS_DIR))
    if args["cfg"] is not None:
        print(
            config.recorded_cfg(sweep_dir, args["cfg"], package=args["package"], resolve=args["resolve"]),
            end="",
        )
        return 0
    if args["resolve"]:
        raise UsageError("--resolve works only together with --cfg (as in Hydra)")
    if args["info"] is not None:
        print(config.recorded_info(sweep_dir, args["info"]), end="")
        return 0
    return run([str(sweep_dir)])


# ------------------------------------------------------------------ a sweep that is still running

#: Commands that read a sweep's results as finished: on a sweep that is still running they say so first
#: and write nothing into it (``judge --force`` and ``compare --force`` read what has landed, marked
#: partial).
READERS = ("judge", "report", "compare")


@dataclass(frozen=True)
class RunningSweep:
    """A sweep that runs now: its port's lock held by its live pid
    (:func:`orchestrator.ledger.lock.running_sweep`)."""

    sweep_dir: Path
    pid: int | None
    #: What it is measuring now: the journal's servers other than the retained one, and launches announced.
    measuring: tuple[str, ...] = ()

    def describe(self) -> str:
        now = f", measuring {', '.join(self.measuring)}" if self.measuring else ""
        return f"the sweep of {self.sweep_dir} is still running (pid {self.pid or '?'}){now}"


def running_sweep_of(sweep_dir: Path, *, role: str) -> RunningSweep | None:
    """The sweep of ``sweep_dir`` when it runs now (None: it does not, or nothing says its port)."""
    from contracts.sweepdir import read_sweep_config  # noqa: PLC0415  (only the commands that read a sweep)
    from orchestrator.ledger.journal import Journal  # noqa: PLC0415
    from orchestrator.ledger.lock import running_sweep  # noqa: PLC0415

    try:
        port = read_sweep_config(sweep_dir).service.port
    except (GauntletError, OSError, ValueError):
        return None  # no config yet: the sweep writes it before its first launch, after taking the lock
    holder = running_sweep(sweep_dir, port, role=role)
    if holder is None:
        return None
    try:
        state = Journal.of_sweep(sweep_dir).replay()
        measuring = tuple(
            [live.candidate for live in state.live.values() if live.role != "retained"]
            + [pending.candidate for pending in state.pending]
        )
    except (GauntletError, OSError, ValueError):
        measuring = ()
    return RunningSweep(sweep_dir, holder.pid, tuple(dict.fromkeys(measuring)))


def running_refusal(command: str, running: RunningSweep) -> SweepLockedError:
    """``command`` refused on a sweep that still runs: said first, nothing written into it."""
    forced = (
        f"`python -m orchestrator {command} --force ...` reads what has landed, marked partial, and "
        "writes nothing"
        if command in ("judge", "compare")
        else f"`python -m orchestrator judge --force {running.sweep_dir}` prints what has landed, judged and "
        "marked partial, writing nothing"
    )
    return SweepLockedError(
        f"{running.describe()}: `{command}` writes nothing into a running sweep and reads nothing of it as "
        "finished",
        holder=str(running.sweep_dir),
        hint=f"wait for it: it judges and reports itself when it ends (`python -m orchestrator stop "
        f"{running.sweep_dir}` ends it now); {forced}",
    )


def _latest(sweeps: Path) -> Path:
    hint = "pass the sweep directory, or the config flags and overrides that set run.sweeps_dir"
    return latest_sweep(sweeps, error=UsageError, hint=hint)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)
