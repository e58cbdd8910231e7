"""Config composition and validation: each bad input gets a message naming file, field, value, allowed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.paths import CONF_DIR
from orchestrator.config.candidate_names import check_candidate_names
from orchestrator.plan import format_plan, plan
from tests.unit.composed import load


def test_every_shipped_candidate_composes_and_validates() -> None:
    names = set()
    for option in ("baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb"):
        cfg, _ = load([f"candidate={option}"])
        names.add(cfg.candidate.name)
        assert cfg.baseline.name == "baseline"
    assert names == {"baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb"}


def test_candidate_file_holds_only_its_difference() -> None:
    base, _ = load(["candidate=baseline"])
    tp4, _ = load(["candidate=tp4_dp2"])
    assert (tp4.candidate.tensor_parallel_size, tp4.candidate.data_parallel_size) == (4, 2)
    assert tp4.candidate.speculative == base.candidate.speculative
    assert tp4.candidate.gpu_memory_utilization == 0.81
    assert (CONF_DIR / "candidate" / "tp4_dp2.yaml").read_text().count("\n") < 12


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (
            ["candidate=tp4_dp2", "candidate.data_parallel_size=4"],
            [
                "conf/candidate/tp4_dp2.yaml + command-line override 'candidate.data_parallel_size=4'",
                "tensor_parallel_size x data_parallel_size = '4 x 4': TP x DP = 16 must equal the 8 GPUs",
            ],
        ),
        (
            ["candidate=baseline", "candidate.gpu_memory_utilization=1.2"],
            ["gpu_memory_utilization = 1.2", "a fraction in (0, 1]"],
        ),
        (
            ["candidate.gpu_memory_utilization=0"],
            ["gpu_memory_utilization = 0.0", "a fraction in (0, 1]"],
        ),
        (
            ["candidate.speculative.num_speculative_tokens=0"],
            ["speculative.num_speculative_tokens = 0", "an integer >= 1"],
        ),
        (
            ["candidate.speculative.draft_sample_method=typical"],
            ["speculative.draft_sample_method = 'typical'", "one of greedy, probabilistic"],
        ),
        (
            ["candidate.moe_backend=deepgemm"],
            ["moe_backend = 'deepgemm'", "did you mean 'deep_gemm'"],
        ),
        (
            ["host=cpu", "service=tiny_cpu"],
            [
                "conf/candidate/baseline.yaml: tensor_parallel_size x data_parallel_size = '2 x 4'",
                "TP x DP = 8 exceeds the 2 devices of host 'cpu'",
            ],
        ),
        (
            ["workloads.decode_heavy.concurrency=0"],
            ["workloads.decode_heavy.concurrency = 0", "an integer >= 1"],
        ),
        (
            ["gates.enabled=[concurency]"],
            [
                "command-line override 'gates.enabled=[concurency]': gates.enabled = 'concurency'",
                "a registered gate: answer_accuracy, answer_reliability, capacity, compatibility",
            ],
        ),
        (
            ["run.profiles=[serial,nonexistent]"],
            ["run.profiles = 'nonexistent'", "a workload name"],
        ),
        (
            ["run.retained_after_sweep=kill"],
            ["run.retained_after_sweep = 'kill'", "one of keep, stop"],
        ),
    ],
)
def test_bad_values_are_named(overrides: list[str], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load(overrides)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text


def test_value_set_in_a_file_names_that_file(tmp_path: Path) -> None:
    conf = _copy_conf(tmp_path)
    (conf / "candidate" / "wide.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: wide\ntensor_parallel_size: 8\n"
    )
    with pytest.raises(ConfigError) as info:
        load(["candidate=wide"], config_dir=conf)
    text = str(info.value)
    assert "conf/candidate/wide.yaml + " in text and "conf/candidate/baseline.yaml: " in text
    assert "tensor_parallel_size x data_parallel_size = '8 x 4': TP x DP = 32" in text


def test_unknown_key_in_a_candidate_file_is_an_error(tmp_path: Path) -> None:
    conf = _copy_conf(tmp_path)
    (conf / "candidate" / "typo.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: typo\ntensor_paralel_size: 4\n"
    )
    with pytest.raises(ConfigError) as info:
        load(["candidate=typo"], config_dir=conf)
    text = str(info.value)
    assert "candidate/typo.yaml: candidate.tensor_paralel_size = 4" in text
    assert "did you mean 'tensor_parallel_size'" in text


def test_candidate_name_clash_is_an_error(tmp_path: Path) -> None:
    conf = _copy_conf(tmp_path)
    # A copied file that forgot to rename, and one that inherits the baseline's name.
    shutil.copy(conf / "candidate" / "tp4_dp2.yaml", conf / "candidate" / "tp4_dp2_copy.yaml")
    (conf / "candidate" / "quiet.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nmoe_backend: triton\n"
    )
    with pytest.raises(ConfigError) as info:
        check_candidate_names([conf])
    text = str(info.value)
    assert "candidate/tp4_dp2_copy.yaml: name = 'tp4_dp2'" in text
    assert "set `name: tp4_dp2_copy`" in text
    assert "candidate/quiet.yaml: name = 'baseline'" in text
    check_candidate_names([CONF_DIR])


def test_plan_prints_five_candidates_with_their_commands() -> None:
    planned = plan([])
    assert [p.option for p in planned] == ["baseline", "eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"]
    assert planned[0].is_baseline
    text = format_plan(planned)
    assert text.count("fingerprint: sha256:") == 5
    assert text.count("command: python -m launch.sim") == 5
    assert "nothing is started" in text


def test_plan_honours_hydra_overrides() -> None:
    planned = plan(["candidate=tp4_dp2", "host=h100x8"])
    assert len(planned) == 1
    assert planned[0].spec.argv[:2] == ("vllm", "serve")


def _copy_conf(tmp_path: Path) -> Path:
    dest = tmp_path / "conf"
    shutil.copytree(CONF_DIR, dest)
    return dest


def test_the_demo_stops_the_retained_server_and_a_real_sweep_keeps_it() -> None:
    assert load([])[0].run.retained_after_sweep == "keep"
    assert load(["+experiment=demo"])[0].run.retained_after_sweep == "stop"
