"""The README's first command: the case-study sweep on the simulator, end to end, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import ROOT, assert_finished, sim_servers

pytestmark = pytest.mark.slow


def test_demo_sweep_reproduces_the_case_study(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "-m",
            "candidate=glob(*)",
            "+experiment=demo",
            f"run.sweeps_dir={sweeps}",
            f"service.port={port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    elapsed = time.monotonic() - started
    sweep = (sweeps / "latest").resolve()
    assert_finished(done.returncode, done.stdout[-4000:] + done.stderr[-4000:], sweep)
    verdicts = json.loads((sweep / "verdicts.json").read_text())
    by_name = {v["candidate"]: v for v in verdicts["verdicts"]}
    drift = verdicts["drift"]
    # On a loaded machine the baseline can move under the sweep (its opening decode_heavy read 3,900 tok/s
    # against 5,300 later once, 1.33x): then every measured verdict is INCONCLUSIVE, as it must be, and the
    # decision the data fixes is the one the drift voided (tests/e2e/test_sweep_vllm_cpu.py does the same).
    drifted = drift["status"] == "fail"

    def decided(verdict: dict[str, object]) -> object:
        if drifted and verdict["decision"] == "inconclusive":
            assert "BASELINE DRIFT" in str(verdict["reason"]), verdict["reason"]
            return verdict["decision_before_drift"]
        return verdict["decision"]

    # TP4 x DP2 wins the empty road and loses the shared one.
    assert decided(by_name["tp4_dp2"]) == "reject"
    assert "concurrency" in by_name["tp4_dp2"]["failed"]
    assert by_name["tp4_dp2"]["reversal"]
    # Probabilistic drafts: fewer visible answers, and no throughput advantage under load. (The reason's
    # "no clear load advantage" also asks that no loaded median TTFT be claimed lower; on a busy machine
    # decode_heavy's median can land one prefill wave apart in all three runs of a side, docs/gates.md
    # Drift, and a 3-against-3 interval then claims it: 0.652x [0.427x, 0.994x] in one run.)
    spec = by_name["spec_probabilistic"]
    assert decided(spec) == "reject"
    assert spec["failed"] == ["answer_reliability", "answer_accuracy"]
    # Its answers to the labelled set: the simulator's stated model changes a quarter of them, and the
    # drop's lower bound is above the 2-point tolerance (gates.noninferiority).
    assert (
        "answer accuracy: accuracy 225/300 (75%" in spec["reason"]
        and "55 item(s) lost, 0 gained" in spec["reason"]
        and "lower bound above the 2-point tolerance" in spec["reason"]
    )
    accuracy = next(g for g in by_name["tp4_dp2"]["gates"] if g["gate"] == "answer_accuracy")
    assert (
        accuracy["status"] == "pass"
        and "300/300 (100%) token-identical (greedy draft sampling)" in accuracy["message"]
        and "within the 2-point tolerance: non-inferior" in accuracy["message"]
    )
    conc = next(g for g in spec["gates"] if g["gate"] == "concurrency")
    assert conc["status"] in ("pass", "inconclusive"), conc["message"]
    tps = [c for c in conc["comparisons"] if c["unit"] == "tok/s"]
    assert tps and not [c for c in tps if c["interval"] and c["interval"][0] > 1.05], conc["message"]
    # Compatibility, not performance.
    assert by_name["mega_moe"]["decision"] == "incompatible"
    assert by_name["eplb"]["decision"] == "incompatible"
    assert verdicts["retained"] == "baseline"
    # ABA: the baseline measured again after each candidate that started (not after the incompatible).
    blocks = sorted(p.name for p in (sweep / "candidates" / "baseline" / "blocks").iterdir())
    assert blocks == ["after-spec_probabilistic", "after-tp4_dp2"]
    assert (drift["blocks"], drift["recovery"]) == (2, True), drift["message"]
    assert drift["min_detectable_drift"] is not None, drift["message"]
    assert "2 interleaved baseline block(s) and the end-of-sweep recovery" in drift["message"]
    assert "2 interleaved block(s) of the recovery profiles" in (sweep / "report.md").read_text()
    validation = json.loads((sweep / "recovery" / "validation.json").read_text())
    assert validation["ok"], validation["reason"]
    # The decision table is printed, and says where the numbers come from.
    assert "SIMULATED" in done.stdout
    assert "| tp4_dp2" in done.stdout and "REJECT" in done.stdout  # or "(would have been REJECT)"
    for name in ("report.md", "report.json", "ttft.png", "throughput.png", "ranking.png"):
        assert (sweep / name).stat().st_size > 0, name
    # Capacity at the SLO: a line per candidate that started, tp4_dp2's far below the baseline's.
    for name in ("pareto.png", "goodput.png", "summaries.csv"):
        assert (sweep / name).stat().st_size > 0, name
    capacity = {
        n: json.loads((sweep / "candidates" / n / "capacity.json").read_text())
        for n in ("baseline", "tp4_dp2", "spec_probabilistic")
    }
    assert capacity["tp4_dp2"]["capacity"] < 0.5 * capacity["baseline"]["capacity"]
    gate = next(g for g in by_name["tp4_dp2"]["gates"] if g["gate"] == "capacity")
    assert gate["status"] == "fail" and gate["interval"][1] < 1
    report_md = (sweep / "report.md").read_text()
    for n in capacity:
        assert f"- {n}: capacity " in report_md
    assert "Goodput, output tok/s of the requests that met the SLO" in report_md
    # The terminal gets the decision table and a short summary; report.html (one page) and report.md
    # have the rest.
    assert "capacity at the SLO (decode_heavy, concurrent): baseline " in done.stdout
    assert "goodput at the SLO (output tok/s, mean [95% interval] over repeats; repeats held):" in done.stdout
    goodput = [line for line in done.stdout.splitlines() if line.startswith("  decode_heavy: ")]
    assert len(goodput) == 1 and "baseline " in goodput[0] and "tp4_dp2 " in goodput[0], done.stdout
    assert "## Key figures" not in done.stdout
    assert (sweep / "report.html").stat().st_size > 100_000
    # Results other tools read: bench_serve.json beside every summary, a CSV row per candidate.
    summaries = sorted(sweep.glob("candidates/*/*/r*/summary.json"))
    assert summaries and all((s.parent / "bench_serve.json").is_file() for s in summaries)
    csv_text = (sweep / "summaries.csv").read_text()
    assert "mega_moe,not_started,incompatible,incompatible" in csv_text
    # Energy per run from the simulator's power model, and $/Mtok from sim.yaml's example price, labelled
    # simulated on the terminal (docs/accuracy-and-cost.md).
    run = json.loads((sweep / "candidates" / "baseline" / "run.json").read_text())
    energy = run["energy"]["decode_heavy/r1"]
    assert energy["method"] == "simulated" and energy["output_tokens_per_joule"] > 0, energy
    assert run["pricing"]["gpu_hour_price"] > 0
    bench = json.loads(
        (sweep / "candidates" / "baseline" / "decode_heavy" / "r1" / "bench_serve.json").read_text()
    )
    assert bench["energy_method"] == "simulated" and bench["usd_per_mtok"] > 0
    cost = [line for line in done.stdout.splitlines() if line.startswith("energy and cost (")]
    assert cost and "SIMULATED power model" in cost[0] and "tok/J" in cost[0] and "/Mtok" in cost[0]
    # Accuracy on the labelled set with its non-inferiority bound (report.accuracy), whatever the verdict.
    accuracy = [x for x in done.stdout.splitlines() if x.startswith("accuracy on the labelled set (")]
    assert accuracy and "non-inferior when the drop's upper bound is at most 2" in accuracy[0], done.stdout
    # A newcomer's exit is clean: the restored retained server was validated, then stopped, and the last
    # line says so; no simulator the demo started is left running.
    assert sim_servers(port) == []
    assert Journal(sweep / "journal.jsonl").replay().live == {}
    assert done.stderr.strip().splitlines()[-1] == (
        "gauntlet: retained server stopped (run.retained_after_sweep=stop): nothing left running"
    )
    print(f"demo sweep took {elapsed:.0f} s")
