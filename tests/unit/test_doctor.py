"""doctor: help texts parsed as tables, command lines checked, memory fit, the checks over fake probes, and
the sweep refusing (live service untouched) or recording a single candidate INCOMPATIBLE without a launch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import LaunchError, PreflightError
from contracts.files import read_model
from contracts.layout import DOCTOR_FILE
from contracts.results import CandidateRun, DoctorReport, GpuMemory, HostProbe
from launch.flags import FlagInfo, check_args, parse_help, program_part
from launch.memfit import fit, model_shape
from launch.preflight import Probes, diagnose
from launch.sim.cli import build_parser
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

# A vLLM-shaped usage block (0.32 prints every option in it, whatever group its body shows).
VLLM_HELP = """usage: api_server.py [-h] [--headless] [--model MODEL]
                     [--served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]]
                     [--host HOST] [--port PORT] [--seed SEED] [--revision REVISION]
                     [--tensor-parallel-size TENSOR_PARALLEL_SIZE]
                     [--data-parallel-size DATA_PARALLEL_SIZE]
                     [--enable-expert-parallel | --no-enable-expert-parallel | -ep]
                     [--enable-eplb | --no-enable-eplb] [--eplb-config EPLB_CONFIG]
                     [--speculative-config SPECULATIVE_CONFIG]
                     [--moe-backend {auto,cutlass,deep_gemm,deep_gemm_mega_moe,triton}]
                     [--gpu-memory-utilization GPU_MEMORY_UTILIZATION]
                     [--max-num-batched-tokens MAX_NUM_BATCHED_TOKENS]
                     [--max-num-seqs MAX_NUM_SEQS] [--max-model-len MAX_MODEL_LEN]
                     [--kv-cache-dtype {auto,bfloat16,fp8,fp8_e4m3}]
                     [--reasoning-parser REASONING_PARSER]
                     [--trust-remote-code | --no-trust-remote-code]
                     [--enforce-eager | --no-enforce-eager]
                     [model_tag]

vLLM OpenAI-Compatible RESTful API server.

Config Groups:
  ModelConfig    [--not-a-flag] mentioned in prose only
"""


@pytest.mark.parametrize(
    ("flag", "info"),
    [
        ("--headless", FlagInfo(takes_value=False)),
        ("--model", FlagInfo(takes_value=True)),
        ("--served-model-name", FlagInfo(takes_value=True)),
        ("--enable-expert-parallel", FlagInfo(takes_value=False)),
        ("--no-enable-expert-parallel", FlagInfo(takes_value=False)),
        ("-ep", FlagInfo(takes_value=False)),
        ("--kv-cache-dtype", FlagInfo(takes_value=True, choices=("auto", "bfloat16", "fp8", "fp8_e4m3"))),
        ("-h", FlagInfo(takes_value=False)),
    ],
)
def test_the_usage_block_gives_each_option_string(flag: str, info: FlagInfo) -> None:
    assert parse_help(VLLM_HELP).flags[flag] == info


def test_prose_after_the_usage_block_and_positionals_are_not_flags() -> None:
    table = parse_help(VLLM_HELP)
    assert "--not-a-flag" not in table
    assert "model_tag" not in table


def test_option_lines_are_read_when_there_is_no_usage_block() -> None:
    table = parse_help("options:\n  --max-num-seqs MAX_NUM_SEQS, -n MAX  most sequences\n  --quiet  hush\n")
    assert table.flags == {
        "--max-num-seqs": FlagInfo(True),
        "-n": FlagInfo(True),
        "--quiet": FlagInfo(False),
    }


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["MODEL", "--max-num-seqs", "16", "--enable-expert-parallel", "--no-enforce-eager"], []),
        (["--kv-cache-dtype", "fp8", "--moe-backend", "deep-gemm"], []),  # vLLM reads - as _ there
        (["--max_num_seqs", "4"], []),  # underscores read as dashes, as vLLM does
        (["--bogus-flag", "1"], [("--bogus-flag", "not a flag")]),
        (["--kv-cache-dtype", "fp9"], [("--kv-cache-dtype", "value 'fp9' is not one of")]),
        (["--enable-eplb", "true"], [("true", "unexpected word")]),
        (["--max-num-seqs"], [("--max-num-seqs", "needs a value")]),
        (["--enforce-eager=1"], [("--enforce-eager", "takes no value")]),
        (["--served-model-name", "a", "--port=8000"], []),
    ],
)
def test_command_lines_are_checked_against_the_table(
    args: list[str], expected: list[tuple[str, str]]
) -> None:
    problems = check_args(args, parse_help(VLLM_HELP))
    assert [(p.flag, p.message[: len(m)]) for p, (_, m) in zip(problems, expected, strict=False)] == expected
    assert len(problems) == len(expected)


@pytest.mark.parametrize(
    ("entrypoint", "program"),
    [
        (["vllm", "serve", "{model}"], ["vllm", "serve"]),
        ([".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}"],
         [".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server"]),
        (["srun", "--ntasks=1", "vllm", "serve"], ["srun"]),
    ],
)  # fmt: skip
def test_the_program_part_of_an_entry_point(entrypoint: list[str], program: list[str]) -> None:
    assert program_part(entrypoint) == program


def test_the_simulators_parser_accepts_every_shipped_candidate_on_the_sim_host() -> None:
    from launch.spec import render_spec

    table = parse_help(build_parser().format_help())
    for name in ("baseline", "eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"):
        cfg, _ = load([f"candidate={name}"])
        spec = render_spec(cfg.service, cfg.candidate, cfg.host)
        assert check_args(spec.argv[3:], table) == [], name


# ---------------------------------------------------------------- memory fit

LLAMA_8B = {
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16",
}  # fmt: skip
# A DeepSeek-style MoE of about 280B parameters (the case study's size: 284B total), FP8 weights, MLA.
DEEPSEEK_LIKE = {
    "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64, "intermediate_size": 12288,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "first_k_dense_replace": 1, "vocab_size": 129280, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"},
}  # fmt: skip


def test_a_dense_8b_model_is_about_15_gib_of_bf16_weights() -> None:
    shape = model_shape(LLAMA_8B)
    assert 14.0 < shape.weight_bytes / 1024**3 < 16.0
    assert shape.expert_fraction == 0.0


def test_the_checkpoint_index_total_wins_over_the_estimate() -> None:
    assert model_shape(LLAMA_8B, weight_bytes=2 * 1024**3).weight_bytes == 2 * 1024**3


@pytest.mark.parametrize(
    ("config", "tp", "dp", "ep", "gpu_gib", "util", "max_len", "kv", "fits"),
    [
        (LLAMA_8B, 1, 1, False, 79.6, 0.9, 131072, "auto", True),
        (LLAMA_8B, 1, 1, False, 32.0, 0.9, 131072, "auto", False),  # 15 GiB weights + 16 GiB KV
        (LLAMA_8B, 1, 1, False, 32.0, 0.9, 131072, "fp8", True),  # fp8 halves the KV cache
        (LLAMA_8B, 2, 1, False, 32.0, 0.9, 131072, "auto", True),  # TP2 splits weights and KV heads
        (LLAMA_8B, 1, 1, False, 79.6, 0.15, 8192, "auto", False),  # utilization below the weights
        (DEEPSEEK_LIKE, 2, 4, True, 79.6, 0.81, 131072, "fp8", True),  # experts over all 8 GPUs
        (DEEPSEEK_LIKE, 2, 4, False, 79.6, 0.81, 131072, "fp8", False),  # each replica holds them all
        (DEEPSEEK_LIKE, 1, 1, False, 79.6, 0.9, 4096, "fp8", False),  # ~260 GiB on one GPU
    ],
)
def test_memory_fit_table(  # noqa: PLR0917  (one parameter per column of the table)
    config: dict[str, object], tp: int, dp: int, ep: bool, gpu_gib: float, util: float, max_len: int,
    kv: str, fits: bool,
) -> None:  # fmt: skip
    estimate = fit(
        model_shape(config), tp=tp, dp=dp, ep=ep, gpu_gib=gpu_gib, utilization=util,
        max_model_len=max_len, kv_cache_dtype=kv,
    )  # fmt: skip
    assert (estimate.problem is None) == fits, estimate
    if not fits:
        assert estimate.problem is not None and "cannot fit" in estimate.problem


# ---------------------------------------------------------------- the checks over fake probes

H100 = [
    GpuMemory(index=i, name="NVIDIA H100 80GB HBM3", total_gib=79.6, used_gib=0.5, free_gib=79.1)
    for i in range(8)
]


def probes(**changes: object) -> Probes:
    """Probes of a healthy 8xH100 host with vLLM installed and the weights cached."""
    files = {"/hf/snap/config.json": json.dumps(DEEPSEEK_LIKE)}
    base = Probes(
        host=lambda: HostProbe(driver=True, driver_version="570", gpus=H100, compute_capability=["9.0"] * 8),
        resolve=lambda argv: ["/opt/venv/bin/vllm", *argv[1:]],
        version=lambda program: "0.32.0",
        help_text=lambda program, version: VLLM_HELP,
        sim_help=lambda: build_parser().format_help(),
        read_file=files.get,
        hf_snapshot=lambda model: "/hf/snap",
        port_in_use=lambda host, port: False,
        environ={},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def h100(*extra: str) -> tuple[object, list[object]]:
    cfg, _ = load(["host=h100x8", *extra])
    cands = [load(["host=h100x8", f"candidate={n}", *extra])[0].candidate for n in ("eplb", "tp4_dp2")]
    return cfg, [cfg.baseline, *cands]


def lines(report: DoctorReport) -> list[str]:
    return [p.line() for p in report.problems]


def test_a_healthy_host_has_no_problem() -> None:
    cfg, cands = h100()
    report = diagnose(cfg, cands, probes())  # type: ignore[arg-type]
    assert lines(report) == []
    assert any("vLLM 0.32.0" in n for n in report.notes)


def no_vllm(argv: Sequence[str]) -> list[str]:
    raise LaunchError("the server program 'vllm' is not on PATH")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"resolve": no_vllm},
         ["host: program: vLLM is not installed as host.entrypoint expects: the server program"]),
        ({"host": lambda: HostProbe(driver=False, reason="no NVIDIA driver (NVML Shared Library Not Found)")},
         ["host: gpu: no NVIDIA driver (NVML Shared Library Not Found): host 'h100x8' needs 8 GPUs"]),
        ({"version": lambda p: "0.30.1"}, ["host: program: vLLM 0.30.1 is outside the range"]),
        ({"host": lambda: HostProbe(driver=True, gpus=H100[:4], compute_capability=["9.0"] * 4)},
         ["host: gpu: NVML sees 4 GPU(s), host 'h100x8' is configured with 8",
          "baseline: gpu: TP x DP = 8 exceeds the 4 devices", "eplb: gpu: TP x DP = 8 exceeds",
          "tp4_dp2: gpu: TP x DP = 8 exceeds"]),
        ({"host": lambda: HostProbe(driver=True, gpus=H100, compute_capability=["8.0"] * 8)},
         ["host: gpu: compute capability 8.0 on this host, host.compute_capability is '9.0'"]),
        ({"hf_snapshot": lambda m: None},
         ["host: weights: deepseek-ai/DeepSeek-V4-Flash is neither a local directory nor in the Hugging"]),
        ({"hf_snapshot": lambda m: None, "environ": {"HF_TOKEN": "x"}}, []),
        ({"port_in_use": lambda h, p: True}, ["host: port: 127.0.0.1:8000 (service.port) is in use"]),
        ({"help_text": lambda p, v: VLLM_HELP.replace("deep_gemm_mega_moe,", "")}, []),
    ],
)  # fmt: skip
def test_problems_table(changes: dict[str, object], expected: list[str]) -> None:
    cfg, cands = h100()
    found = lines(diagnose(cfg, cands, probes(**changes)))  # type: ignore[arg-type]
    assert len(found) == len(expected), found
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), (line, start)


def test_a_flag_the_installed_vllm_does_not_know_names_the_flag_and_the_candidate() -> None:
    cfg, cands = h100()
    mega = load(["host=h100x8", "candidate=mega_moe"])[0].candidate
    report = diagnose(  # type: ignore[arg-type]
        cfg, [*cands, mega], probes(help_text=lambda p, v: VLLM_HELP.replace("deep_gemm_mega_moe,", ""))
    )
    assert lines(report) == [
        "mega_moe: flags: --moe-backend: value 'deep_gemm_mega_moe' is not one of auto, cutlass, deep_gemm, "
        "triton (the installed vLLM)"
    ]
    assert report.blocking("baseline") == []


def test_a_candidate_that_cannot_fit_is_named_by_the_memory_estimate() -> None:
    cfg, cands = h100()
    no_ep = load(
        ["host=h100x8", "candidate=eplb", "candidate.name=no_ep", "candidate.enable_expert_parallel=false"]
    )
    report = diagnose(cfg, [*cands, no_ep[0].candidate], probes())  # type: ignore[arg-type]
    assert [p.line()[:36] for p in report.problems] == ["no_ep: memory: TP2 x DP4: cannot fit"]


def test_free_memory_held_by_something_else_is_a_problem_only_outside_a_sweep() -> None:
    busy = [g.model_copy(update={"free_gib": 20.0}) for g in H100]
    host = HostProbe(driver=True, gpus=busy, compute_capability=["9.0"] * 8)
    cfg, cands = h100()
    outside = diagnose(cfg, cands, probes(host=lambda: host))  # type: ignore[arg-type]
    assert {p.check for p in outside.problems} == {"memory"} and len(outside.problems) == 3
    inside = diagnose(cfg, cands, probes(host=lambda: host), live_service=False)  # type: ignore[arg-type]
    assert inside.problems == []


def test_the_simulated_host_checks_flags_against_the_simulators_parser_only() -> None:
    cfg, _ = load([])

    def refuse(*a: object) -> object:
        raise AssertionError("the simulated host reads no GPU, program or weights")

    sim = probes(host=refuse, resolve=refuse, help_text=refuse, hf_snapshot=lambda m: None)
    assert diagnose(cfg, [cfg.baseline], sim).problems == []
    bad = load(["candidate.name=bad", "+candidate.extra_args.no-such-flag=1"])[0].candidate
    found = lines(diagnose(cfg, [cfg.baseline, bad], sim))
    assert found == [
        "bad: flags: --no-such-flag: not a flag of the installed server (unrecognized argument) "
        "(the simulator)"
    ]


# ---------------------------------------------------------------- in the sweep


def sweep(
    tmp_path: Path, report_probes: Probes, *extra: str
) -> tuple[SweepContext, FakeSupervisor, list[str]]:
    cfg, _ = load(["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[serial]", *extra])
    sup, messages = FakeSupervisor(), []
    seams = fake_seams(sup, FakeLoad(), messages)
    seams.doctor_probes = lambda: report_probes
    return SweepContext.open(cfg, tmp_path / "sweep", seams), sup, messages


def test_a_problem_of_the_host_refuses_the_sweep_before_the_live_service_is_touched(tmp_path: Path) -> None:
    def broken_help() -> str:
        return "usage: x [-h]\n"  # the simulator knows none of the flags: every candidate would fail

    ctx, sup, _ = sweep(tmp_path, probes(sim_help=broken_help))
    eplb = load(["candidate=eplb"])[0].candidate
    with pytest.raises(PreflightError, match="would fail every candidate") as err:
        begin(ctx, candidates=[eplb])
    assert "baseline: flags: --served-model-name" in str(err.value)
    assert sup.started == [] and not ctx.touched
    assert read_model(ctx.dir / DOCTOR_FILE, DoctorReport).blocking("baseline")


def test_a_single_impossible_candidate_is_recorded_incompatible_and_never_launched(tmp_path: Path) -> None:
    ctx, sup, messages = sweep(tmp_path, probes())
    bad = load(["candidate=eplb", "candidate.name=bad", "+candidate.extra_args.no-such-flag=1"])[0].candidate
    begin(ctx, candidates=[bad])
    assert any("bad: flags: --no-such-flag" in m for m in messages)
    run = run_candidate(ctx, bad)
    assert "bad" not in sup.started
    assert (run.startup.ok, run.startup.kind) == (False, "bad-args")
    assert run.startup.matched_line is not None and "--no-such-flag" in run.startup.matched_line
    assert read_model(ctx.candidate_dir("bad") / "run.json", CandidateRun) == run


# ---------------------------------------------------------------- env_passthrough

ENVIRON = {
    "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO", "VLLM_USE_V1": "1", "VLLM_API_KEY": "k",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "HF_TOKEN": "hf_x", "HF_HOME": "/hf",
    "HUGGING_FACE_HUB_TOKEN": "hf_y", "WANDB_API_KEY": "w", "MY_PASSWORD": "p", "nccl_lower": "x",
    "PATH": "/usr/bin",
}  # fmt: skip


@pytest.mark.parametrize(
    ("globs", "passed"),
    [
        ([], []),
        (["NCCL_*"], ["NCCL_DEBUG", "NCCL_IB_DISABLE"]),  # case-sensitive: nccl_lower stays out
        (["VLLM_*"], ["VLLM_USE_V1"]),  # VLLM_API_KEY is a secret: only service.api_key_env sets it
        (["PYTORCH_*", "HF_*"], ["HF_HOME", "PYTORCH_CUDA_ALLOC_CONF"]),  # HF_TOKEN: only by pass_env
        (["*"], ["HF_HOME", "NCCL_DEBUG", "NCCL_IB_DISABLE", "PATH", "PYTORCH_CUDA_ALLOC_CONF",
                 "VLLM_USE_V1", "nccl_lower"]),  # no secret even for "everything"
    ],
)  # fmt: skip
def test_env_passthrough_globs_never_pass_a_secret(globs: list[str], passed: list[str]) -> None:
    from launch.command import passed_through

    assert sorted(passed_through(globs, ENVIRON)) == passed


def test_the_config_wins_over_a_passed_through_value_and_secrets_come_only_by_name() -> None:
    from launch.command import child_env
    from launch.spec import render_spec

    cfg, _ = load(["host=h100x8", "+host.env.NCCL_DEBUG=WARN"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    env = child_env(spec, ENVIRON)
    assert env["NCCL_DEBUG"] == "WARN" and env["NCCL_IB_DISABLE"] == "1"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and env["VLLM_USE_V1"] == "1"
    assert env["HF_TOKEN"] == "hf_x"  # service.pass_env names it
    assert "HUGGING_FACE_HUB_TOKEN" not in env and "WANDB_API_KEY" not in env and "VLLM_API_KEY" not in env
    again, _ = type(spec).parse_json(spec.to_json())
    assert again.env_passthrough == spec.env_passthrough and spec.env_passthrough[0] == "NCCL_*"


def test_passthrough_is_outside_the_fingerprint() -> None:
    from launch.spec import render_spec

    cfg, _ = load(["host=h100x8"])
    other, _ = load(["host=h100x8", "host.env_passthrough=[]"])
    a = render_spec(cfg.service, cfg.candidate, cfg.host)
    b = render_spec(other.service, other.candidate, other.host)
    assert a.fingerprint == b.fingerprint and a.env_passthrough != b.env_passthrough


def test_make_targets_put_the_venvs_bin_first_on_path() -> None:
    import shutil
    import subprocess

    from contracts.paths import PROJECT_ROOT

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "sweep", "doctor", "plan", "demo", "OVERRIDES=host=h100x8"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    runs = [line for line in done.stdout.splitlines() if "-m orchestrator" in line]
    assert len(runs) == 4, done.stdout
    assert all(line.startswith(f'PATH="{PROJECT_ROOT}/.venv/bin:$PATH" .venv/bin/python') for line in runs)


PORT_BUSY = (
    "host: port: 127.0.0.1:8000 (service.port) is in use: a launch would fail; stop what listens "
    "there (a sweep stops only gauntlet's own live service) or choose another port"
)


def _left_running(tmp_path: Path, role: str, fingerprint: str, spec_file: str = "") -> Path:
    """The latest sweep under tmp_path/sweeps left one server (``role``) running on port 8000."""
    from contracts.layout import point_latest
    from orchestrator.ledger.events import Started
    from orchestrator.ledger.journal import Journal

    sweep = tmp_path / "sweeps" / "20261204-090000"
    sweep.mkdir(parents=True)
    Journal(sweep / "journal.jsonl").append(
        Started(candidate="baseline" if role == "retained" else "tp4_dp2", role=role,  # type: ignore[arg-type]
                fingerprint=fingerprint, port=8000, pid=4242, pgid=4242, create_time=12.0,
                spec_file=spec_file)
    )  # fmt: skip
    point_latest(tmp_path / "sweeps", sweep)
    return sweep


def _baseline_fingerprint(tmp_path: Path) -> str:
    from launch.spec import render_spec
    from orchestrator.config.compose import load

    cfg, _ = load([f"run.sweeps_dir={tmp_path / 'sweeps'}", "candidate=eplb"])
    return render_spec(cfg.service, cfg.baseline, cfg.host).fingerprint


@pytest.mark.parametrize("alive", [True, False])
def test_doctor_skips_the_port_and_memory_checks_only_for_gauntlets_own_live_service(
    tmp_path: Path, alive: bool
) -> None:
    from orchestrator.doctor import doctor

    _left_running(tmp_path, "retained", _baseline_fingerprint(tmp_path))
    seen: list[tuple[int, float]] = []

    def is_alive(pid: int, create_time: float) -> bool:
        seen.append((pid, create_time))
        return alive

    report = doctor(
        [f"run.sweeps_dir={tmp_path / 'sweeps'}", "candidate=eplb"],
        probes=probes(port_in_use=lambda h, p: True),
        alive=is_alive,
    )
    assert seen == [(4242, 12.0)]
    if alive:
        assert report.problems == []
        assert any("held by gauntlet's live service baseline (pid 4242, retained)" in n for n in report.notes)
    else:
        assert lines(report) == [PORT_BUSY]


def test_doctor_names_a_live_service_the_baseline_does_not_describe(tmp_path: Path) -> None:
    """The sweep's opening would refuse it (the take-over checks the fingerprint): doctor says so first."""
    from launch.spec import render_spec
    from orchestrator.config.compose import load
    from orchestrator.doctor import doctor

    cfg, _ = load(["candidate=tp4_dp2"])
    other = render_spec(cfg.service, cfg.candidate, cfg.host)  # the live service runs TP4 x DP2
    (tmp_path / "spec.json").write_text(other.to_json())
    _left_running(tmp_path, "retained", other.fingerprint, str(tmp_path / "spec.json"))
    report = doctor(
        [f"run.sweeps_dir={tmp_path / 'sweeps'}", "candidate=eplb"],
        probes=probes(port_in_use=lambda h, p: True),
        alive=lambda pid, t: True,
    )
    (problem,) = report.problems
    assert (problem.candidate, problem.check) == ("baseline", "live service")
    assert problem.message.startswith(
        f"the live service baseline (pid 4242, retained) of {tmp_path / 'sweeps' / '20261204-090000'} runs "
        f"{other.fingerprint}, but the configured baseline renders {_baseline_fingerprint(tmp_path)} "
        "(argv[12] (--tensor-parallel-size): recorded '4', now '2'; "
        "argv[14] (--data-parallel-size): recorded '2', now '4'; "
        "config: recorded 'tensor-parallel-size: 4'; ...)"
    )
    assert problem.message.endswith(
        ": a sweep would refuse before stopping it; make conf/candidate/baseline.yaml describe the live "
        "service (or select the baseline file that does: candidate@baseline=NAME), or stop it first with "
        f"`python -m orchestrator stop {tmp_path / 'sweeps' / '20261204-090000'}`"
    )


def test_a_candidates_server_left_by_a_crashed_sweep_is_not_the_live_service(tmp_path: Path) -> None:
    """A sweep takes over only a retained server; a candidate's left on the port fails its launches."""
    from orchestrator.doctor import doctor

    _left_running(tmp_path, "candidate", "sha256:tp4")
    report = doctor(
        [f"run.sweeps_dir={tmp_path / 'sweeps'}", "candidate=eplb"],
        probes=probes(port_in_use=lambda h, p: True),
        alive=lambda pid, t: True,
    )
    assert lines(report) == [PORT_BUSY]
