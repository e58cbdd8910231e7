"""Converts a GSM8K-style JSONL file (``question`` and ``answer`` ending in ``#### <number>``) into the
project's labelled-set format (``{"prompt": ..., "answer": ...}``, :mod:`contracts.labelled`), so a set a
user already has is judged by the ``answer_accuracy`` gate (docs/accuracy-and-cost.md).

Each prompt is the question followed by the instruction to end on ``#### <number>``; each reference is
the text after the answer's last ``####`` (thousands commas dropped). Nothing is downloaded. Extra keys of
a line are ignored; a line without a question or a ``####`` answer stops the conversion, naming its line.
GSM8K's parquet files: convert them to JSONL first (``pandas.read_parquet(p).to_json(out, orient="records",
lines=True)``, in an environment that has pandas and pyarrow: the vLLM one does).

Usage: python scripts/gsm8k_to_labelled.py IN.jsonl OUT.jsonl [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from contracts.errors import HarnessError
from contracts.jsonl import json_lines
from contracts.labelled import parse_labelled

#: The instruction appended to every question: the answer in the GSM8K convention the gate extracts.
ASK = "Think step by step, then give the final answer on the last line as '#### <number>'."


class ConversionError(ValueError):
    """A line of the input that is not a GSM8K item: its file:line and what is allowed."""


def reference(answer: str) -> str | None:
    """The reference of a GSM8K answer: the text after its last ``####``, commas dropped (None: no ``####``).

    >>> reference("48 / 2 = 24 clips in May.\\n#### 72")
    '72'
    >>> reference("#### 1,000") , reference("no marker") is None
    ('1000', True)
    """
    if "####" not in answer:
        return None
    return answer.rpartition("####")[2].strip().replace(",", "") or None


def convert(text: str, where: str, *, limit: int | None = None) -> list[dict[str, str]]:
    """The labelled items of a GSM8K-style JSONL text (blank lines skipped), at most ``limit`` of them."""
    items: list[dict[str, str]] = []
    allowed = "GSM8K-style JSONL is one object a line"
    for here, raw in json_lines(text, where, error=ConversionError, allowed=allowed):
        if not isinstance(raw, dict):
            raise ConversionError(f'{here}: not an object; allowed: {{"question": ..., "answer": ...}}')
        question, answer = raw.get("question"), raw.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise ConversionError(f"{here}: question = {question!r}: a non-empty string is required")
        ref = reference(answer) if isinstance(answer, str) else None
        if ref is None:
            raise ConversionError(
                f"{here}: answer = {answer!r}: a string ending in '#### <reference>' (the GSM8K convention)"
            )
        items.append({"prompt": f"{question.strip()} {ASK}", "answer": ref})
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise ConversionError(f"{where}: no items")
    return items


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="GSM8K-style JSONL (question, answer)")
    parser.add_argument("out", type=Path, help="the labelled set to write (.jsonl)")
    parser.add_argument("--limit", type=int, default=None, help="the first N items only")
    args = parser.parse_args(argv)
    if args.out.suffix != ".jsonl":
        print(f"error: {args.out}: a labelled set's name ends in .jsonl", file=sys.stderr)
        return 2
    try:
        items = convert(args.source.read_text(), str(args.source), limit=args.limit)
        text = "".join(json.dumps(i) + "\n" for i in items)
        parse_labelled(text, str(args.out))  # what the sweep will read: refused here, not at plan
    except (OSError, ConversionError, HarnessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(text)
    print(
        f"wrote {len(items)} items to {args.out}: run it with "
        f"workloads.accuracy.prompts_file={args.out.resolve()} workloads.accuracy.num_requests={len(items)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
