"""Hydra entry point of the sweep: ``python -m orchestrator -m candidate=glob(*)``.

Pipeline position: the top of the orchestrator box. :func:`main` runs ``@hydra.main`` with gauntlet's
sweeper (:mod:`orchestrator.app.sweeper`, selected in ``conf/config.yaml``), which validates every job
once, opens the sweep, launches the jobs and closes it. Here: signals (SIGTERM and Ctrl-C interrupt and
restore, also when the parent shell ignored SIGINT; SIGUSR1, the request of ``stop``/``rollback``, is the
sweep controller's own: :mod:`orchestrator.ledger.requests`), ``--verbose``, shell completion, and the exit
code.
A command line without ``-m`` is a sweep of one job: the retained configuration is restored all the same.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Sequence
from types import FrameType

import hydra
from omegaconf import DictConfig

from contracts.errors import GauntletError, exit_code_for
from contracts.paths import CONF_DIR
from orchestrator.app.controller import explain
from orchestrator.app.sweeper import SweepEnded, register_sweeper
from orchestrator.config.compose import register_configs
from orchestrator.config.extras import check_extras
from orchestrator.config.guard import check_yaml_files, config_roots
from orchestrator.config.overrides import check_overrides
from orchestrator.servers.seams import say_stderr

#: Hydra flags that print or complete instead of running; the sweep runs as a multirun otherwise.
_NOT_A_RUN = ("--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "-sc", "--shell-completion")
_MULTIRUN = ("-m", "--multirun")
_VERBOSE = ("--verbose", "-v")


def job(config: DictConfig) -> str:
    """The task function Hydra is given; gauntlet's sweeper replaces it with a frozen-config job.

    It runs only when another sweeper was selected, which would launch candidates without a baseline,
    a restore or a verdict.
    """
    raise GauntletError(
        "this job was launched by another Hydra sweeper than gauntlet's",
        hint="keep `hydra/sweeper: gauntlet` (conf/config.yaml); choose launchers with hydra/launcher=...",
    )


def _hydra_entry() -> None:
    argv = sys.argv[1:]  # before Hydra parses a file it will read (an anchor bomb never returns)
    roots = config_roots(argv)
    check_yaml_files(roots, argv)
    check_overrides(argv, roots)  # search=null: the way to drop a group, not a traceback
    check_extras(sys.argv[1:])  # a launcher of a missing extra: the pip command, not "Could not load"
    register_configs()
    register_sweeper()
    decorated = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)
    decorated()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


#: Flags that choose where configs are found; Hydra's shell completion does not read them from the line.
_LOCATION_FLAGS = ("-cd", "--config-dir", "-cp", "--config-path", "-cn", "--config-name")


def completion_argv(argv: Sequence[str], comp_line: str | None) -> list[str]:
    """``-sc query=...``: the location flags of the line being completed (COMP_LINE), added to ``argv``.

    Bash calls ``gauntlet -sc query=bash`` without the line's own flags, so Hydra would complete the
    groups of conf/ only; with them, ``gauntlet -cd ~/my-conf -m candidate=<TAB>`` offers that dir's too.
    """
    args = list(argv)
    if comp_line is None or not any(a.startswith("query=") for a in args):
        return args
    words = shlex.split(comp_line) if comp_line.count('"') % 2 == 0 else comp_line.split()
    for i, word in enumerate(words[:-1]):
        if word in _LOCATION_FLAGS and word not in args:
            args = [word, words[i + 1], *args]
    return args


def sweep_argv(argv: Sequence[str]) -> tuple[list[str], bool]:
    """The command line Hydra gets (``-m`` added to a sweep) and whether ``--verbose`` was given."""
    verbose = any(a in _VERBOSE for a in argv)
    args = [a for a in argv if a not in _VERBOSE]
    if not any(a in _MULTIRUN or a in _NOT_A_RUN for a in args):
        args = ["-m", *args]
    return args, verbose


def main(argv: Sequence[str]) -> int:
    """Run the sweep with ``argv``; whatever happens, the retained configuration is left restored.

    The last lines always say what is left running: the retained server (where, how to stop it), or that
    nothing is (``run.retained_after_sweep: stop``, as in the demo).
    """
    args, verbose = sweep_argv(argv)
    if verbose:
        os.environ["GAUNTLET_VERBOSE"] = "1"
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # Ctrl-C (SIGINT) interrupts and restores even when the shell that started us ignored it (a command
    # run with `&` from a script inherits SIGINT ignored, and Python then never raises KeyboardInterrupt).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    saved_argv = sys.argv
    sys.argv = [
        saved_argv[0] if saved_argv else "orchestrator",
        *completion_argv(args, os.environ.get("COMP_LINE")),
    ]
    try:
        _hydra_entry()
        return 0
    except SweepEnded as ended:
        return ended.code
    except KeyboardInterrupt as exc:  # before the sweep opened (composition): nothing to restore
        return exit_code_for(exc)
    except SystemExit as exc:  # Hydra's own errors (a bad override of the primary config), said above
        return exc.code if isinstance(exc.code, int) else 1
    except GauntletError as exc:
        say_stderr(str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug before the sweep opened: its type and traceback, not str(exc) alone
        say_stderr(explain(exc, ""))
        return 1
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
