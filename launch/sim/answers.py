"""The simulator's answers to labelled items: what a simulated model says to the project's arithmetic set
(scripts/make_accuracy_set.py), so the answer_accuracy gate has something to score on a simulated host.

Pipeline position: the simulated server (:mod:`launch.sim.server`) asks :func:`labelled_reply` for every
chat request; a prompt that is one of the set's word problems gets a worked answer ending in ``#### N``
and an output plan of exactly its tokens (a token is a word here), fixed by the prompt and the server's
seed: at temperature 0 the same item gets the same answer every time. Any other prompt gets None, and the
engine's usual plan and filler text. The stated model (docs/simulator.md, "Labelled items"):

- greedy decoding (the baseline, and every candidate with greedy or no draft sampling) answers an item
  correctly unless its hash puts it among the ``1 - GREEDY_CORRECT`` it gets wrong (off by one);
- probabilistic draft sampling changes the answer of a further ``PROBABILISTIC_CHANGED`` of the items
  (the final number is off by ten), so most of those turn from right to wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from statistics import NormalDist

from launch.sim.model import OutputPlan, _draw
from launch.sim.profile import LengthDist

#: Share of the items greedy decoding answers correctly.
GREEDY_CORRECT = 0.9
#: Share of the items whose answer probabilistic draft sampling changes.
PROBABILISTIC_CHANGED = 0.25

_PROBLEM = re.compile(
    r"has (?P<a>\d+) \w+, gets (?P<b>\d+) more and gives (?P<c>\d+) away\."
    r"(?: Then \w+ buys (?P<k>\d+) times as many)?"
)


def _share(seed: int, prompt: str, what: str) -> float:
    """A uniform number in [0, 1) fixed by the server's seed, the prompt and ``what`` it decides."""
    digest = hashlib.sha256(f"{seed}:{what}:{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64


def solve(prompt: str) -> tuple[str, int] | None:
    """The worked steps and the right answer of one of the set's word problems; None for any other text.

    >>> solve("Ada has 41 coins, gets 19 more and gives 47 away. How many coins does Ada have now?")
    ('41 + 19 - 47 = 13.', 13)
    """
    found = _PROBLEM.search(prompt)
    if found is None:
        return None
    a, b, c = (int(found.group(g)) for g in "abc")
    left = a + b - c
    work = f"{a} + {b} - {c} = {left}."
    if found.group("k") is None:
        return work, left
    k = int(found.group("k"))
    return f"{work} {left} + {k} x {left} = {left + k * left}.", left + k * left


def answer_text(prompt: str, *, seed: int, draft_sample_method: str) -> str | None:
    """The simulated model's visible answer to ``prompt`` (module docstring), or None: not an item."""
    solved = solve(prompt)
    if solved is None:
        return None
    work, value = solved
    if _share(seed, prompt, "greedy") >= GREEDY_CORRECT:
        value += 1
    if (
        draft_sample_method == "probabilistic"
        and _share(seed, prompt, "probabilistic") < PROBABILISTIC_CHANGED
    ):
        value += 10
    return f"{work}\n#### {value}"


@dataclass(frozen=True)
class LabelledReply:
    """An item's answer as the stream writes it (one JSON-escaped piece per token) and its output plan."""

    pieces: tuple[bytes, ...]
    plan: OutputPlan


def labelled_reply(
    prompt: str, *, seed: int, draft_sample_method: str, reasoning: LengthDist, max_tokens: int
) -> LabelledReply | None:
    """The reply to a labelled item: hidden reasoning drawn from ``reasoning`` by the prompt's hash, then the
    answer's tokens; cut at ``max_tokens`` (finish ``length``) like any reply."""
    text = answer_text(prompt, seed=seed, draft_sample_method=draft_sample_method)
    if text is None:
        return None
    pieces = tuple(json.dumps(t)[1:-1].encode() for t in re.findall(r"\s*\S+", text))
    z = NormalDist().inv_cdf(min(max(_share(seed, prompt, "reasoning"), 1e-9), 1 - 1e-9))
    think = _draw(reasoning, z)
    target = think + len(pieces)
    if target > max_tokens:
        return LabelledReply(pieces, OutputPlan(max_tokens, min(think, max_tokens), "length", False))
    return LabelledReply(pieces, OutputPlan(target, think, "stop", False))
