"""A user's own config dir outside the repo (a host, a service, two candidates): plan, the sweep and
rollback run from it with ``--config-dir``, errors name its files, and every summary records its salt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.paths import CONF_DIR
from contracts.results import ProfileSummary
from tests.integration import sweep_helpers as h

ROOT = Path(__file__).resolve().parents[2]


def my_conf(root: Path, port: int) -> Path:
    """The README's "Your own configs" layout."""
    d = root / "my-conf"
    for group in ("host", "service", "candidate", "experiment"):
        (d / group).mkdir(parents=True)
    sim = (CONF_DIR / "host" / "sim.yaml").read_text()
    (d / "host" / "mylab.yaml").write_text(
        "# My lab's box (simulated here)\n" + sim.replace("name: sim", "name: mylab")
    )
    (d / "service" / "mymodel.yaml").write_text(
        "# My model\ndefaults:\n  - deepseek_v4_flash\n  - _self_\n"
        f"served_model_name: my-model\nport: {port}\n"
    )
    (d / "candidate" / "my_wide.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_wide\ndescription: wider replicas\n"
        "tensor_parallel_size: 4\ndata_parallel_size: 2\n"
    )
    (d / "candidate" / "my_budget.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_budget\ndescription: half the token budget\n"
        "max_num_batched_tokens: 8192\n"
    )
    small = (ROOT / "tests" / "integration" / "conf" / "experiment" / "sim_small.yaml").read_text()
    (d / "experiment" / "small.yaml").write_text(small)
    return d


def cli(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m orchestrator`` run from a directory outside the repo."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_a_typo_in_the_users_dir_names_that_file_and_nothing_starts(tmp_path: Path, port: int) -> None:
    d = my_conf(tmp_path, port)
    (d / "candidate" / "my_typo.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_typo\nmax_num_seq: 3\n"
    )
    sweeps = tmp_path / "sweeps"
    done = cli(
        ["-cd", str(d), "-m", "candidate=glob(my_*)", "host=mylab", f"run.sweeps_dir={sweeps}"], tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{d / 'candidate' / 'my_typo.yaml'}: candidate.max_num_seq = 3: unknown key" in done.stderr
    assert h.sim_servers(port) == []
    plan = cli(["plan", "--config-dir", str(d), "candidate=my_typo"], tmp_path)
    assert plan.returncode == 2
    assert f"{d / 'candidate' / 'my_typo.yaml'}: candidate.max_num_seq" in plan.stderr


@pytest.mark.slow
def test_plan_sweep_and_rollback_from_a_config_dir_outside_the_repo(tmp_path: Path, port: int) -> None:
    d = my_conf(tmp_path, port)
    sweeps = tmp_path / "sweeps"
    mine = ["host=mylab", "service=mymodel", f"run.sweeps_dir={sweeps}"]
    plan = cli(["plan", "-cd", str(d), *mine], tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "7 candidate(s) on host 'mylab'" in plan.stdout  # the five shipped ones and both of mine
    assert "my_wide\n" in plan.stdout and "--max-num-batched-tokens 8192" in plan.stdout

    sweep_args = ["-cd", str(d), "-m", "candidate=glob(my_*)", "+experiment=small", *mine]
    done = cli(sweep_args, tmp_path)
    sweep = (sweeps / "latest").resolve()
    # 0, or 8 where a verdict's only gap is the load client's lag: my_budget's small effect is no reject
    # (a reject wins over a lag gap), so a loaded machine's lag can leave it incomplete (issue 32).
    h.assert_finished(done.returncode, done.stdout + done.stderr, sweep)
    assert sorted(p.name for p in (sweep / "candidates").iterdir()) == ["baseline", "my_budget", "my_wide"]
    summaries = sorted(sweep.glob("candidates/*/*/r*/summary.json"))
    assert summaries
    salts = set()
    for path in summaries:
        summary = read_model(path, ProfileSummary)
        assert summary.settings is not None, path
        assert summary.settings.served_model == "my-model"
        assert summary.settings.base_url == f"http://127.0.0.1:{port}"
        salts.add(summary.settings.salt)
    assert len(salts) == len(summaries)  # every run its own salt
    assert "python -m load " in (sweep / "report.md").read_text()

    # rollback and stop find the sweep through the same flags (run.sweeps_dir), from outside the repo.
    back = cli(["rollback", "-cd", str(d), *mine], tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "rollback OK" in back.stdout
    h.assert_one_healthy_retained(sweep, port)
    stopped = cli(["stop", "-cd", str(d), f"run.sweeps_dir={sweeps}"], tmp_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert h.sim_servers(port) == []
