"""The gate registry: one small class per requirement, registered by name with :func:`register`.

Pipeline position: :func:`gates.evaluate_sweep` asks :func:`selected_gates` for the gates the config
enables and calls each one's :meth:`Gate.evaluate` on a :class:`GateContext` (stored results of the
baseline and of one candidate). Adding a gate::

    @register
    class MyGate(Gate):
        name = "my_gate"
        requirement = "what it protects"

        def evaluate(self, ctx: GateContext) -> GateResult: ...
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from contracts.errors import GateError
from contracts.results import HostProbe
from contracts.schema import GatesConfig
from contracts.sweepdir import Results
from contracts.verdicts import GateResult, GateRole


@dataclass(frozen=True)
class GateContext:
    """What one gate sees: the thresholds and the stored results of the baseline and one candidate."""

    cfg: GatesConfig
    baseline: Results
    candidate: Results
    #: The sweep's host probe (``host.json``); None when the sweep wrote none.
    host: HostProbe | None = None
    #: The configured ``host.kind`` (``sim``, ``cpu``, ``gpu``); None without the sweep's config.
    host_kind: str | None = None
    #: Whether the candidate's launch claims token-identical greedy outputs, in words (no speculative
    #: decoding, greedy draft sampling); "" when it claims nothing; None when unknown (no ``spec.json``).
    candidate_claim: str | None = None
    #: Why vLLM does not promise the candidate's greedy outputs identical to the baseline's (not run
    #: batch-invariant, another tensor-parallel size: :mod:`gates.agreement`); None: promised or unknown.
    agreement_unpromised: str | None = None
    #: The sweep's ``gates.confidence`` where ``cfg`` holds an adaptive look's share of it
    #: (:mod:`gates.sequential`): a measurement made once, after the looks (the capacity search), is
    #: judged at the sweep's level, not at the look's; None: ``cfg.confidence`` is the sweep's.
    sweep_confidence: float | None = None

    def not_asked(self, profiles: Sequence[str]) -> str:
        """Why a gate that needs one of ``profiles`` has nothing to judge by design, in words: the
        baseline (measured with every profile the sweep runs before any candidate) has none of them, so
        the sweep was not asked for them (``run.profiles``); "" when it has one. A baseline lost before
        them is a gap of its own (:mod:`gates.evidence`)."""
        if any(self.baseline.repeats(p) for p in profiles):
            return ""
        return f"the sweep measured none of {', '.join(dict.fromkeys(profiles))} (run.profiles)"

    def seed(self, *parts: str) -> int:
        """A bootstrap seed that depends on the configured seed and on what is compared, nothing else."""
        key = "/".join((self.candidate.name, *parts)).encode()
        return (self.cfg.seed * 1_000_003 + zlib.crc32(key)) % (2**32)


class Gate(ABC):
    """One requirement evaluated over stored results."""

    name: ClassVar[str]
    requirement: ClassVar[str]  # what it protects, in words
    failure: ClassVar[str] = ""  # how a failure is named in a verdict's reason ("concurrency regression")
    role: ClassVar[GateRole] = "requirement"
    # Evaluation and reporting order (lower first): a verdict names what the service loses under load
    # before what it loses elsewhere. Gates with equal order keep their registration order.
    order: ClassVar[int] = 50

    @abstractmethod
    def evaluate(self, ctx: GateContext) -> GateResult:
        """Judge the candidate against the baseline."""


REGISTRY: dict[str, type[Gate]] = {}

G = TypeVar("G", bound=type[Gate])


def register(cls: G) -> G:
    """Class decorator: make the gate selectable by its ``name`` (evaluation follows registration order)."""
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise GateError(
            f"gate name {cls.name!r} registered twice ({REGISTRY[cls.name].__name__}, {cls.__name__})"
        )
    REGISTRY[cls.name] = cls
    return cls


def selected_gates(enabled: Sequence[str]) -> list[Gate]:
    """The gates to run: every registered one when ``enabled`` is empty; compatibility always runs."""
    unknown = [name for name in enabled if name not in REGISTRY]
    if unknown:
        raise GateError(
            f"gates.enabled names unknown gate(s): {', '.join(unknown)}",
            hint=f"registered gates: {', '.join(REGISTRY)}; fix conf/gates/",
        )
    names = list(REGISTRY) if not enabled else [n for n in REGISTRY if n in enabled or n == "compatibility"]
    names.sort(key=lambda n: REGISTRY[n].order)  # stable: equal order keeps registration order
    return [REGISTRY[name]() for name in names]
