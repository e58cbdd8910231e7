"""One JSONL reader for the labelled set, lm-eval's samples and the GSM8K converter: blank lines skipped,
each value with its file:line, a line that is not JSON refused as the caller's own error naming it."""

from __future__ import annotations

from itertools import islice

import pytest

from contracts.errors import HarnessError
from contracts.jsonl import json_lines


class CallerError(ValueError):
    """A caller's own error type (as the converter's ConversionError)."""


@pytest.mark.parametrize(
    ("text", "take", "expected"),
    [
        ('{"a": 1}\n[2]\n', None, [("f.jsonl:1", {"a": 1}), ("f.jsonl:2", [2])]),
        ('\n  \n{"a": 1}\n\n3\n', None, [("f.jsonl:3", {"a": 1}), ("f.jsonl:5", 3)]),
        ("", None, []),
        ('{"a": 1}\n{bad\n', 1, [("f.jsonl:1", {"a": 1})]),  # a reader that stops early reads no further
    ],
    ids=["values", "blank-lines-keep-numbers", "empty", "stops-early"],
)
def test_each_value_comes_with_its_file_and_line(
    text: str, take: int | None, expected: list[tuple[str, object]]
) -> None:
    lines = json_lines(text, "f.jsonl", error=HarnessError, allowed="one object a line")
    assert list(islice(lines, take)) == expected


@pytest.mark.parametrize(
    ("text", "error", "words"),
    [
        ('{"a": 1}\n{bad\n', HarnessError, "f.jsonl:2: not JSON (Expecting property name"),
        ("\n\nnot json\n", CallerError, "f.jsonl:3: not JSON (Expecting value); one object a line"),
    ],
    ids=["harness-error", "callers-error"],
)
def test_a_line_that_is_not_json_is_the_callers_error_naming_it(
    text: str, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        list(json_lines(text, "f.jsonl", error=error, allowed="one object a line"))
    assert type(info.value) is error and words in str(info.value)
