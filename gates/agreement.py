"""Whether vLLM promises a candidate's greedy outputs token-identical to the baseline's, from the launches.

Pipeline position: :mod:`gates.verdict` reads each candidate's ``spec.json`` (and its baseline's) here;
the ``answer_accuracy`` gate judges the greedy agreement only where both hold:

- **the candidate claims lossless decoding** (:func:`lossless_claim`): no speculative decoding, or a
  speculative config whose draft sampling is greedy and whose rejection sampling keeps the target's
  outputs. Absent keys take vLLM's defaults (:data:`SPEC_DEFAULTS`: an absent ``draft_sample_method`` is
  greedy, an absent ``rejection_sample_method`` is ``standard``), as the installed vLLM's parser declares
  them (``vllm/config/speculative.py``, ``SpeculativeConfig``; checked against 0.32.0 by
  tests/unit/test_agreement.py);
- **vLLM promises the outputs batch-invariant** (:func:`unpromised`): a server's greedy output depends on
  what it was batched with unless it runs with ``VLLM_BATCH_INVARIANT=1`` on hardware that has the
  kernels (CUDA, ROCm, XPU in 0.32; not its CPU build, whose override kernels need Triton's missing CPU
  backend), and no batch invariance covers another tensor- or pipeline-parallel size (each reduction is
  split differently). The simulator's answers are fixed by item and seed (its stated model).

Without the promise a differing greedy answer is not evidence against the candidate, so the figure is
reported and not judged (never FLAGGED).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: vLLM's speculative-config keys that decide whether greedy outputs are kept, and their defaults
#: (vllm/config/speculative.py: ``draft_sample_method: DraftSampleMethod = "greedy"``,
#: ``rejection_sample_method: RejectionSampleMethod = "standard"``; vLLM 0.32.0).
SPEC_DEFAULTS: dict[str, str] = {"draft_sample_method": "greedy", "rejection_sample_method": "standard"}
#: Draft sampling that keeps a lossless claim ("probabilistic" samples the draft distribution: no claim).
LOSSLESS_DRAFT = frozenset({"greedy"})
#: Rejection sampling that keeps the target's outputs: "standard" (the probability-ratio test; at
#: temperature 0 a draft token is kept only when it is the target's argmax) and "block" (block
#: verification, Sun et al., which verifies the drafts jointly and keeps the target's distribution).
#: "synthetic" accepts drafts at a calibrated rate whatever the target says: lossy.
LOSSLESS_REJECTION = frozenset({"standard", "block"})
#: The environment variable under which vLLM's kernels are batch-invariant.
BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"
#: Flags whose value changes how each reduction is split (batch invariance does not cover them).
SPLIT_FLAGS = (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp"))


def _flag(spec: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    """A flag's value from the spec's argv (``--name value`` or ``--name=value``) or its vLLM YAML."""
    argv = [str(a) for a in spec.get("argv") or []]
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(f"{name}="):
                return arg.partition("=")[2]
    key = f"{names[0].lstrip('-')}:"
    for line in str(spec.get("config_yaml") or "").splitlines():
        if line.startswith(key):
            return line.partition(":")[2].strip()
    return None


def lossless_claim(spec: Mapping[str, Any] | None) -> str | None:
    """Whether a launch's spec (``spec.json``) claims token-identical greedy outputs, in words ("" when it
    does not: probabilistic draft sampling, lossy rejection sampling; None when unknown: no spec, or a
    speculative config that is not a JSON object).

    >>> lossless_claim({"argv": ["vllm", "serve", "m"]})
    'no speculative decoding'
    >>> lossless_claim({"argv": ["--speculative-config", '{"method": "eagle"}']})
    "greedy draft sampling (vLLM's default)"
    >>> lossless_claim({"argv": ["--speculative-config", '{"rejection_sample_method": "synthetic"}']})
    ''
    """
    if spec is None:
        return None
    raw = _flag(spec, ("--speculative-config",))
    if raw is None:
        return "no speculative decoding"
    try:
        config = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    draft = config.get("draft_sample_method", SPEC_DEFAULTS["draft_sample_method"])
    rejection = config.get("rejection_sample_method", SPEC_DEFAULTS["rejection_sample_method"])
    if draft not in LOSSLESS_DRAFT or rejection not in LOSSLESS_REJECTION:
        return ""
    words = (
        "greedy draft sampling"
        if "draft_sample_method" in config
        else "greedy draft sampling (vLLM's default)"
    )
    return words if rejection == "standard" else f"{words}, {rejection} rejection sampling"


def unpromised(spec: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None) -> str | None:
    """Why vLLM does not promise the candidate's greedy outputs identical to the baseline's, in words;
    None when it does (or nothing is known: no spec).

    >>> unpromised({"host_kind": "gpu", "env": {}, "argv": []}, None)
    'vLLM promises batch-invariant greedy outputs only under VLLM_BATCH_INVARIANT=1 (not set in the launch)'
    >>> unpromised({"host_kind": "sim", "argv": []}, None) is None
    True
    """
    if spec is None or spec.get("host_kind") == "sim":
        return None  # the simulator's answers are fixed by item and seed, on every layout
    env = spec.get("env") or {}
    if str(env.get(BATCH_INVARIANT_ENV, "0")) != "1":
        return (
            f"vLLM promises batch-invariant greedy outputs only under {BATCH_INVARIANT_ENV}=1 (not set "
            "in the launch)"
        )
    if spec.get("host_kind") == "cpu":
        return (
            f"{BATCH_INVARIANT_ENV}=1 has no CPU kernels in vLLM 0.32 (its overrides need Triton's CPU "
            "backend): no batch invariance on a CPU host"
        )
    if baseline is not None:
        for names in SPLIT_FLAGS:
            mine, theirs = _flag(spec, names) or "1", _flag(baseline, names) or "1"
            if mine != theirs:
                return (
                    f"{names[0].lstrip('-')} {mine} against the baseline's {theirs}: each reduction is split "
                    "differently, which no batch invariance covers"
                )
    return None


def _read(spec_file: Path | None) -> dict[str, Any] | None:
    if spec_file is None:
        return None
    try:
        data = json.loads(spec_file.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_claim(spec_file: Path) -> str | None:
    """:func:`lossless_claim` of a launch's ``spec.json`` (None when it is absent or unreadable)."""
    return lossless_claim(_read(spec_file))


def read_unpromised(spec_file: Path, baseline_file: Path | None) -> str | None:
    """:func:`unpromised` of a launch's ``spec.json`` against its baseline's."""
    return unpromised(_read(spec_file), _read(baseline_file))
