"""Advice that fits the user's files and host (issue 42, item 15, first two parts).

``plan`` and ``doctor`` with ``host=``/``-cd`` validate what a sweep on that host would run: the README's
"Your own configs" layout on a host with fewer than 8 GPUs plans and checks its own candidates, and the
shipped 8-GPU candidates, which no sweep there would run, are listed as left out instead of failing the
command (a candidate named with ``candidate=`` is refused as the sweep refuses it, and so is a baseline
that does not fit). A refusal names the baseline file the user selected (``candidate@baseline``, from
their ``-cd`` directory), not ``conf/candidate/baseline.yaml``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from contracts.paths import CONF_DIR
from orchestrator import plan as plan_command
from orchestrator.app import entry
from orchestrator.config.compose import ConfigLocation
from orchestrator.doctor import doctor, format_report
from orchestrator.servers.seams import Seams
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, sim_probes

SMALL = ["run.repeats=1", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]
_FAKES: list[tuple[FakeSupervisor, FakeLoad, list[str]]] = []
SEAMS = f"hydra.sweeper.seams={__name__}.current_seams"
SHIPPED = ["baseline", "eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"]


def current_seams() -> Seams:
    sup, load, messages = _FAKES[-1]
    return fake_seams(sup, load, messages)


def my_conf(root: Path, gpus: int) -> Path:
    """The README's "Your own configs" layout for a host of ``gpus`` GPUs: the host, the service, the
    user's own baseline (their live service) and two candidates that extend it."""
    d = root / "my-conf"
    for group in ("host", "service", "candidate"):
        (d / group).mkdir(parents=True, exist_ok=True)
    sim = (CONF_DIR / "host" / "sim.yaml").read_text()
    (d / "host" / "mylab.yaml").write_text(
        sim.replace("name: sim", "name: mylab").replace("gpu_count: 8", f"gpu_count: {gpus}")
    )
    (d / "service" / "mymodel.yaml").write_text(
        "defaults:\n  - deepseek_v4_flash\n  - _self_\nserved_model_name: my-model\n"
    )
    (d / "candidate" / "my_base.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_base\n"
        f"tensor_parallel_size: {gpus}\ndata_parallel_size: 1\n"
    )
    (d / "candidate" / "my_wide.yaml").write_text(
        "defaults:\n  - my_base\n  - _self_\nname: my_wide\n"
        f"tensor_parallel_size: 1\ndata_parallel_size: {gpus}\n"
    )
    (d / "candidate" / "my_budget.yaml").write_text(
        "defaults:\n  - my_base\n  - _self_\nname: my_budget\nmax_num_batched_tokens: 8192\n"
    )
    return d


README = ["host=mylab", "service=mymodel", "candidate@baseline=my_base"]


@pytest.mark.parametrize(
    ("gpus", "command", "extra", "code", "said"),
    [
        # The README's own commands on a small host: the user's candidates, the shipped ones left out.
        (
            2,
            "plan",
            [],
            0,
            ["my_base  [retained baseline]", "my_budget", "my_wide", "not planned: 5 candidate(s)"],
        ),
        (1, "plan", [], 0, ["my_base  [retained baseline]", "not planned: 5 candidate(s)"]),
        (2, "doctor", [], 0, ["not checked: 5 candidate(s)", "tp4_dp2: TP x DP = 8 must equal the 2 GPUs"]),
        (2, "plan", ["candidate=glob(my_*)"], 0, ["my_wide"]),
        # Named, a shipped 8-GPU candidate is refused as the sweep refuses it.
        (2, "plan", ["candidate=tp4_dp2"], 2, ["conf/candidate/tp4_dp2.yaml: tensor_parallel_size x"]),
        (2, "doctor", ["candidate=tp4_dp2"], 4, ["tp4_dp2: spec: conf/candidate/tp4_dp2.yaml: tensor_par"]),
        # The baseline always runs: one that does not fit is refused, named or not.
        (
            2,
            "plan",
            ["candidate@baseline=baseline"],
            2,
            ["conf/candidate/baseline.yaml: tensor_parallel_size"],
        ),
    ],
)
def test_plan_and_doctor_check_what_a_sweep_on_the_users_host_would_run(  # noqa: PLR0917  (the table's)
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    gpus: int,
    command: str,
    extra: list[str],
    code: int,
    said: list[str],
) -> None:
    d = my_conf(tmp_path, gpus)
    overrides = [*README, f"run.sweeps_dir={tmp_path / 'sweeps'}", *extra]
    if command == "plan":
        out = io.StringIO()
        got = plan_command.main(["-cd", str(d), *overrides], out=out)
        text = out.getvalue() + capsys.readouterr().err
    else:
        report = doctor(
            overrides, ConfigLocation(config_dir=str(d)), probes=sim_probes(), alive=lambda p, t: False
        )
        got, text = (4 if report.problems else 0), format_report(report)
    assert got == code, text
    for fragment in said:
        assert fragment in text, text
    if code == 0 and not extra:
        for option in SHIPPED:  # left out, each with its reason: never planned, never a problem
            assert f"{option}: TP x DP = 8 must equal the {gpus} GPU" in text, text


def sweep(sup: FakeSupervisor, *args: str) -> tuple[int, list[str]]:
    messages: list[str] = []
    _FAKES.append((sup, FakeLoad(), messages))
    try:
        code = entry.main([*args, SEAMS, *SMALL])
    finally:
        _FAKES.pop()
    return code, messages


@pytest.mark.parametrize(
    ("command", "selected", "named"),
    [
        ("sweep", ["candidate@baseline=my_base"], "{d}/candidate/my_base.yaml"),
        ("doctor", ["candidate@baseline=my_base"], "{d}/candidate/my_base.yaml"),
        (
            "sweep",
            ["baseline.max_num_seqs=64"],
            "conf/candidate/baseline.yaml and command-line override 'baseline.max_num_seqs=64'",
        ),
        ("sweep", ["candidate@baseline=tp4_dp2"], "conf/candidate/tp4_dp2.yaml"),
    ],
)
def test_a_refusal_names_the_baseline_file_the_user_selected(  # noqa: PLR0917  (the table's columns)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    selected: list[str],
    named: str,
) -> None:
    """The live service (the shipped baseline, left by a first sweep) is not what the user's baseline
    renders: the refusal says which file to make describe it, the one they selected."""
    monkeypatch.chdir(tmp_path)
    d = my_conf(tmp_path, 8)
    sup = FakeSupervisor()
    assert sweep(sup, "-m", "run.sweeps_dir=sweeps", "candidate=tp4_dp2")[0] == 0
    (live,) = sup.alive
    capsys.readouterr()
    if command == "sweep":
        code, _ = sweep(sup, "-cd", str(d), "-m", "candidate=my_budget", "run.sweeps_dir=sweeps", *selected)
        text = capsys.readouterr().err
        assert code == 4, text
    else:
        report = doctor(
            ["run.sweeps_dir=sweeps", "candidate=my_budget", *selected],
            ConfigLocation(config_dir=str(d)),
            probes=sim_probes(),
            alive=lambda p, t: p == live,
        )
        text = format_report(report)
        assert [p.check for p in report.problems] == ["live service"], text
    assert f"make {named.format(d=d)} describe the live service" in text, text
    assert list(sup.alive) == [live]
