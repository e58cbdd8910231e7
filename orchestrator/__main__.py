"""Command line of gauntlet: ``python -m orchestrator [plan|report|rollback|status] ...``.

Subcommands are dispatched here; anything else is a Hydra run of the sweep (``-m candidate=glob(*)``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: python -m orchestrator COMMAND [hydra overrides]

commands:
  plan [overrides]        validate every candidate and print the exact command each would run
  -m [overrides]          run the sweep (a Hydra multirun), e.g. -m candidate=glob(*)
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = args[0], args[1:]
    if command == "plan":
        from orchestrator import plan  # noqa: PLC0415  (subcommands import only what they use)

        return plan.main(rest)
    print(f"gauntlet: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
