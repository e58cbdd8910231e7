"""``bench_serve.json``: a run in ``vllm bench serve``'s result shape (field names checked against vLLM's
``vllm/benchmarks/serve.py``), written beside ``summary.json`` and rebuilt from the same files; and
``summaries.csv``'s verdict column and its rows for candidates that never started."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from contracts.benchserve import bench_serve_from_files, bench_serve_result
from contracts.layout import BENCH_SERVE_FILE
from contracts.results import LoadSettings, RequestRecord
from contracts.sweepdir import load_baseline, load_results
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from load.collect import RunResult
from load.metrics import MetricsLog
from load.write import write_results
from report.export import COLUMNS, render_csv, summary_rows
from tests.unit.fakes import summary
from tests.unit.gates_fixtures import case_study
from tests.unit.load_fixtures import record, workload

#: What `vllm bench serve --save-result --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles
#: 50,90,99` writes (vllm/benchmarks/serve.py: main()'s settings, benchmark()'s result dict and
#: process_one_metric's keys), less the per-request lists and max_output_tokens_per_s.
VLLM_FIELDS = {
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_concurrent_requests",
    *(
        f"{stat}_{metric}_ms"
        for metric in ("ttft", "tpot", "itl", "e2el")
        for stat in ("mean", "median", "std", "p50", "p90", "p99")
    ),
}


def three_done_one_failed() -> list[RequestRecord]:
    """A warmup, three completed requests (TTFT 0.1/0.2/0.3 s, 10 tokens each) and a failed one."""
    return [
        record(0, warmup=True, ttft_s=9.0, end_s=9.5),
        record(1, ttft_s=0.1, end_s=1.0, chunk_offsets_s=[0.1, 0.3, 1.0]),
        record(2, ttft_s=0.2, end_s=2.0, chunk_offsets_s=[0.2, 2.0]),
        record(3, ttft_s=0.3, end_s=3.0, chunk_offsets_s=[0.3]),
        record(4, ttft_s=None, end_s=None, chunk_offsets_s=[], error="http_5xx", finish_reason=None),
    ]


def test_every_vllm_field_is_written_with_vllms_meaning() -> None:
    s = summary("cand", "decode", 1, "sha256:" + "0" * 64, n=4).model_copy(update={"duration_s": 4.0})
    result = bench_serve_result(s, three_done_one_failed())
    assert set(result) >= VLLM_FIELDS
    assert (result["completed"], result["failed"]) == (3, 1)
    assert (result["total_input_tokens"], result["total_output_tokens"]) == (300, 30)
    assert result["request_throughput"] == pytest.approx(3 / 4)
    assert result["output_throughput"] == pytest.approx(30 / 4)
    assert result["total_token_throughput"] == pytest.approx(330 / 4)
    assert result["mean_ttft_ms"] == pytest.approx(200.0)
    assert result["median_ttft_ms"] == pytest.approx(200.0)
    assert result["p99_ttft_ms"] == pytest.approx(298.0)  # numpy's linear percentile
    assert result["std_ttft_ms"] == pytest.approx(math.sqrt(2 / 3) * 100)  # population std
    # TPOT = (latency - TTFT) / (output tokens - 1)
    assert result["mean_tpot_ms"] == pytest.approx(1000 * (0.9 + 1.8 + 2.7) / 9 / 3)
    assert result["median_itl_ms"] == pytest.approx(1000 * 0.7)  # gaps 0.2, 0.7, 1.8
    assert result["p50_e2el_ms"] == pytest.approx(2000.0)
    assert result["max_concurrent_requests"] == 2  # [1, 2), [2, 4), [3, 6): at most two at once
    assert (result["label"], result["candidate"], result["profile"], result["repeat"]) == (
        "cand",
        "cand",
        "decode",
        1,
    )
    assert result["date"] == "20261202-000000"
    json.dumps(result, allow_nan=False)  # plain JSON: every reader parses it


@pytest.mark.parametrize(
    ("mode", "concurrency", "rate", "request_rate", "max_concurrency"),
    [("closed", 8, None, "inf", 8), ("open", 1, 2.5, 2.5, None)],
)
def test_the_runs_settings_in_vllms_words(
    mode: str, concurrency: int, rate: float | None, request_rate: object, max_concurrency: int | None
) -> None:
    settings = LoadSettings(
        base_url="http://127.0.0.1:8000",
        served_model="m",
        salt="s",
        scale=1.0,
        time_scale=1.0,
        prompts_dir="conf/workload",
        workload=workload(mode=mode, concurrency=concurrency, rate=rate),
    )
    s = summary("c", "p", 1, "f").model_copy(update={"settings": settings})
    result = bench_serve_result(s, [record(1)])
    assert (result["model_id"], result["request_rate"], result["max_concurrency"]) == (
        "m",
        request_rate,
        max_concurrency,
    )
    assert result["endpoint_type"] == "openai-chat"


def test_an_empty_run_says_nothing_was_measured() -> None:
    result = bench_serve_result(summary("c", "p", 1, "f"), [])
    assert result["completed"] == 0
    assert result["mean_ttft_ms"] is None and result["p99_e2el_ms"] is None


def test_written_beside_the_summary_and_rebuilt_from_disk(tmp_path: Path) -> None:
    records = three_done_one_failed()
    s = summary("cand", "decode", 1, "f")
    metrics = MetricsLog(base_url="http://x", t0_monotonic_ns=0, time_scale=1.0, scrapes=[], errors=[])
    write_results(tmp_path, RunResult(records=records, summary=s, metrics=metrics))
    on_disk = json.loads((tmp_path / BENCH_SERVE_FILE).read_text())
    assert on_disk == bench_serve_result(s, records)
    assert on_disk == json.loads(json.dumps(bench_serve_from_files(tmp_path)))


# ------------------------------------------------------------------------------------------ summaries.csv


def _verdicts() -> SweepVerdict:
    def v(name: str, decision: str) -> Verdict:
        return Verdict(candidate=name, decision=decision, reason="r")  # type: ignore[arg-type]

    return SweepVerdict(
        baseline="baseline",
        retained="baseline",
        retained_reason="r",
        drift=DriftResult(status="pass", message="m"),
        verdicts=[
            v("tp4_dp2", "reject"),
            v("spec_probabilistic", "neutral"),
            v("mega_moe", "incompatible"),
            v("eplb", "incompatible"),
            v("never_launched", "incompatible"),
        ],
    )


def test_summaries_csv_has_a_row_per_candidate_with_its_verdict(tmp_path: Path) -> None:
    sweep = case_study(tmp_path / "sweep")
    names = ["baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb"]
    results = {n: load_baseline(sweep, f"candidates/{n}", n) for n in names}
    recovery = load_results(sweep, "recovery", "baseline")
    text = render_csv(summary_rows(sweep, results, recovery, _verdicts()))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(COLUMNS)
    verdict = {r["candidate"]: r["verdict"] for r in rows}
    assert verdict == {
        "baseline": "baseline",
        "tp4_dp2": "reject",
        "spec_probabilistic": "neutral",
        "mega_moe": "incompatible",
        "eplb": "incompatible",
        "never_launched": "incompatible",
    }
    not_started = {r["candidate"]: r for r in rows if r["source"] == "not_started"}
    assert set(not_started) == {"mega_moe", "eplb", "never_launched"}
    assert not_started["mega_moe"]["startup_failure"] == "incompatible"
    assert not_started["eplb"]["startup_failure"] == "init-failed"
    assert not_started["mega_moe"]["summary_file"] == "candidates/mega_moe/run.json"
    assert not_started["never_launched"]["fingerprint"] == ""  # no run.json: identity only
    assert all(r["startup_failure"] == "" for r in rows if r["source"] != "not_started")


def test_summaries_csv_without_verdicts_leaves_the_column_empty(tmp_path: Path) -> None:
    sweep = case_study(tmp_path / "sweep")
    results = {n: load_baseline(sweep, f"candidates/{n}", n) for n in ("baseline", "mega_moe")}
    rows = list(summary_rows(sweep, results))
    assert {r["verdict"] for r in rows} == {None}
    assert [r["candidate"] for r in rows if r["source"] == "not_started"] == ["mega_moe"]
