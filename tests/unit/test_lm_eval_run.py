"""lm-eval as a workload: its command line, its samples read back, a failed run told by whose fault."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from contracts.errors import HarnessError, LoadError
from contracts.layout_lmeval import LmEvalPaths
from contracts.lmeval import LmEvalRun, parse_samples, read_docs, task_of
from contracts.lmeval_profile import LmEvalProfile, LocalTask
from load.lm_eval import Finished, classify, lm_eval_argv, lm_eval_env, run_lm_eval

FIXTURE = Path(__file__).parent / "data" / "lm_eval_samples.jsonl"


def _line(doc_id: int, score: object, filt: str = "none", **extra: object) -> str:
    row = {"doc_id": doc_id, "doc": {"q": doc_id}, "target": "7", "filtered_resps": ["7"], "filter": filt,
           "metrics": ["exact_match"], "doc_hash": f"h{doc_id}", "exact_match": score, **extra}  # fmt: skip
    return json.dumps(row)


def test_the_real_samples_file_reads_as_documents() -> None:
    """A samples file lm-eval 0.4.13 wrote against real vLLM (tests/e2e's local task, tiny-random)."""
    docs = parse_samples(FIXTURE.read_text(), str(FIXTURE), task="gauntlet_tiny", metric="exact_match",
                         filter_name=None)  # fmt: skip
    assert [d.doc_id for d in docs] == list(range(10))
    assert {d.filter for d in docs} == {"none"} and all(d.doc_hash for d in docs)
    assert all(d.score in (0.0, 1.0) for d in docs)


@pytest.mark.parametrize(
    ("lines", "filter_name", "scores", "error"),
    [
        ([_line(1, 1.0), _line(0, 0.0)], None, {0: 0.0, 1: 1.0}, None),
        ([_line(0, 1.0, "strict-match"), _line(0, 0.0, "flexible-extract")], None, {0: 1.0}, None),
        ([_line(0, 1.0, "strict-match"), _line(0, 0.0, "flexible-extract")], "flexible-extract", {0: 0.0},
         None),
        ([_line(0, 1.0), "", _line(1, 1)], None, {0: 1.0, 1: 1.0}, None),
        ([_line(0, 1.0)], "strict-match", {}, "has no filter 'strict-match'; its filters: none"),
        (["{not json"], None, {}, ":1: not JSON"),
        (['{"doc": 1}'], None, {}, ":1: not an lm-eval sample"),
        ([_line(0, 0.5)], None, {}, "pairs right (1) and wrong (0)"),
        ([_line(0, "1")], None, {}, "needs a number per document"),
        ([_line(0, 1.0), _line(0, 1.0)], None, {}, ":2: doc_id 0 appears twice"),
        ([json.dumps({"doc_id": 0, "filter": "none", "acc": 1})], None, {}, "has no metric 'exact_match'"),
    ],
    ids=["two-docs", "first-filter", "chosen-filter", "blank-line", "unknown-filter", "not-json",
         "not-a-sample", "fractional", "string-score", "twice", "no-metric"],
)  # fmt: skip
def test_samples_are_parsed_or_refused_naming_the_line(
    lines: list[str], filter_name: str | None, scores: dict[int, float], error: str | None
) -> None:
    text = "\n".join(lines) + "\n"
    if error is not None:
        with pytest.raises(HarnessError, match=error.replace("(", r"\(").replace(")", r"\)")):
            parse_samples(text, "s.jsonl", task="t", metric="exact_match", filter_name=filter_name)
        return
    docs = parse_samples(text, "s.jsonl", task="t", metric="exact_match", filter_name=filter_name)
    assert {d.doc_id: d.score for d in docs} == scores


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("samples_gsm8k_2026-12-06T16-21-07.123456.jsonl", "gsm8k"),
        ("samples_mmlu_pro_biology_2026-12-06T16-21-07.123456.jsonl", "mmlu_pro_biology"),
        ("results_2026-12-06T16-21-07.123456.json", None),
        ("samples_gsm8k.jsonl", None),
    ],
)
def test_the_task_is_read_from_the_samples_files_name(name: str, task: str | None) -> None:
    assert task_of(name) == task


def test_a_task_without_samples_is_named(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "samples_a_2026-12-06T16-21-07.1.jsonl").write_text(_line(0, 1.0) + "\n")
    assert len(read_docs(tmp_path, ["a"], metric="exact_match", filter_name=None)) == 1
    with pytest.raises(HarnessError, match=r"no samples for task 'b' \(samples files there: samples_a_"):
        read_docs(tmp_path, ["a", "b"], metric="exact_match", filter_name=None)


LOCAL = LocalTask(name="tiny", folder=Path("/tasks"))


@pytest.mark.parametrize(
    ("profile", "present", "absent"),
    [
        (LmEvalProfile(name="p", tasks=["gsm8k"]),
         ["tokenizer=m", "/v1/completions", "tokenized_requests=False"],
         ["--apply_chat_template", "--limit", "--include_path"]),
        (LmEvalProfile(name="p", tasks=["gsm8k"], tokenizer="/models/t", limit=50, num_fewshot=5),
         ["tokenizer=/models/t", "--limit 50", "--num_fewshot 5"], ["--include_path"]),
        (LmEvalProfile(name="p", tasks=["gsm8k"], model="local-chat-completions", max_gen_toks=512),
         ["/v1/chat/completions", "--apply_chat_template", "--gen_kwargs max_gen_toks=512"], ["tokenizer="]),
        (LmEvalProfile(name="p", tasks=["gsm8k", "tiny"], local=[LOCAL]),
         ["--tasks gsm8k,tiny", "--include_path /tasks", "--log_samples"], []),
    ],
    ids=["completions", "limit-fewshot", "chat", "local"],
)  # fmt: skip
def test_the_command_line(profile: LmEvalProfile, present: list[str], absent: list[str]) -> None:
    argv = lm_eval_argv(profile, base_url="http://h:1/", model="m", output_dir=Path("/o"), python="py")
    line = " ".join(argv)
    assert argv[:3] == ["py", "-m", "lm_eval"] and "base_url=http://h:1/v1/" in line
    assert all(p in line for p in present), line
    assert not any(a in line for a in absent), line


@pytest.mark.parametrize(
    ("offline", "key", "expected"),
    [
        (True, None, {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}),
        (False, "k", {"OPENAI_API_KEY": "k"}),
    ],
)
def test_the_environment(offline: bool, key: str | None, expected: dict[str, str]) -> None:
    env = lm_eval_env(LmEvalProfile(name="p", tasks=["t"], offline=offline), {"PATH": "/bin"}, api_key=key)
    assert env["PATH"] == "/bin" and expected.items() <= env.items()
    assert ("HF_HUB_OFFLINE" in env) is offline


#: lm-eval 0.4.13's last line when the server at 127.0.0.1:18999 refused it (seen here, num_concurrent 1).
REFUSED = (
    "requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=18999): Max retries "
    "exceeded with url: /v1/completions (Caused by NewConnectionError(... [Errno 111] Connection refused))"
)
#: lm-eval 0.4.13's lines when vLLM answered 400 (max_tokens 4000 over max_model_len 2048; seen here).
BAD_REQUEST = (
    "WARNING  [models.api_models:521] API request failed! Status code: 400, Response text: "
    '{"error":{"message":"max_tokens=4000 cannot be greater than max_model_len=2048."}}\n'
    "aiohttp.client_exceptions.ClientResponseError: 400, message='Bad Request', "
    "url='http://127.0.0.1:18999/v1/completions'"
)
HUB = (
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
    "exceeded with url: /api/datasets/openai/gsm8k"
)


@pytest.mark.parametrize(
    ("output", "fault", "words"),
    [
        ("ModuleNotFoundError: No module named 'lm_eval'", "harness", "lm-eval is not installed"),
        ("cannot start the interpreter /x/python: [Errno 2] No such file", "harness",
         "lm-eval is not installed"),
        ("ValueError: Tasks not found: nosuchtask_xyz", "harness", "does not know task(s)"),
        (REFUSED, "server", "the server failed"),
        ("aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:18999", "server",
         "the server failed"),
        ("WARNING API request failed with error message: Internal Server Error. Retrying...\nTypeError: x",
         "server", "answered with an error after lm-eval's retries"),
        (BAD_REQUEST, "server", "answered with an error"),
        (BAD_REQUEST.splitlines()[1], "server", "refused, dropped or answered with an error"),
        (HUB, "harness", "from the Hugging Face hub"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'tiny.jsonl'", "harness", "its own error"),
        ("Traceback ...\nKeyError: 'resps'", "harness", "its own error, not the server's"),
    ],
    ids=["missing", "no-interpreter", "task-not-found", "refused", "refused-aiohttp", "http-500", "http-400",
         "http-400-last-line", "hub",
         "data-file", "crash"],
)  # fmt: skip
def test_a_failed_run_is_told_by_whose_fault(output: str, fault: str, words: str) -> None:
    found = classify(output, ("127.0.0.1", "18999"))
    assert found[0] == fault and words in found[1], found


class FakeRun:
    """The lm-eval seam: writes a samples file (or not) and returns a table's outcome."""

    def __init__(self, finished: Finished, samples: str | None) -> None:
        self.finished, self.samples = finished, samples
        self.argv: list[str] = []

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, log: Path
    ) -> Finished:
        self.argv = list(argv)
        if self.samples is not None:
            out = Path(argv[argv.index("--output_path") + 1]) / "tiny-random"
            out.mkdir(parents=True)
            (out / "samples_gsm8k_2026-12-06T16-21-07.1.jsonl").write_text(self.samples)
        log.write_text(self.finished.output)
        return self.finished


@pytest.mark.parametrize(
    ("finished", "samples", "error", "words"),
    [
        (Finished(0, "done"), _line(0, 1.0) + "\n" + _line(1, 0.0) + "\n", None, ""),
        (Finished(None, "slow"), None, HarnessError, "ran past timeout_s = 60 s on task(s) gsm8k"),
        (Finished(1, "No module named 'lm_eval'"), None, HarnessError, "lm-eval is not installed in py"),
        (Finished(1, "Tasks not found: gsm8k"), None, HarnessError, "does not know task(s) gsm8k"),
        (Finished(1, "ClientConnectorError: Cannot connect to host h:1"), None, LoadError,
         "the server failed"),
        (Finished(0, "done"), None, HarnessError, "no samples for task 'gsm8k'"),
    ],
    ids=["ok", "timeout", "missing", "no-task", "server", "no-samples"],
)  # fmt: skip
def test_a_run_writes_its_record_or_raises_naming_profile_and_task(
    tmp_path: Path, finished: Finished, samples: str | None, error: type[Exception] | None, words: str
) -> None:
    profile = LmEvalProfile(name="gsm", tasks=["gsm8k"], timeout_s=60, python="py", source="lm.yaml")
    fake = FakeRun(finished, samples)
    if error is None:
        record = run_lm_eval("http://h:1", "m", profile, candidate="cand", out_dir=tmp_path, run=fake)
        assert LmEvalRun.read(LmEvalPaths(tmp_path).record) == record
        assert [(d.doc_id, d.right) for d in record.docs] == [(0, True), (1, False)]
        assert record.argv == fake.argv and record.profile == "gsm"
        return
    with pytest.raises(error) as info:
        run_lm_eval("http://h:1", "m", profile, candidate="cand", out_dir=tmp_path, run=fake)
    assert type(info.value) is error
    assert words in str(info.value) and "'gsm'" in str(info.value)
    assert not LmEvalPaths(tmp_path).record.exists()
