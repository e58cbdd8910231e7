"""A labelled prompt set: the items the accuracy gate scores (``prompts_file`` ending in ``.jsonl``).

Pipeline position: read where a prompt set is read: validation refuses a bad file when the config is
composed, the load runner sends each item's prompt as a fixed prompt (and keeps each answer's visible
text), and the ``answer_accuracy`` gate (:mod:`gates.answer_accuracy`) scores the stored answers against
the references. One JSON object per line::

    {"prompt": "What is 17 + 25? End with '#### <number>'.", "answer": "42"}
    {"prompt": "Name the colour of the sky.", "answer": "blue", "regex": "(?i)answer:\\s*(\\w+)"}

``prompt`` (a non-empty string) and ``answer`` (a string or a number) are required; ``regex`` (optional)
is the extraction pattern of that item (docs/accuracy-and-cost.md). Blank lines are skipped; anything
else is a :class:`~contracts.errors.HarnessError` naming ``file:line`` and what is allowed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from contracts.errors import HarnessError
from contracts.jsonl import json_lines

#: A prompts file with this suffix is a labelled set; any other is a JSON list of prompts.
LABELLED_SUFFIX = ".jsonl"

_KEYS = ("prompt", "answer", "regex")
_HINT = (
    'a labelled set is JSONL, one object per line: {"prompt": "...", "answer": "42"} with an optional '
    '"regex" (the extraction pattern; its first group is the answer)'
)


@dataclass(frozen=True)
class LabelledItem:
    """One labelled item: the prompt sent, the reference answer, and the item's extraction regex."""

    prompt: str
    answer: str
    regex: str | None = None


def _error(message: str) -> HarnessError:
    return HarnessError(message, hint=_HINT)


def is_labelled(prompts_file: str | None) -> bool:
    """``prompts_file`` names a labelled set (JSONL) rather than a JSON list of prompts."""
    return prompts_file is not None and prompts_file.endswith(LABELLED_SUFFIX)


def _answer(value: object) -> str | None:
    """A reference as text: a non-empty string, or a JSON number (an int, or a float without its ``.0``)."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _item(data: object, where: str) -> LabelledItem:
    if not isinstance(data, dict):
        raise HarnessError(f"{where}: expected a JSON object, got {json.dumps(data)[:60]}", hint=_HINT)
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise HarnessError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}: allowed are {', '.join(_KEYS)}",
            hint=_HINT,
        )
    prompt, answer, regex = data.get("prompt"), _answer(data.get("answer")), data.get("regex")
    if not (isinstance(prompt, str) and prompt.strip()):
        raise HarnessError(f"{where}: prompt is {prompt!r}: expected a non-empty string", hint=_HINT)
    if answer is None:
        raise HarnessError(
            f"{where}: answer is {data.get('answer')!r}: expected a non-empty string or a number", hint=_HINT
        )
    if regex is not None:
        if not (isinstance(regex, str) and regex):
            raise HarnessError(f"{where}: regex is {regex!r}: expected a non-empty string", hint=_HINT)
        try:
            re.compile(regex)
        except re.error as exc:
            raise HarnessError(f"{where}: regex {regex!r} does not compile ({exc})", hint=_HINT) from exc
    return LabelledItem(prompt=prompt, answer=answer, regex=regex)


def parse_labelled(text: str, where: str) -> list[LabelledItem]:
    """The items of a labelled set (pure); ``where`` names the file in errors (``where:line``).

    >>> parse_labelled('{"prompt": "2 + 2?", "answer": 4}', "set.jsonl")
    [LabelledItem(prompt='2 + 2?', answer='4', regex=None)]
    """
    lines = json_lines(text, where, error=_error, allowed="a labelled set is one JSON object a line")
    items = [_item(data, here) for here, data in lines]
    if not items:
        raise HarnessError(f"{where}:1: no item: a labelled set needs at least one line", hint=_HINT)
    return items
