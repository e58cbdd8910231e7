"""What runs is what was planned (issue 22): a candidate's YAML and the baseline's YAML edited while a
real sweep runs (simulator servers) change nothing planned. The sweeper composes and freezes every job
when it opens; the candidate, the baseline's interleaved block and the restore run the recorded
fingerprints. Row of ``docs/reliability.md``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.layout import SPEC_FILE, block_dir, candidate_dir
from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    ROOT,
    assert_finished,
    assert_one_healthy_retained,
    journal_has,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = "defaults:\n  - baseline\n  - _self_\nname: {name}\nmax_num_seqs: {seqs}\n"


def test_candidate_and_baseline_yaml_edited_mid_sweep_are_measured_as_planned(
    tmp_path: Path, port: int
) -> None:
    conf = tmp_path / "conf" / "candidate"
    conf.mkdir(parents=True)
    (conf / "base2.yaml").write_text(BASE.format(name="base2", seqs=64))
    (conf / "late.yaml").write_text(BASE.format(name="late", seqs=32))
    sweeps = tmp_path / "sweeps"
    cmd = [
        sys.executable, "-m", "orchestrator", "-m", "candidate=late", "candidate@baseline=base2",
        "run.repeats=1", f"run.sweeps_dir={sweeps}", f"service.port={port}",
        f"hydra.searchpath=[file://tests/integration/conf,file://{tmp_path / 'conf'}]",
        "+experiment=sim_small",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for((sweeps / "latest").exists, timeout=120, what="the sweep directory")
        sweep = (sweeps / "latest").resolve()
        wait_for(
            lambda: journal_has(sweep, "load_started", candidate="base2"), timeout=180, what="baseline load"
        )
        # Both files change while the opening baseline is measured: nothing planned may follow them.
        (conf / "base2.yaml").write_text(BASE.format(name="base2", seqs=1))
        (conf / "late.yaml").write_text(BASE.format(name="late", seqs=2))
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_finished(proc.returncode, out, sweep)  # 0, or 8 where the client's lag alone leaves it open

    def spec(folder: Path) -> dict[str, object]:
        data = json.loads((folder / SPEC_FILE).read_text())
        argv = data["argv"]
        return {"fingerprint": data["fingerprint"], "seqs": argv[argv.index("--max-num-seqs") + 1]}

    state = Journal(sweep / "journal.jsonl").replay()
    opening, block = spec(candidate_dir(sweep, "base2")), spec(block_dir(sweep, "base2", "late"))
    assert opening == block == {"fingerprint": state.retained_fingerprint, "seqs": "64"}
    assert spec(candidate_dir(sweep, "late"))["seqs"] == "32"
    assert_one_healthy_retained(sweep, port)
