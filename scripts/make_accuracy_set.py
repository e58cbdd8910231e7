"""Writes the project's own labelled set, conf/workload/accuracy_set.jsonl: arithmetic word problems whose
reference answers are computed here, so nothing is downloaded and every run of this script writes the same
bytes (tests/unit/test_answer_accuracy.py checks the file against it).

Each item asks for a short calculation (two or three operations on numbers below 100) and for the final
answer on its own line in the GSM8K convention, ``#### <number>`` (docs/accuracy-and-cost.md).
Usage: python scripts/make_accuracy_set.py [OUT]   (default: conf/workload/accuracy_set.jsonl)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

#: How many items, and the seed that draws them.
ITEMS = 300
SEED = 36
OUT = Path(__file__).resolve().parent.parent / "conf" / "workload" / "accuracy_set.jsonl"

_NAMES = ("Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana")
_THINGS = ("apples", "books", "coins", "stamps", "marbles", "tickets", "shells", "pencils")
_ASK = "Think step by step, then give the final answer on the last line as '#### <number>'."


def item(rng: random.Random) -> dict[str, str]:
    """One word problem: someone has a things, gets b more, gives away c, packs the rest in groups."""
    name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
    a, b = rng.randint(10, 99), rng.randint(2, 60)
    c = rng.randint(1, a + b - 1)
    left = a + b - c
    if rng.random() < 0.5:
        k = rng.randint(2, 6)
        extra = f" Then {name} buys {k} times as many {thing} as are left and adds them."
        answer = left + k * left
    else:
        extra = ""
        answer = left
    prompt = (
        f"{name} has {a} {thing}, gets {b} more and gives {c} away.{extra} "
        f"How many {thing} does {name} have now? {_ASK}"
    )
    return {"prompt": prompt, "answer": str(answer)}


def labelled_set(items: int = ITEMS, seed: int = SEED) -> str:
    """The set's text: one JSON object per line."""
    rng = random.Random(seed)
    return "".join(json.dumps(item(rng)) + "\n" for _ in range(items))


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.write_text(labelled_set())
    print(f"wrote {ITEMS} items to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
