"""The one runner of a composing command (``plan``, ``doctor``): Hydra's flags, the command, its text, its
exit code.

Pipeline position: the command line's shared edge, below the commands that use it. It parses Hydra's
flags, shows what ``--cfg/--info/--help`` ask for instead of running, turns a ``GauntletError`` into its
message on stderr and its exit code, and otherwise prints what the command renders.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TextIO, TypeVar

from contracts.errors import GauntletError
from orchestrator.config.compose import ConfigLocation, parse_hydra_args, show, wants_show

T = TypeVar("T")


def run_composing_command(
    argv: Sequence[str],
    *,
    command: str,
    usage: str,
    act: Callable[[Sequence[str], ConfigLocation], T],
    render: Callable[[T], tuple[str, int]],
    out: TextIO | None = None,
) -> int:
    """``COMMAND [hydra flags] [overrides]``: ``act(overrides, location)``, then ``render(result)`` gives
    the text written to ``out`` (stdout) and the exit code. ``--help`` writes ``usage`` before Hydra's
    help; a ``GauntletError`` prints ``gauntlet COMMAND: <message>`` on stderr and returns its exit code.

    Example: ``run_composing_command(argv, command="plan", usage=PLAN_USAGE, act=plan,
    render=lambda planned: (format_plan(planned), 0))``.
    """
    out = out or sys.stdout
    args = parse_hydra_args(argv)
    try:
        if wants_show(args):
            if args.help:
                out.write(usage)
                out.flush()
            return show(args, command=command)
        result = act(args.overrides, ConfigLocation.from_args(args))
    except GauntletError as exc:
        print(f"gauntlet {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    text, code = render(result)
    out.write(text)
    return code
