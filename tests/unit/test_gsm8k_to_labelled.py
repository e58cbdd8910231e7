"""scripts/gsm8k_to_labelled.py: a GSM8K-style JSONL becomes a labelled set the accuracy gate reads."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from contracts.labelled import parse_labelled
from gates.answers import correct

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gsm8k_to_labelled", ROOT / "scripts" / "gsm8k_to_labelled.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CONVERT = _script()
GSM = json.dumps({"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
                  "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72"})  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "limit", "answers", "error"),
    [
        ([GSM], None, ["72"], None),
        ([GSM, "", json.dumps({"question": "q?", "answer": "x\n#### 1,200", "id": 7})], None, ["72", "1200"],
         None),
        ([GSM, GSM, GSM], 2, ["72", "72"], None),
        (["{bad"], None, [], "in.jsonl:1: not JSON"),
        (["[1]"], None, [], "in.jsonl:1: not an object"),
        ([json.dumps({"question": "", "answer": "#### 1"})], None, [], "in.jsonl:1: question = ''"),
        ([GSM, json.dumps({"question": "q", "answer": "no marker"})], None, [],
         "in.jsonl:2: answer = 'no marker'"),
        ([json.dumps({"question": "q", "answer": 5})], None, [], "'#### <reference>'"),
        ([""], None, [], "in.jsonl: no items"),
    ],
    ids=["one", "commas-extra-keys-blank", "limit", "not-json", "not-object", "empty-question", "no-marker",
         "number-answer", "empty"],
)  # fmt: skip
def test_gsm8k_lines_become_labelled_items_or_are_refused_naming_the_line(
    lines: list[str], limit: int | None, answers: list[str], error: str | None
) -> None:
    text = "\n".join(lines) + "\n"
    if error is not None:
        with pytest.raises(CONVERT.ConversionError, match=error.replace("(", r"\(")):
            CONVERT.convert(text, "in.jsonl", limit=limit)
        return
    items = CONVERT.convert(text, "in.jsonl", limit=limit)
    assert [i["answer"] for i in items] == answers
    assert all(i["prompt"].endswith(CONVERT.ASK) for i in items)


def test_the_written_set_is_read_and_scored_as_the_gate_does(tmp_path: Path) -> None:
    source, out = tmp_path / "gsm.jsonl", tmp_path / "set.jsonl"
    source.write_text(GSM + "\n")
    assert CONVERT.main([str(source), str(out)]) == 0
    (item,) = parse_labelled(out.read_text(), str(out))
    assert correct("24 + 48 = 72\n#### 72", item) and not correct("#### 71", item)


@pytest.mark.parametrize(
    ("text", "out", "says"),
    [("{bad\n", "set.jsonl", "not JSON"), (GSM + "\n", "set.json", "ends in .jsonl")],
    ids=["bad-input", "not-jsonl"],
)
def test_a_refused_conversion_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, out: str, says: str
) -> None:
    (tmp_path / "gsm.jsonl").write_text(text)
    assert CONVERT.main([str(tmp_path / "gsm.jsonl"), str(tmp_path / out)]) == 2
    assert not (tmp_path / out).exists() and says in capsys.readouterr().err
