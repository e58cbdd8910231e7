"""The simulator's command line accepts what vLLM accepts and refuses what vLLM refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.sim.cli import expand_config, parse_args
from launch.spec import render_spec
from tests.unit.composed import load

CANDIDATES = ["baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb"]


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_every_shipped_candidate_parses(candidate: str) -> None:
    cfg, _ = load([f"candidate={candidate}", "host=sim"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    args = parse_args(list(spec.argv[3:]))
    assert args.served_model_name == "deepseek-v4-flash"
    assert args.engine.tensor_parallel_size == cfg.candidate.tensor_parallel_size
    assert args.engine.data_parallel_size == cfg.candidate.data_parallel_size
    assert args.engine.enable_eplb is cfg.candidate.enable_eplb
    assert args.engine.moe_backend == cfg.candidate.moe_backend
    assert args.engine.num_speculative_tokens == 7
    assert args.engine.draft_sample_method == cfg.candidate.speculative.draft_sample_method  # type: ignore[union-attr]
    assert args.profile == "h100x8_deepseek_v4_flash"
    assert args.time_scale == 1.0


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--model", "m", "--no-enable-expert-parallel"], "enable_expert_parallel", False),
        (["m", "--enable-expert-parallel"], "enable_expert_parallel", True),
        (["m", "--enforce-eager"], "enforce_eager", True),
        (["m", "--max-num-seqs", "64"], "max_num_seqs", 64),
        (["m", "-tp", "4", "-dp", "2"], "tensor_parallel_size", 4),
        (["m", "--sim-speed", "0.8"], "speed", 0.8),
        (["m", "--enable-eplb", "--eplb-config", '{"window_size": 1000}'], "enable_eplb", True),
    ],
)
def test_flags_reach_the_engine(argv: list[str], field: str, value: object) -> None:
    assert getattr(parse_args(argv).engine, field) == value


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["m", "--no-such-flag"], "error: unrecognized arguments: --no-such-flag"),
        (["m", "--tensor-parallel-size", "two"], "argument --tensor-parallel-size/-tp: invalid int value"),
        (["m", "--speculative-config", "{bad"], "argument --speculative-config: invalid JSON"),
        (["m", "--sim-time-scale", "0"], "argument --sim-time-scale: must be > 0"),
        ([], "required: --model"),
    ],
)
def test_bad_command_lines_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_config_file_with_vllm_semantics(tmp_path: Path) -> None:
    config = tmp_path / "vllm.yaml"
    config.write_text(
        "tensor-parallel-size: 4\n"
        "enable-expert-parallel: true\n"
        "enforce-eager: false\n"  # dropped, as vllm serve drops it
        "no-enable-prefix-caching: true\n"
        'speculative-config: {"method": "dspark", "num_speculative_tokens": 3}\n'
        "served-model-name: [a, b]\n"
    )
    args = parse_args(["m", "--config", str(config), "--tensor-parallel-size", "2"])
    assert args.engine.tensor_parallel_size == 2  # the command line wins
    assert args.engine.enable_expert_parallel is True
    assert args.engine.enforce_eager is False
    assert args.raw["enable_prefix_caching"] is False
    assert args.engine.num_speculative_tokens == 3
    assert args.served_model_name == "a"
    assert expand_config(["x", f"--config={config}"])[:3] == ["x", "--tensor-parallel-size", "4"]


def test_rendered_config_yaml_of_the_spec_parses(tmp_path: Path) -> None:
    cfg, _ = load(["candidate=baseline", "host=sim"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    path = tmp_path / "vllm.yaml"
    path.write_text(spec.config_yaml)
    from_file = parse_args(["deepseek-ai/DeepSeek-V4-Flash", "--config", str(path)])
    from_argv = parse_args(list(spec.argv[3:]))
    assert from_file.engine == from_argv.engine
