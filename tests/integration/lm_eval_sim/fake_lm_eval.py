"""A stand-in for ``python -m lm_eval`` in the sweep test on the simulator (no torch, no datasets).

It takes lm-eval's command line as :func:`load.lm_eval.lm_eval_argv` renders it for
``local-chat-completions``, sends each document of a local task (``<include_path>/<task>.jsonl``, the file
the task YAML names) to the server's ``/v1/chat/completions`` as lm-eval would (greedy, the output budget
of ``--gen_kwargs max_gen_toks``, ``num_concurrent`` in flight), applies the task's ``strict-match`` filter
(the last ``#### N``) and writes ``samples_<task>_<date>.jsonl`` below ``--output_path`` in lm-eval
0.4.x's format (one object per document: doc_id, doc_hash, filter, metrics, exact_match, target,
filtered_resps). What gauntlet does with the file is what the test checks; that lm-eval itself writes
this format is checked by ``tests/unit/test_lm_eval_samples.py`` (a file lm-eval 0.4.13 wrote) and the
real-vLLM e2e test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx

ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")


def main(argv: list[str]) -> int:
    if argv[:2] == ["-m", "lm_eval"]:
        argv = argv[2:]
    p = argparse.ArgumentParser()
    for flag in ("--model", "--model_args", "--tasks", "--output_path", "--include_path", "--limit",
                 "--gen_kwargs", "--num_fewshot"):  # fmt: skip
        p.add_argument(flag)
    p.add_argument("--log_samples", action="store_true")
    p.add_argument("--apply_chat_template", action="store_true")
    args = p.parse_args(argv)
    model_args = dict(part.split("=", 1) for part in args.model_args.split(","))
    budget = int(args.gen_kwargs.split("=", 1)[1]) if args.gen_kwargs else 256
    out = Path(args.output_path) / model_args["model"].replace("/", "__")
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")
    for task in args.tasks.split(","):
        data = Path(args.include_path) / f"{task}.jsonl"
        docs = [json.loads(line) for line in data.read_text().splitlines()]
        if args.limit:
            docs = docs[: int(args.limit)]

        def ask(doc: dict[str, str]) -> str:
            body = {
                "model": model_args["model"],
                "messages": [{"role": "user", "content": doc["question"]}],
                "max_tokens": budget,
                "temperature": 0.0,
            }
            reply = httpx.post(model_args["base_url"], json=body, timeout=120)
            reply.raise_for_status()
            return str(reply.json()["choices"][0]["message"]["content"] or "")

        with ThreadPoolExecutor(int(model_args.get("num_concurrent", "1"))) as pool:
            answers = list(pool.map(ask, docs))
        lines = []
        for doc_id, (doc, text) in enumerate(zip(docs, answers, strict=True)):
            found = ANSWER.findall(text)
            filtered = found[-1] if found else "[invalid]"
            lines.append(json.dumps({
                "doc_id": doc_id, "doc": doc, "target": doc["answer"], "resps": [[text]],
                "filtered_resps": [filtered], "filter": "strict-match", "metrics": ["exact_match"],
                "doc_hash": hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest(),
                "exact_match": float(filtered == doc["answer"]),
            }))  # fmt: skip
        (out / f"samples_{task}_{stamp}.jsonl").write_text("\n".join(lines) + "\n")
    print(f"fake lm-eval: {args.tasks} done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
