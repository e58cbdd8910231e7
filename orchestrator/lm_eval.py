"""``python -m orchestrator.lm_eval``: an ``lm_eval`` profile run against a baseline's and a candidate's
server, judged by the accuracy gate.

Pipeline position: the command over the lm_eval workload's stages: the profile read and validated
(:func:`contracts.lmeval_profile.read_profile`), lm-eval run against each side
(:func:`load.lm_eval.run_lm_eval`, one side after the other, into ``OUT/<side>/<profile>/``), the
documents paired and judged (:func:`gates.lm_eval_accuracy.judge_lm_eval`), the result written to
the output folder (:class:`contracts.layout_lmeval.LmEvalOutPaths`) and said in one line. Exit code: 0
pass, 1 fail or inconclusive, 8 not judged (documents that do not pair, too few), the error's own for a
bad profile (2) or a failed run (5)::

    python -m orchestrator.lm_eval examples/lm_eval/gsm8k.yaml \\
        --baseline http://gpu-01:8000 --candidate http://gpu-02:8000 --model my-model --out lm-eval-out
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from contracts.errors import GauntletError, IncompleteSweep, exit_code_for
from contracts.layout_lmeval import LmEvalOutPaths
from contracts.lmeval import LmEvalRun
from contracts.lmeval_profile import LmEvalProfile, read_profile
from contracts.schema import AccuracyGateConfig, GatesConfig
from contracts.verdicts import GateResult
from gates.lm_eval_accuracy import judge_lm_eval
from load.lm_eval import run_lm_eval

RunSide = Callable[..., LmEvalRun]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m orchestrator.lm_eval", description=__doc__.splitlines()[0])
    p.add_argument("profile", type=Path, help="the lm_eval profile's YAML file (kind: lm_eval)")
    p.add_argument("--baseline", required=True, help="the baseline server's base URL (http://host:port)")
    p.add_argument("--candidate", required=True, help="the candidate server's base URL")
    p.add_argument("--model", required=True, help="the served model name (both servers serve it)")
    p.add_argument("--candidate-model", default=None, help="the candidate's served name, if it differs")
    p.add_argument("--out", type=Path, default=Path("lm-eval-out"), help="where the runs and verdict go")
    p.add_argument("--python", default=None, help="the interpreter with lm-eval (overrides the profile's)")
    defaults = AccuracyGateConfig()
    tolerance = f"gates.accuracy.tolerance: allowed drop, in accuracy (default {defaults.tolerance})"
    p.add_argument("--tolerance", type=float, default=defaults.tolerance, help=tolerance)
    fewest = f"gates.accuracy.min_items: fewest documents judged (default {defaults.min_items})"
    p.add_argument("--min-items", type=int, default=defaults.min_items, help=fewest)
    p.add_argument("--confidence", type=float, default=GatesConfig().confidence, help="gates.confidence")
    return p


def judge_sides(
    profile: LmEvalProfile,
    args: argparse.Namespace,
    *,
    run: RunSide = run_lm_eval,
    say: Callable[[str], None] = print,
) -> GateResult:
    """Run ``profile`` on the baseline, then the candidate, and judge them (``run``: the load stage's)."""
    runs: dict[str, LmEvalRun] = {}
    for side, url, model in (
        ("baseline", args.baseline, args.model),
        ("candidate", args.candidate, args.candidate_model or args.model),
    ):
        say(f"lm_eval {profile.name}: running task(s) {', '.join(profile.tasks)} against the {side} ({url})")
        runs[side] = run(
            url,
            model,
            profile,
            candidate=side,
            out_dir=LmEvalOutPaths(args.out).run(side, profile.name).root,
            python=args.python,
        )
        right = sum(d.right for d in runs[side].docs)
        say(f"lm_eval {profile.name}: {side} {right}/{len(runs[side].docs)} in {runs[side].wall_s:.0f} s")
    cfg = GatesConfig(
        confidence=args.confidence,
        accuracy=AccuracyGateConfig(profile=profile.name, tolerance=args.tolerance, min_items=args.min_items),
    )
    return judge_lm_eval(runs["baseline"], runs["candidate"], cfg)


#: A judged status -> the exit code (not_run: not judged, what an incomplete sweep exits with).
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 1, "not_run": IncompleteSweep.exit_code}


def main(argv: Sequence[str] | None = None, *, run: RunSide = run_lm_eval) -> int:
    args = parser().parse_args(argv)
    try:
        profile = read_profile(args.profile)
        result = judge_sides(profile, args, run=run)
    except GauntletError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    args.out.mkdir(parents=True, exist_ok=True)
    LmEvalOutPaths(args.out).verdict.write_text(result.model_dump_json(indent=2) + "\n")
    print(f"answer_accuracy: {result.status.upper()}: {result.message}")
    return EXIT_CODES[result.status]


if __name__ == "__main__":
    sys.exit(main())
