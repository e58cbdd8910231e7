"""One JSONL reader: each non-blank line of a text parsed as JSON, with where it stands (``file:line``).

Pipeline position: under every JSONL file a user or a tool hands gauntlet: a labelled set
(:mod:`contracts.labelled`), lm-eval's samples files (:mod:`contracts.lmeval`) and a GSM8K-style file
being converted (``scripts/gsm8k_to_labelled.py``). Each caller checks what a line must hold; the reader
does what they share: blank lines skipped, every value handed on with its ``file:line``, a line that is
not JSON refused as the caller's own error naming it::

    for where, value in json_lines(text, "set.jsonl", error=HarnessError, allowed="one object a line"):
        ...   # where: "set.jsonl:3"
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator


def json_lines(
    text: str, where: str, *, error: Callable[[str], Exception], allowed: str
) -> Iterator[tuple[str, object]]:
    """Each non-blank line of ``text`` as (``where:line``, its JSON value), in order (pure, lazy: a caller
    that stops early reads no further). A line that is not JSON raises ``error`` with
    ``where:line: not JSON (<why>); <allowed>``.

    >>> list(json_lines('{"a": 1}\\n\\n[2]\\n', "f.jsonl", error=ValueError, allowed="one object a line"))
    [('f.jsonl:1', {'a': 1}), ('f.jsonl:3', [2])]
    >>> next(json_lines("{bad", "f.jsonl", error=ValueError, allowed="one object a line"))
    Traceback (most recent call last):
    ...
    ValueError: f.jsonl:1: not JSON (Expecting property name enclosed in double quotes); one object a line
    """
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        here = f"{where}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{here}: not JSON ({exc.msg}); {allowed}") from exc
        yield here, value
