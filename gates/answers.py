"""A labelled item's answer: what is extracted from the model's visible answer, and whether it is right.

Pipeline position: pure functions the ``answer_accuracy`` gate (:mod:`gates.answer_accuracy`) calls on
each stored answer (``RequestRecord.output_text``) with its item (:mod:`contracts.labelled`). The rules
(docs/accuracy-and-cost.md):

- **extraction**: an item's ``regex``: its last match in the answer, the first group if it has one (else
  the whole match); no match is no answer. Without one (the GSM8K convention): the text after the last
  ``####``; for a numeric reference the first number there, or the last number of the whole answer when
  it has no ``####``; for a text reference the whole answer;
- **comparison**: numbers compare by value after normalization (a leading ``$``, thousands commas, a
  trailing ``.`` dropped: ``$1,234.50`` = ``1234.5``); text compares case-folded, whitespace collapsed,
  surrounding punctuation and ``*`` dropped.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from contracts.labelled import LabelledItem

#: The GSM8K answer marker: the final answer follows the last one.
MARKER = "####"

_NUMBER = re.compile(r"-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_EDGE = " \t\r\n.,;:!?\"'`*()[]{}"


def number(text: str) -> Decimal | None:
    """``text`` as a number after normalization, or None when it is not one.

    >>> number("$1,234.50"), number("42."), number("forty-two")
    (Decimal('1234.50'), Decimal('42'), None)
    """
    cleaned = text.strip().rstrip(".")
    if not _NUMBER.fullmatch(cleaned):  # thousands commas in groups of three only: "1,2" is no number
        return None
    try:
        return Decimal(cleaned.replace(",", "").replace("$", ""))
    except InvalidOperation:  # pragma: no cover  (the pattern admits only what Decimal reads)
        return None


def _text(text: str) -> str:
    return " ".join(text.split()).strip(_EDGE).casefold()


def extract(answer: str, item: LabelledItem) -> str | None:
    """The model's final answer in ``answer`` by ``item``'s rule (module docstring); None: none found.

    >>> extract("17 + 25 = 42.\\n#### 42", LabelledItem("q", "42"))
    '42'
    >>> extract("It is 12, then 30.", LabelledItem("q", "30"))
    '30'
    """
    if item.regex is not None:
        matches = list(re.finditer(item.regex, answer))
        if not matches:
            return None
        last = matches[-1]
        return last.group(1) if last.re.groups else last.group(0)
    numeric = number(item.answer) is not None
    _, marker, tail = answer.rpartition(MARKER)
    if marker:
        if not numeric:
            return tail.strip().splitlines()[0] if tail.strip() else None
        found = _NUMBER.search(tail)
        return found.group(0) if found else None
    if numeric:
        found_all = _NUMBER.findall(answer)
        return found_all[-1] if found_all else None
    return answer


def same_answer(extracted: str, reference: str) -> bool:
    """``extracted`` equals ``reference``: by value when both are numbers, else as normalized text."""
    a, b = number(extracted), number(reference)
    if a is not None and b is not None:
        return a == b
    return _text(extracted) == _text(reference)


def correct(answer: str | None, item: LabelledItem) -> bool:
    """``answer`` (a visible answer; None: none arrived) is right for ``item``."""
    if answer is None:
        return False
    extracted = extract(answer, item)
    return extracted is not None and same_answer(extracted, item.answer)
