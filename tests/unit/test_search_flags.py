"""Any vLLM flag as a search field (issue 43 item 6): ``extra_args.<flag>`` in the space, its distribution,
its point as a candidate, and the flag checked against the installed vLLM's flags (doctor's flag table) at
plan: a flag the program does not know, a value outside its choices, or a flag gauntlet renders from a typed
field is refused with the field, the value and why. Before, ``extra_args.<flag>`` was "not a candidate field
a search varies" and ``kv_cache_dtype`` no search field at all."""

from __future__ import annotations

from typing import Any

import optuna
import pytest

from contracts.errors import ConfigError
from contracts.schema import CandidateConfig, GauntletConfig, HostConfig, ServiceConfig
from contracts.search import Dimension, SearchConfig, Space
from launch.flags import check_args, parse_help
from launch.spec import LaunchSpec
from orchestrator.config.space import parse_space
from orchestrator.search.flags import flag_problems
from orchestrator.search.point import baseline_point, candidate_at
from orchestrator.search.study import distributions

pytestmark = pytest.mark.unit

#: A server's ``--help`` usage block (the shape vLLM 0.32's argparse prints), the program ``srv``.
HELP = (
    "usage: srv [-h] [--model MODEL] [--host HOST] [--port PORT]\n"
    "       [--tensor-parallel-size TENSOR_PARALLEL_SIZE] [--data-parallel-size DATA_PARALLEL_SIZE]\n"
    "       [--moe-backend MOE_BACKEND] [--gpu-memory-utilization GPU_MEMORY_UTILIZATION]\n"
    "       [--max-num-seqs MAX_NUM_SEQS] [--max-model-len MAX_MODEL_LEN]\n"
    "       [--kv-cache-dtype {auto,fp8,fp8_e5m2}] [--seed SEED] [--served-model-name NAME]\n"
    "       [--block-size BLOCK_SIZE] [--enable-prefix-caching | --no-enable-prefix-caching]\n"
    "       [--async-scheduling | --no-async-scheduling] [--scheduling-policy {fcfs,priority}]\n"
)


def _cfg(space: dict[str, Any], extra: dict[str, Any] | None = None) -> GauntletConfig:
    baseline = CandidateConfig(name="baseline", max_num_seqs=8, extra_args=dict(extra or {}))
    return GauntletConfig(
        service=ServiceConfig(model="m", served_model_name="m"),
        host=HostConfig(name="h", kind="gpu", gpu_count=1, entrypoint=["srv"]),
        candidate=baseline,
        baseline=baseline,
        search=SearchConfig(space=space),
    )


def _check(spec: LaunchSpec) -> str | None:
    """doctor's flag table of :data:`HELP` as the search asks it (prune.doctor_flag_check's shape)."""
    problems = check_args(spec.argv[1:], parse_help(HELP))
    return str(problems[0]) if problems else None


@pytest.mark.parametrize(
    ("space", "dimension"),
    [
        ({"extra_args": {"block_size": "choice(16, 32)"}}, Dimension("extra_args.block_size", (16, 32))),
        (
            {"extra_args": {"enable_prefix_caching": "choice(true, false)"}},
            Dimension("extra_args.enable_prefix_caching", (True, False)),
        ),
        (
            {"extra_args": {"scheduling-policy": "choice(fcfs, priority)"}},
            Dimension("extra_args.scheduling-policy", ("fcfs", "priority")),
        ),
        # int(interval(a,b)): Hydra keeps the bounds whole, the flag's whole numbers are drawn
        (
            {"extra_args": {"block_size": "int(interval(16, 64))"}},
            Dimension("extra_args.block_size", low=16.0, high=64.0, integer=True),
        ),
        (
            {"extra_args": {"block_size": "tag(log, int(interval(16, 256)))"}},
            Dimension("extra_args.block_size", low=16.0, high=256.0, log=True, integer=True),
        ),
        (
            {"extra_args": {"some_fraction": "interval(0.5, 0.9)"}},
            Dimension("extra_args.some_fraction", low=0.5, high=0.9),
        ),
        ({"kv_cache_dtype": "choice(auto, fp8)"}, Dimension("kv_cache_dtype", ("auto", "fp8"))),
        # an integer field's interval is whole numbers as before
        ({"max_num_seqs": "interval(8, 64)"}, Dimension("max_num_seqs", low=8.0, high=64.0, integer=True)),
    ],
)
def test_any_vllm_flag_is_a_field_of_the_space(space: dict[str, Any], dimension: Dimension) -> None:
    assert parse_space(SearchConfig(space=space)).dimensions == (dimension,)


@pytest.mark.parametrize(
    ("space", "field"),
    [
        ({"block_size": "choice(16, 32)"}, "search.space.block_size"),  # a flag needs extra_args.
        ({"extra_args": {"--block-size": "choice(16, 32)"}}, "search.space.extra_args.--block-size"),
        ({"extra_args": "choice(16, 32)"}, "search.space.extra_args"),
        ({"extra_args": {"block_size": "int(interval(16.5, 16.9))"}}, "search.space.extra_args.block_size"),
    ],
)
def test_a_flag_field_that_is_not_one_is_refused_naming_it(space: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_space(SearchConfig(space=space), where="search.yaml")
    assert [p.field for p in caught.value.problems] == [field]
    assert caught.value.problems[0].file == "search.yaml"


@pytest.mark.parametrize(
    ("expr", "distribution"),
    [
        ("choice(16, 32)", optuna.distributions.CategoricalDistribution([16, 32])),
        ("choice(true, false)", optuna.distributions.CategoricalDistribution([True, False])),
        ("int(interval(16, 64))", optuna.distributions.IntDistribution(16, 64)),
        ("tag(log, int(interval(16, 256)))", optuna.distributions.IntDistribution(16, 256, log=True)),
        ("interval(0.5, 0.9)", optuna.distributions.FloatDistribution(0.5, 0.9)),
    ],
)
def test_a_flags_distribution_is_integer_boolean_or_a_choice(
    expr: str, distribution: optuna.distributions.BaseDistribution
) -> None:
    space = parse_space(SearchConfig(space={"extra_args": {"flag": expr}}))
    assert distributions(space) == {"extra_args.flag": distribution}


@pytest.mark.parametrize(
    ("extra", "space", "point"),
    [
        # the baseline sets the flag (either spelling): its value is the baseline's point
        ({"block-size": 32}, {"extra_args": {"block_size": "choice(16, 32)"}}, {"extra_args.block_size": 32}),
        (
            {"enable_prefix_caching": False},
            {"extra_args": {"enable-prefix-caching": "choice(true, false)"}},
            {"extra_args.enable-prefix-caching": False},
        ),
        (
            {"block_size": 48},
            {"extra_args": {"block_size": "int(interval(16, 64))"}},
            {"extra_args.block_size": 48},
        ),
        # a flag the baseline leaves to vLLM's default: no value of the space is known to be the baseline
        ({}, {"extra_args": {"block_size": "choice(16, 32)"}}, None),
        ({"block-size": 64}, {"extra_args": {"block_size": "choice(16, 32)"}}, None),
    ],
)
def test_the_baselines_point_reads_its_own_flags(
    extra: dict[str, Any], space: dict[str, Any], point: dict[str, Any] | None
) -> None:
    cfg = _cfg(space, extra)
    assert baseline_point(parse_space(SearchConfig(space=space)), cfg.baseline) == point


@pytest.mark.parametrize(
    ("space", "refused"),
    [
        # accepted: every value is a flag and value the program takes (false as --no-<flag>)
        (
            {"extra_args": {"block_size": "choice(16, 32)", "enable_prefix_caching": "choice(true, false)"}},
            [],
        ),
        ({"extra_args": {"scheduling_policy": "choice(fcfs, priority)"}}, []),
        ({"kv_cache_dtype": "choice(auto, fp8_e5m2)", "max_num_seqs": "choice(8, 16)"}, []),
        ({"extra_args": {"block_size": "int(interval(16, 64))"}}, []),
        # a flag the program does not know: once, naming the flag
        (
            {"extra_args": {"blok_size": "choice(16, 32)"}},
            [("search.space.extra_args.blok_size", 16, "--blok-size: not a flag of the installed server")],
        ),
        (
            {"extra_args": {"speculative_mode": "int(interval(1, 4))"}},
            [("search.space.extra_args.speculative_mode", 1, "--speculative-mode: not a flag")],
        ),
        # a value outside the flag's choices: each such value
        (
            {"extra_args": {"scheduling_policy": "choice(fcfs, lifo, random)"}},
            [
                (
                    "search.space.extra_args.scheduling_policy",
                    "lifo",
                    "value 'lifo' is not one of fcfs, priority",
                ),
                ("search.space.extra_args.scheduling_policy", "random", "value 'random' is not one of fcfs"),
            ],
        ),
        (
            {"kv_cache_dtype": "choice(auto, fp9)"},
            [("search.space.kv_cache_dtype", "fp9", "--kv-cache-dtype: value 'fp9' is not one of auto, fp8")],
        ),
        # a switch given a value
        (
            {"extra_args": {"async_scheduling": "choice(true, 2)"}},
            [
                (
                    "search.space.extra_args.async_scheduling",
                    2,
                    "2: unexpected word (the flag before it takes no value)",
                )
            ],
        ),
        # a flag gauntlet renders from a typed field: not an extra flag
        (
            {"extra_args": {"max_model_len": "choice(1024, 2048)"}},
            [("search.space.extra_args.max_model_len", 1024, "renders from a typed field")],
        ),
        (
            {"extra_args": {"max-num-seqs": "choice(8, 16)"}},
            [("search.space.extra_args.max-num-seqs", 8, "renders from a typed field")],
        ),
    ],
)
def test_a_flag_the_installed_vllm_refuses_is_refused_at_plan_naming_it(
    space: dict[str, Any], refused: list[tuple[str, Any, str]]
) -> None:
    cfg = _cfg(space)
    found = flag_problems(cfg, parse_space(SearchConfig(space=space)), _check, where="search.yaml")
    assert [(p.field, p.value) for p in found] == [(field, value) for field, value, _ in refused]
    for problem, (_, _, why) in zip(found, refused, strict=True):
        assert why in problem.allowed and problem.file == "search.yaml", problem


def test_without_a_flag_table_only_the_rendering_is_checked() -> None:
    space = {"extra_args": {"blok_size": "choice(16, 32)", "max_model_len": "choice(1, 2)"}}
    found = flag_problems(_cfg(space), parse_space(SearchConfig(space=space)), None, where="s")
    assert [p.field for p in found] == ["search.space.extra_args.max_model_len"]


def test_the_flag_reaches_the_command_line_as_vllm_spells_it() -> None:
    from launch.spec import render_spec

    cfg = _cfg({})
    point = {"extra_args.block_size": 32, "extra_args.enable_prefix_caching": False, "max_num_seqs": 16}
    space = Space(dimensions=(), layouts={}, fixed={})
    candidate = candidate_at(cfg.baseline, point, space.layouts, "t")
    argv = render_spec(cfg.service, candidate, cfg.host).argv
    assert argv[argv.index("--block-size") + 1] == "32"
    assert (
        "--no-enable-prefix-caching" in argv and _check(render_spec(cfg.service, candidate, cfg.host)) is None
    )
