"""Command line of gauntlet: ``python -m orchestrator [plan|doctor|list|judge|report|rollback|promote|...]``.

Subcommands are dispatched here; anything else is a Hydra run of the sweep (``-m candidate=glob(*)``).
Every command takes Hydra's flags, parsed by Hydra's own parser: the sweep is a ``@hydra.main`` app,
``plan`` and ``list`` compose as it does, and the commands that act on a recorded sweep give each flag
the meaning documented in :mod:`orchestrator.cli` (they import Hydra only when a flag is given).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.cli import (
    READERS,
    SWEEP_DIR_COMMANDS,
    RunningSweep,
    run_sweep_dir_command,
    running_refusal,
    running_sweep_of,
)

USAGE = """usage: python -m orchestrator [COMMAND] [hydra overrides]

  -m candidate=glob(*) [overrides]   run the sweep (a Hydra multirun): baseline, every candidate, then the
                                     verified restore of the retained configuration and the report
  plan [overrides]                   validate every candidate and print the exact command each would run
  doctor [overrides]                 check that the host can start every candidate (program and version,
                                     each flag against the installed vLLM, GPUs, memory fit, weights,
                                     port), starting nothing; one line per problem, exit 4 if any
  list [GROUP]                       the options of each config group (candidate, host, service, workload,
                                     experiment, gates) with each file's description and path
  rollback [SWEEP_DIR]               stop what gauntlet started, restore the retained configuration
                                     byte-for-byte and validate it under load (default: the latest sweep)
  promote SWEEP_DIR NAME             make NAME, a candidate the sweep kept (KEEP), the live service: launch
                                     its recorded spec, validate it under load, make it the retained
                                     configuration (a failure restores the previous one, validated)
  stop [SWEEP_DIR]                   stop every server gauntlet started for the sweep, the retained one
                                     included, restoring nothing (default: the latest sweep; `make stop`)
  status [SWEEP_DIR] [--json]        what gauntlet has running, its fingerprint, and whether it is healthy
  judge SWEEP_DIR [--force]          judge the stored results again and write verdicts.json (a sweep that
                                     is still running: refused, exit 4; --force prints what has landed,
                                     marked PARTIAL, and writes nothing)
  report SWEEP_DIR                   render the decision table and plots from verdicts.json and the files
                                     (refused on a sweep that is still running)
  compare OLD NEW [--candidate NAME] [--json] [--force]
                                     the same candidates (or NAME against OLD's retained configuration)
                                     across two sweeps: what changed beyond noise (exit 1 if anything;
                                     a sweep still running: refused, or --force: marked PARTIAL)

Every command takes Hydra's flags: -cd/--config-dir DIR (your own configs), -cp/--config-path,
-cn/--config-name, --cfg job|hydra|all [--resolve] [-p PKG], --info [WHAT], --help (per command), and the
sweep -sc/--shell-completion. `python -m orchestrator COMMAND --help` says what each means there.

examples:
  python -m orchestrator -m 'candidate=glob(*)'                    # the case study on the simulator
  python -m orchestrator -m 'candidate=glob(*)' host=h100x8         # the same on a real 8xH100 host
  python -m orchestrator -m 'candidate=glob(*)' hydra.sweep.dir=sweeps/20261202-101500   # resume
  python -m orchestrator plan -cd ~/my-conf host=myhost              # candidates of your own dir too
  python -m orchestrator list candidate -cd ~/my-conf
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = args[0], args[1:]
    # Subcommands import only what they use, so `plan` never loads process or network code.
    if command == "plan":
        from orchestrator import plan  # noqa: PLC0415

        return plan.main(rest)
    if command == "doctor":
        from orchestrator import doctor  # noqa: PLC0415

        return doctor.main(rest)
    if command == "list":
        from orchestrator import catalog  # noqa: PLC0415

        return catalog.main(rest)
    if command == "compare":
        from gates import across  # noqa: PLC0415

        rest, force = _without(rest, "--force")
        refused = _compare_on_running(_compare_dirs(rest), force=force)
        return refused if refused is not None else across.main(rest)
    if command == "promote":
        from orchestrator.recovery import promote  # noqa: PLC0415
        from orchestrator.servers.seams import real_seams  # noqa: PLC0415

        return promote.main_promote(rest, real_seams)
    if command == "status" and "--json" in rest:
        rest = [a for a in rest if a != "--json"]
        return run_sweep_dir_command(command, rest, _handler(command, as_json=True))
    if command == "judge" and "--force" in rest:
        rest, _ = _without(rest, "--force")
        return run_sweep_dir_command(command, rest, _handler(command, force=True))
    if command in SWEEP_DIR_COMMANDS:
        return run_sweep_dir_command(command, rest, _handler(command))
    if command.startswith("-") or "=" in command:
        from orchestrator.app import entry  # noqa: PLC0415

        return entry.main(args)
    print(f"gauntlet: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _without(args: list[str], flag: str) -> tuple[list[str], bool]:
    return [a for a in args if a != flag], flag in args


def _compare_dirs(args: Sequence[str]) -> list[Path]:
    """The sweep directories of ``compare OLD NEW [--candidate NAME] [--json]``."""
    out: list[Path] = []
    skip = False
    for arg in args:
        if skip or arg.startswith("-"):
            skip = arg == "--candidate"
            continue
        out.append(Path(arg))
    return out


def _refuse(command: str, running: RunningSweep) -> int:
    error = running_refusal(command, running)
    print(f"gauntlet {command}: {error}", file=sys.stderr)
    return error.exit_code


def _compare_on_running(dirs: Sequence[Path], *, force: bool) -> int | None:
    """``compare`` with a sweep that is still running: refused (exit 4) without ``--force``; with it, a
    PARTIAL line first for each, and the comparison goes on (None, as when none runs)."""
    running = [r for d in dirs if (r := running_sweep_of(d, role="compare")) is not None]
    if running and not force:
        return _refuse("compare", running[0])
    for r in running:
        print(f"PARTIAL: {r.describe()}: what has landed so far is compared; nothing is written", flush=True)
    return None


def _handler(command: str, *, as_json: bool = False, force: bool = False) -> Callable[[list[str]], int]:
    """The command that acts on a sweep directory (imported only when it runs)."""

    def run(args: list[str]) -> int:
        running = None
        if command in READERS and len(args) == 1 and not args[0].startswith("-"):
            running = running_sweep_of(Path(args[0]), role=command)  # said first, nothing written
        if running is not None:
            if not (force and command == "judge"):
                return _refuse(command, running)
            from gates import judge  # noqa: PLC0415

            return judge.partial(running.sweep_dir, running.describe(), measuring=running.measuring)
        if command in ("rollback", "stop", "status"):
            from orchestrator.recovery import rollback, status, stop  # noqa: PLC0415
            from orchestrator.servers.seams import real_seams  # noqa: PLC0415

            if command == "status":
                return status.main_status(args, real_seams, as_json=as_json)
            handlers = {"rollback": rollback.main_rollback, "stop": stop.main_stop}
            return handlers[command](args, real_seams)
        if command == "judge":
            from gates import judge  # noqa: PLC0415

            return judge.main(args)
        import report  # noqa: PLC0415

        return report.main(args)

    return run


if __name__ == "__main__":
    sys.exit(main())
