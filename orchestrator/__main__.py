"""Command line of gauntlet: ``python -m orchestrator [plan|judge|report|rollback|stop|status] ...``.

Subcommands are dispatched here; anything else is a Hydra run of the sweep (``-m candidate=glob(*)``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: python -m orchestrator [COMMAND] [hydra overrides]

  -m candidate=glob(*) [overrides]   run the sweep (a Hydra multirun): baseline, every candidate, then the
                                     verified restore of the retained configuration and the report
  plan [overrides]                   validate every candidate and print the exact command each would run
  rollback [SWEEP_DIR]               stop what gauntlet started, restore the retained configuration
                                     byte-for-byte and validate it under load (default: the latest sweep)
  stop [SWEEP_DIR]                   stop every server gauntlet started for the sweep, the retained one
                                     included, restoring nothing (default: the latest sweep; `make stop`)
  status [SWEEP_DIR]                 what gauntlet has running, its fingerprint, and whether it is healthy
  judge SWEEP_DIR                    judge the stored results again and write verdicts.json
  report SWEEP_DIR                   render the decision table and plots from verdicts.json and the files

examples:
  python -m orchestrator -m 'candidate=glob(*)'                    # the case study on the simulator
  python -m orchestrator -m 'candidate=glob(*)' host=h100x8         # the same on a real 8xH100 host
  python -m orchestrator -m 'candidate=glob(*)' hydra.sweep.dir=sweeps/20261202-101500   # resume
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
    if command in ("rollback", "stop", "status"):
        from orchestrator import rollback  # noqa: PLC0415
        from orchestrator.seams import real_seams  # noqa: PLC0415

        handlers = {
            "rollback": rollback.main_rollback,
            "stop": rollback.main_stop,
            "status": rollback.main_status,
        }
        return handlers[command](rest, real_seams)
    if command == "judge":
        from gates import judge  # noqa: PLC0415

        return judge.main(rest)
    if command == "report":
        import report  # noqa: PLC0415

        return report.main(rest)
    if command.startswith("-") or "=" in command:
        from orchestrator import hydra_app  # noqa: PLC0415

        return hydra_app.main(args)
    print(f"gauntlet: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
