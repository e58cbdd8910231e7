"""Launch spec rendering: every shipped candidate composed with Hydra and compared flag by flag."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from contracts.errors import SpecError, SpecTamperedError
from contracts.schema import CandidateConfig, HostConfig, ServiceConfig
from launch.spec import CPU_BIND_ENV, LaunchSpec, cpu_binding, diff_specs, render_flag, render_spec
from tests.unit.composed import load

BASE = [
    "--served-model-name", "deepseek-v4-flash", "--host", "127.0.0.1", "--port", "8000",
]  # fmt: skip
SPEC_GREEDY = '{"draft_sample_method":"greedy","method":"dspark","num_speculative_tokens":7}'
TAIL = [
    "--max-model-len", "131072", "--kv-cache-dtype", "fp8", "--reasoning-parser", "deepseek_v4",
    "--seed", "0", "--trust-remote-code",
]  # fmt: skip


def expected(
    tp: int, dp: int, *, eplb: bool = False, spec: str = SPEC_GREEDY, moe: str = "auto"
) -> list[str]:
    return [
        "vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash", *BASE,
        "--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp), "--enable-expert-parallel",
        *(["--enable-eplb"] if eplb else []),
        "--speculative-config", spec, "--moe-backend", moe, "--gpu-memory-utilization", "0.81",
        "--max-num-batched-tokens", "16384", *TAIL,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("candidate", "argv"),
    [
        ("baseline", expected(2, 4)),
        ("tp4_dp2", expected(4, 2)),
        ("spec_probabilistic", expected(2, 4, spec=SPEC_GREEDY.replace("greedy", "probabilistic"))),
        ("mega_moe", expected(2, 4, moe="deep_gemm_mega_moe")),
        ("eplb", expected(2, 4, eplb=True)),
    ],
)
def test_shipped_candidates_render_the_case_study_flags(candidate: str, argv: list[str]) -> None:
    cfg, _ = load([f"candidate={candidate}", "host=h100x8"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert list(spec.argv) == argv
    assert spec.pass_env == ("HF_TOKEN",)
    assert "HF_TOKEN" not in spec.env


def test_hosts_choose_their_entrypoint() -> None:
    cfg, _ = load(["host=sim"])
    sim = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert sim.argv[:5] == ("python", "-m", "launch.sim", "--model", "deepseek-ai/DeepSeek-V4-Flash")
    assert sim.argv[-4:] == ("--sim-profile", "h100x8_deepseek_v4_flash", "--sim-time-scale", "1.0")
    small = [
        "tensor_parallel_size=1",
        "data_parallel_size=1",
        "speculative=null",
        "enable_expert_parallel=false",
    ]
    overrides = [f"{pkg}.{item}" for pkg in ("candidate", "baseline") for item in small]
    # tiny_cpu's context is 2048 tokens: prefill_10k and mixed would be refused (issue 21), so not run here
    fits = ["run.profiles=[serial,short,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]
    cpu_cfg, _ = load(["host=cpu", "service=tiny_cpu", *overrides, *fits])
    cpu = render_spec(cpu_cfg.service, cpu_cfg.candidate, cpu_cfg.host)
    assert cpu.argv[:5] == (".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server",
                            "--model", "models/tiny-random")  # fmt: skip
    assert cpu.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "--enable-expert-parallel" not in cpu.argv
    assert "--sim-profile" not in cpu.argv
    assert cpu.env[CPU_BIND_ENV] == "0"


@pytest.mark.parametrize(
    ("tp", "dp", "binding"),
    [(1, 1, "0"), (1, 2, "0|1"), (2, 1, "0|1"), (2, 2, "0|1|2|3"), (4, 1, "0|1|2|3")],
)
def test_cpu_binding_puts_rank_r_on_core_r(tp: int, dp: int, binding: str) -> None:
    assert cpu_binding(tp, dp) == binding


CPU_SMALL = [
    "host=cpu", "service=tiny_cpu", "candidate.speculative=null", "candidate.enable_expert_parallel=false",
    "baseline.tensor_parallel_size=1", "baseline.data_parallel_size=1", "baseline.speculative=null",
    "baseline.enable_expert_parallel=false",
    # tiny_cpu's context is 2048 tokens: prefill_10k and mixed would be refused (issue 21), so not run here
    "run.profiles=[serial,short,decode_heavy]", "run.recovery_profiles=[decode_heavy]",
]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "binding"),
    [
        (["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2"], "0|1"),
        (["candidate.tensor_parallel_size=2", "candidate.data_parallel_size=1"], "0|1"),
        (["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=1"], "0"),
        # a binding written in the config wins over the computed one
        (["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=1",
          "+candidate.env.VLLM_CPU_OMP_THREADS_BIND=nobind"], "nobind"),
    ],
)  # fmt: skip
def test_cpu_host_places_each_rank_on_its_own_core(overrides: list[str], binding: str) -> None:
    cfg, _ = load([*CPU_SMALL, *overrides])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.env[CPU_BIND_ENV] == binding


def test_only_cpu_hosts_get_a_cpu_binding() -> None:
    for host in ("sim", "h100x8"):
        cfg, _ = load([f"host={host}"])
        assert CPU_BIND_ENV not in render_spec(cfg.service, cfg.candidate, cfg.host).env


def test_fingerprint_is_stable_and_changes_with_any_flag() -> None:
    cfg, _ = load(["host=h100x8"])
    first = render_spec(cfg.service, cfg.candidate, cfg.host)
    again = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert first.fingerprint == again.fingerprint
    assert first.fingerprint.startswith("sha256:") and len(first.fingerprint) == 7 + 64
    seen = {first.fingerprint}
    variants = [
        replace(cfg.candidate, gpu_memory_utilization=0.82),
        replace(cfg.candidate, max_num_batched_tokens=8192),
        replace(cfg.candidate, moe_backend="triton"),
        replace(cfg.candidate, max_num_seqs=256),
        replace(cfg.candidate, env={"NCCL_DEBUG": "INFO"}),
    ]
    for cand in variants:
        seen.add(render_spec(cfg.service, cand, cfg.host).fingerprint)
    seen.add(render_spec(replace(cfg.service, port=8001), cfg.candidate, cfg.host).fingerprint)
    assert len(seen) == len(variants) + 2


def test_spec_round_trips_and_refuses_tampering() -> None:
    cfg, _ = load(["host=h100x8"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert LaunchSpec.from_json(spec.to_json()) == spec
    data = json.loads(spec.to_json())
    data["argv"][data["argv"].index("0.81")] = "0.95"
    with pytest.raises(SpecTamperedError, match="does not match its recorded fingerprint"):
        LaunchSpec.from_json(json.dumps(data), source="baseline.spec.json")
    changed = render_spec(cfg.service, replace(cfg.candidate, gpu_memory_utilization=0.95), cfg.host)
    assert any("'0.81'" in d and "'0.95'" in d for d in diff_specs(spec, changed))


def test_config_yaml_uses_flag_names_and_the_no_form() -> None:
    service = ServiceConfig(model="m", served_model_name="m", extra_args={"enable-prefix-caching": False})
    cand = CandidateConfig(name="c", tensor_parallel_size=1, data_parallel_size=1)
    host = HostConfig(name="h", gpu_count=1)
    spec = render_spec(service, cand, host)
    assert "no-enable-prefix-caching: true" in spec.config_yaml
    assert "--no-enable-prefix-caching" in spec.argv
    assert 'served-model-name: "m"' in spec.config_yaml


@pytest.mark.parametrize(
    ("name", "value", "argv"),
    [
        ("enforce-eager", True, ["--enforce-eager"]),
        ("enable-prefix-caching", False, ["--no-enable-prefix-caching"]),
        ("revision", None, []),
        ("gpu-memory-utilization", 0.81, ["--gpu-memory-utilization", "0.81"]),
        ("eplb-config", {"window_size": 1000, "a": 1}, ["--eplb-config", '{"a":1,"window_size":1000}']),
        ("max-num-seqs", 256, ["--max-num-seqs", "256"]),
    ],
)
def test_render_flag_table(name: str, value: object, argv: list[str]) -> None:
    assert render_flag(name, value) == argv


def test_secrets_never_appear_in_clear() -> None:
    service = ServiceConfig(model="m", served_model_name="m", env={"HF_TOKEN": "hf_abc"})
    cand = CandidateConfig(name="c")
    host = HostConfig(name="h", gpu_count=1)
    with pytest.raises(SpecError, match="HF_TOKEN looks like a secret"):
        render_spec(service, cand, host)
    with pytest.raises(SpecError, match="VLLM_API_KEY"):
        render_spec(ServiceConfig(model="m", served_model_name="m", extra_args={"api-key": "k"}), cand, host)
    ok = render_spec(ServiceConfig(model="m", served_model_name="m", pass_env=["HF_TOKEN"]), cand, host)
    assert "hf_abc" not in ok.to_json() and "HF_TOKEN=<from environment>" in ok.env_line()


def test_typed_fields_cannot_be_smuggled_through_extra_args() -> None:
    for key in ("tensor-parallel-size", "tensor_parallel_size", "--max_num_seqs"):
        cand = CandidateConfig(name="c", extra_args={key: 4})
        with pytest.raises(SpecError, match="typed field"):
            render_spec(
                ServiceConfig(model="m", served_model_name="m"), cand, HostConfig(name="h", gpu_count=1)
            )
