"""A launch's lm_eval profiles: lm-eval-harness run once against the launched server, after its load
profiles, its scores (or why there are none) left in the launch's folder.

Pipeline position: called by a candidate's launch (:func:`orchestrator.measure.candidate.run_candidate`,
the baseline's opening launch too) once its load profiles and capacity search ran and the server was not
lost; the interleaved blocks, the recovery validation and a search's trials run none. Each profile of
``lm_eval.profiles`` runs through the load stage's :func:`load.lm_eval.run_lm_eval` (the injected ``run``)
with the interpreter ``lm_eval.python`` names, into ``<launch>/lm_eval/<profile>/``
(:func:`contracts.layout_lmeval.lm_eval_paths`); the ``lm_eval_accuracy`` gate judges them
(:mod:`gates.lm_eval_gate`).

A launch whose profiles left neither scores nor a recorded failure (the sweep was interrupted while
lm-eval ran) is not complete: resume measures it again (:func:`unfinished_profiles`).

A run that fails is recorded, not raised: lm-eval's own failure (missing, an unknown task, a crash, past
its ``timeout_s``) and the server failing lm-eval's requests are both written as an
:class:`~contracts.lmeval_sweep.LmEvalFailure` (the gate is then ``not_run`` and the verdict incomplete,
never a reject); a stop request ends the launch as it would a load profile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from contracts.errors import GauntletError, HarnessError, LoadError, sweep_dir_error
from contracts.layout_lmeval import lm_eval_paths
from contracts.lmeval import LmEvalRun
from contracts.lmeval_profile import read_profile
from contracts.lmeval_sweep import Fault, LmEvalConfig, LmEvalFailure, read_launch_lm_eval
from load.lm_eval import run_lm_eval
from orchestrator.servers.context import SweepContext
from orchestrator.servers.session import ServerSession

#: The load stage's lm-eval run (:func:`load.lm_eval.run_lm_eval`; a table of outcomes in tests).
RunLmEvalProfile = Callable[..., LmEvalRun]
#: The setting a missing lm-eval names (:class:`contracts.lmeval_sweep.LmEvalConfig`).
PYTHON_SETTING = "lm_eval.python"


def failure_of(exc: GauntletError, *, profile: str, candidate: str) -> LmEvalFailure:
    """What a failed run leaves (pure): the server's fault for a :class:`LoadError` that is not a
    :class:`HarnessError`, else the harness's."""
    fault: Fault = "server" if isinstance(exc, LoadError) and not isinstance(exc, HarnessError) else "harness"
    message = exc.message.splitlines()[0] if exc.message else type(exc).__name__
    return LmEvalFailure(
        profile=profile, candidate=candidate, fault=fault, message=message, evidence=list(exc.evidence)
    )


def python_setting(cfg: LmEvalConfig) -> str:
    """The words a missing lm-eval names its interpreter's setting with (pure)."""
    return f"{PYTHON_SETTING} (now {cfg.python})" if cfg.python else f"{PYTHON_SETTING} (now null)"


def unfinished_profiles(section: LmEvalConfig, launch_root: Path) -> list[str]:
    """The profiles of ``section`` whose run left neither scores nor a recorded failure in the launch's
    folder: lm-eval was interrupted (a stop, Ctrl-C, a crash of the sweep). A profile file that no longer
    reads is skipped, as :func:`run_lm_eval_profiles` skips it."""
    done = read_launch_lm_eval(launch_root)
    unfinished = []
    for file in section.profiles:
        try:
            name = read_profile(Path(file)).name
        except GauntletError:
            continue
        if name not in done:
            unfinished.append(name)
    return unfinished


def run_lm_eval_profiles(
    ctx: SweepContext, session: ServerSession, out: Path, *, run: RunLmEvalProfile = run_lm_eval
) -> None:
    """Run every ``lm_eval.profiles`` entry against the session's server, into ``out``'s lm_eval folder."""
    spec, section = session.spec, ctx.cfg.lm_eval
    for file in section.profiles:
        ctx.check_stop()
        name = spec.candidate
        try:
            profile = read_profile(Path(file))
        except GauntletError as exc:  # validated when the sweep opened; edited or removed since
            ctx.say(f"{name}: lm_eval {file}: {exc}")
            continue
        paths = lm_eval_paths(out, profile.name)
        ctx.say(f"{name}: lm_eval {profile.name}: task(s) {', '.join(profile.tasks)}")
        try:
            record = run(
                spec.base_url,
                spec.served_model_name,
                profile,
                candidate=name,
                out_dir=paths.root,
                python=os.path.abspath(section.python) if section.python else None,
                python_setting=python_setting(section),
                api_key=spec.api_key(os.environ),
            )
        except OSError as exc:
            if (disk := sweep_dir_error(exc, ctx.dir)) is not None:
                raise disk from exc  # the disk failed, not lm-eval: stop, as a load profile would
            failure = failure_of(HarnessError(f"lm-eval could not run: {exc}"), profile=profile.name,
                                 candidate=name)  # fmt: skip
        except (HarnessError, LoadError) as exc:
            failure = failure_of(exc, profile=profile.name, candidate=name)
        else:
            right, docs = sum(d.right for d in record.docs), len(record.docs)
            ctx.say(f"{name}: lm_eval {profile.name}: {right}/{docs} right in {record.wall_s:.0f} s")
            continue
        paths.root.mkdir(parents=True, exist_ok=True)
        failure.write(paths.error)
        ctx.say(f"{name}: lm_eval {profile.name}: no scores ({failure.fault}): {failure.message}")
