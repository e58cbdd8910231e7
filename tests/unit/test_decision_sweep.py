"""The decision-quality benchmark's synthetic sweep writer (benchmarks/decision/synthetic_sweep.py): what a
launch's run.json says, so the gates judge the benchmark's sweeps as they judge a sweep's."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.decision.synthetic_sweep import write_run_json
from contracts.results import Pricing
from contracts.sweepdir import load_results


@pytest.mark.parametrize(
    "pricing",
    [
        pytest.param(None, id="unpriced_as_shipped_the_cost_gate_not_applicable"),
        # --cost-tolerance (issue 42): the cost gate judges only launches whose run.json has the prices
        pytest.param(Pricing(gpus=8, gpu_hour_price=2.5), id="priced_the_cost_gate_judges"),
    ],
)
def test_a_launch_records_the_hosts_prices_when_the_benchmark_prices_it(
    tmp_path: Path, pricing: Pricing | None
) -> None:
    write_run_json(tmp_path, "candidate", ["short/r0"], pricing=pricing)
    run = load_results(tmp_path, "candidates/candidate", "candidate").run
    assert run is not None and run.pricing == pricing
