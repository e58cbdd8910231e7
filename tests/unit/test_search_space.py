"""The search space (orchestrator.config.space; orchestrator.search.point, .prune, .plan_text): Hydra's sweep
syntax, points as candidates, pruning, plan's lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ConfigError, LaunchError
from contracts.files import write_model
from contracts.layout import SweepPaths, point_latest
from contracts.results import CandidateRun, StartupRecord
from contracts.schema import (
    CandidateConfig,
    GauntletConfig,
    HostConfig,
    ServiceConfig,
    SpeculativeConfig,
)
from contracts.search import SearchConfig
from launch.preflight import Probes
from launch.spec import LaunchSpec, render_spec
from orchestrator.config.space import parse_space
from orchestrator.search.plan_text import format_search_plan, recorded_startup, startup_estimate
from orchestrator.search.point import candidate_at, grid, point_overrides
from orchestrator.search.prune import doctor_flag_check, prune

LAYOUTS = {
    "tp2_dp4": {"tensor_parallel_size": 2, "data_parallel_size": 4, "enable_expert_parallel": True},
    "tp4_dp2": {"tensor_parallel_size": 4, "data_parallel_size": 2},
    "tp8_dp2": {"tensor_parallel_size": 8, "data_parallel_size": 2},
}


def _baseline() -> CandidateConfig:
    return CandidateConfig(
        name="baseline",
        tensor_parallel_size=2,
        data_parallel_size=4,
        speculative=SpeculativeConfig(method="dspark", num_speculative_tokens=7),
        max_num_seqs=256,
    )


def _cfg(search: SearchConfig, *, gpus: int = 8, placement: str = "exact") -> GauntletConfig:
    return GauntletConfig(
        service=ServiceConfig(model="m", served_model_name="m"),
        host=HostConfig(name="h", kind="sim", gpu_count=gpus, placement=placement, entrypoint=["srv"]),
        candidate=_baseline(),
        baseline=_baseline(),
        search=search,
    )


@pytest.mark.parametrize(
    ("expr", "values", "interval"),
    [
        ("choice(64,128,256)", (64, 128, 256), None),
        ("range(64,257,64)", (64, 128, 192, 256), None),
        ("range(0.5,0.8,0.1)", (0.5, 0.6, 0.7), None),
        ("choice(tp2_dp4,tp4_dp2)", ("tp2_dp4", "tp4_dp2"), None),
        ("interval(0.7,0.95)", (), (0.7, 0.95, False)),
        ("tag(log,interval(1,100))", (), (1.0, 100.0, True)),
    ],
)
def test_hydra_sweep_syntax_is_parsed_into_dimensions(
    expr: str, values: tuple[Any, ...], interval: tuple[float, float, bool] | None
) -> None:
    # an interval of fractions on a float field (an integer field's must hold a whole number)
    field = "layout" if "tp" in expr else "gpu_memory_utilization" if "0.95" in expr else "max_num_seqs"
    dim = parse_space(SearchConfig(space={field: expr}, layouts=LAYOUTS)).dimensions[0]
    assert dim.values == values
    if interval is not None:
        assert (dim.low, dim.high, dim.log) == interval


@pytest.mark.parametrize(
    ("space", "layouts", "message"),
    [
        (
            {"max_model_len": "choice(1,2)"},
            {},
            "search.space.max_model_len = 'choice(1,2)': a candidate field",
        ),
        ({"max_num_seqs": "choice(1,"}, {}, "search.space.max_num_seqs = 'choice(1,': Hydra's sweep syntax"),
        (
            {"layout": "choice(tp2_dp4,tp9)"},
            LAYOUTS,
            "search.space.layout = 'tp9': a layout of search.layouts",
        ),
        ({"max_num_seqs": "interval(5,1)"}, {}, "interval(low,high), low < high"),
        ({"max_num_seqs": 64}, {}, "search.space = {'max_num_seqs': 64}: at least one choice"),
        ({"layout": "choice(a)"}, {"a": {"pipeline": 2}}, "search.layouts.a.pipeline = 2"),
    ],
)
def test_a_bad_space_names_the_file_the_field_the_value_and_what_is_allowed(
    space: dict[str, Any], layouts: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_space(SearchConfig(space=space, layouts=layouts), where="conf/search/x.yaml")
    text = str(err.value)
    assert "conf/search/x.yaml" in text
    assert message in text


def test_nested_keys_name_nested_fields_and_the_size_is_the_product() -> None:
    space = parse_space(
        SearchConfig(
            space={
                "layout": "choice(tp2_dp4,tp4_dp2)",
                "max_num_seqs": "choice(64,128,256)",
                "speculative": {"method": "choice(dspark,off)", "num_speculative_tokens": "choice(3,7)"},
                "moe_backend": "triton",
            },
            layouts=LAYOUTS,
        )
    )
    names = [d.name for d in space.dimensions]
    assert names == ["layout", "max_num_seqs", "speculative.method", "speculative.num_speculative_tokens"]
    assert space.fixed == {"moe_backend": "triton"}
    assert space.size == 24
    points = list(grid(space))
    assert len(points) == 24 and all(p["moe_backend"] == "triton" for p in points)
    assert parse_space(SearchConfig(space={"gpu_memory_utilization": "interval(0.7,0.9)"})).size is None


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ({"max_num_seqs": 64}, {"max_num_seqs": 64, "tensor_parallel_size": 2, "spec": ("dspark", 7)}),
        (
            {"layout": "tp4_dp2", "speculative.num_speculative_tokens": 3},
            {"tensor_parallel_size": 4, "data_parallel_size": 2, "spec": ("dspark", 3)},
        ),
        ({"speculative.method": "off", "speculative.num_speculative_tokens": 3}, {"spec": None}),
        ({"speculative.method": "ngram"}, {"spec": ("ngram", 7)}),
    ],
)
def test_a_point_is_the_baseline_with_the_points_fields(
    point: dict[str, Any], expected: dict[str, Any]
) -> None:
    cand = candidate_at(_baseline(), point, LAYOUTS, "t1")
    assert cand.name == "t1"
    for field, value in expected.items():
        if field == "spec":
            got = (
                None
                if cand.speculative is None
                else (cand.speculative.method, cand.speculative.num_speculative_tokens)
            )
            assert got == value
        else:
            assert getattr(cand, field) == value


@pytest.mark.parametrize(
    ("point", "overrides"),
    [
        (
            {"layout": "tp4_dp2", "max_num_seqs": 64},
            [
                "candidate.tensor_parallel_size=4",
                "candidate.data_parallel_size=2",
                "candidate.max_num_seqs=64",
            ],
        ),
        (
            {"speculative.method": "off", "speculative.num_speculative_tokens": 3},
            ["candidate.speculative=null"],
        ),
        ({"gpu_memory_utilization": 0.9}, ["candidate.gpu_memory_utilization=0.9"]),
    ],
)
def test_a_point_as_hydra_overrides_of_the_baselines_file(
    point: dict[str, Any], overrides: list[str]
) -> None:
    got = point_overrides(point, LAYOUTS, _baseline(), baseline_option="baseline", name="s_t3")
    assert got == ["candidate=baseline", "candidate.name=s_t3", *overrides]


@pytest.mark.parametrize(
    ("gpus", "placement", "pruned_layouts"),
    [
        (8, "exact", ["tp8_dp2"]),
        (16, "exact", ["tp2_dp4", "tp4_dp2"]),
        (16, "at_most", []),
        (4, "at_most", ["tp2_dp4", "tp4_dp2", "tp8_dp2"]),
    ],
)
def test_layouts_the_hosts_placement_rule_refuses_are_pruned_with_the_reason(
    gpus: int, placement: str, pruned_layouts: list[str]
) -> None:
    search = SearchConfig(space={"layout": "choice(tp2_dp4,tp4_dp2,tp8_dp2)", "max_num_seqs": "choice(1,2)"})
    search.layouts = LAYOUTS
    cfg = _cfg(search, gpus=gpus, placement=placement)
    result = prune(parse_space(search), cfg)
    assert [p.params["layout"] for p in result.pruned] == pruned_layouts
    assert all("TP x DP" in p.why for p in result.pruned)
    assert result.valid == 2 * (3 - len(pruned_layouts))
    assert result.refusal({"layout": "tp8_dp2", "max_num_seqs": 1}) == (
        None if "tp8_dp2" not in pruned_layouts else result.pruned[-1].why
    )


def test_points_the_flag_table_refuses_are_pruned_before_anything_starts() -> None:
    search = SearchConfig(space={"moe_backend": "choice(auto,bogus)", "max_num_seqs": "choice(1,2)"})
    cfg = _cfg(search)

    def refuses_bogus(spec: LaunchSpec) -> str | None:
        return "--moe-backend: invalid choice 'bogus'" if "bogus" in spec.argv else None

    result = prune(parse_space(search), cfg, refuses_bogus)
    assert result.valid == 2
    assert [p.params for p in result.pruned] == [
        {"moe_backend": "bogus", "max_num_seqs": 1},
        {"moe_backend": "bogus", "max_num_seqs": 2},
    ]
    assert (
        result.refusal({"moe_backend": "bogus", "max_num_seqs": 2}) == "--moe-backend: invalid choice 'bogus'"
    )
    assert result.refusal({"moe_backend": "auto", "max_num_seqs": 2}) is None


def test_plan_says_the_size_what_was_pruned_and_why_the_budget_and_the_wall_time() -> None:
    search = SearchConfig(
        name="s", space={"layout": "choice(tp2_dp4,tp8_dp2)", "max_num_seqs": "choice(1,2)"}, max_launches=5
    )
    search.layouts = LAYOUTS
    cfg = _cfg(search)
    space = parse_space(search)
    text = format_search_plan(cfg, space, prune(space, cfg), flags="flags checked", startup=(60.0, "a bound"))
    assert text.splitlines() == [
        "search s: 4 point(s): layout (2) x max_num_seqs (2)",
        "  objective: capacity; sampler tpe (seed 0), pruner successive_halving",
        "  pruned before anything starts: 1",
        "    layout=tp8_dp2: layout tp8_dp2: TP x DP = 16 must equal the 8 GPUs of h (every GPU serves; "
        "change TP or DP)",
        "  left to search: 2 point(s)",
        "  flags checked",
        "  budget: 5 launches, 4 of them kept for the confirmations (2 x 2: its finalist's launch, the "
        "baseline's interleaved block after it); stops after 8 trials measured fully without a 2% better "
        "estimate",
        "  a stall waits until every listed value has been tried (at least 2 launches: max_num_seqs has 2 "
        "values)",
        "  estimated wall time of its server starts: 5 min (5 launches, the confirmations' included, at 60 s "
        "each, from a bound; the load runs come on top)",
    ]


@pytest.mark.parametrize(
    ("space", "max_launches", "expected"),
    [
        # a stall waits for every listed value; a budget too small to try them says so
        (
            {"max_num_seqs": "choice(1,2,3)"},
            5,
            ["  a stall waits until every listed value has been tried (at least 3"],
        ),
        (
            {"max_num_seqs": "choice(1,2,3)"},
            2,
            ["  the budget of 2 launches cannot try every value of max_num_seqs (3"],
        ),
        # a listed utilisation: each layout's highest that starts is probed first
        (
            {"gpu_memory_utilization": "choice(0.8,0.9)"},
            5,
            [
                "  a stall waits until every listed value",
                "  start probe: each layout launched at its highest",
            ],
        ),
        ({"max_num_seqs": "interval(1,8)"}, 5, []),
    ],
)
def test_plan_says_what_a_stall_waits_for_and_the_start_probe(
    space: dict[str, str], max_launches: int, expected: list[str]
) -> None:
    search = SearchConfig(name="s", space=space, max_launches=max_launches)
    cfg = _cfg(search)
    parsed = parse_space(search)
    text = format_search_plan(cfg, parsed, prune(parsed, cfg), flags="f", startup=(60.0, "a bound"))
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("  budget: "))
    told = lines[start + 1 : -1]
    assert len(told) == len(expected) and all(
        line.startswith(e) for line, e in zip(told, expected, strict=True)
    )


def _probes(*, sim_help: str = "", resolve_fails: bool = False) -> Probes:
    def resolve(argv: Sequence[str]) -> list[str]:
        if resolve_fails:
            raise LaunchError("vllm: not found")
        return list(argv)

    return Probes(
        host=lambda: None,  # type: ignore[arg-type,return-value]
        resolve=resolve,
        version=lambda argv: "0.32.0",
        help_text=lambda argv, version: "usage: vllm serve [--max-num-seqs MAX_NUM_SEQS]\n",
        sim_help=lambda: sim_help,
        read_file=lambda path: None,
        hf_snapshot=lambda model: None,
        port_in_use=lambda host, port: False,
        environ={},
    )


@pytest.mark.parametrize(
    ("kind", "probes", "refused", "note"),
    [
        ("gpu", _probes(), "--served-model-name: not a flag", "flags checked against vLLM 0.32.0"),
        (
            "gpu",
            _probes(resolve_fails=True),
            None,
            "flags not checked: srv could not be asked (vllm: not found)",
        ),
        ("sim", _probes(sim_help="usage: sim\n"), None, "flags not checked: srv --help lists no flags"),
    ],
)
def test_the_flag_check_is_doctors_table_of_the_hosts_program(
    kind: str, probes: Probes, refused: str | None, note: str
) -> None:
    cfg = _cfg(SearchConfig())
    cfg.host.kind = kind
    check, said = doctor_flag_check(cfg, probes)
    assert said.startswith(note)
    if refused is None:
        assert check is None
    else:
        assert check is not None
        spec = render_spec(cfg.service, cfg.baseline, cfg.host)
        why = check(spec)
        assert why is not None and why.startswith(refused)


MEASURED, BOUND = "the baseline's start in the latest sweep", "host.startup_timeout_s, an upper bound"


@pytest.mark.parametrize(
    ("kind", "recorded", "expected"),
    [
        (
            "gpu",
            {"host": "h", "ok": True, "ready": 312.5},
            (312.5, "the baseline's start in the latest sweep"),
        ),
        (
            "gpu",
            {"host": "other", "ok": True, "ready": 40.0},
            (1800.0, "host.startup_timeout_s, an upper bound"),
        ),
        (
            "gpu",
            {"host": "h", "ok": False, "ready": None},
            (1800.0, "host.startup_timeout_s, an upper bound"),
        ),
        ("gpu", None, (1800.0, "host.startup_timeout_s, an upper bound")),
        ("sim", None, (1.0, "the simulator's sim-startup-s")),
    ],
)
def test_the_wall_time_estimate_starts_from_the_hosts_last_measured_start(
    tmp_path: Path, kind: str, recorded: dict[str, Any] | None, expected: tuple[float, str]
) -> None:
    cfg = _cfg(SearchConfig())
    cfg.host.kind = kind
    cfg.run.sweeps_dir = str(tmp_path / "sweeps")
    if recorded is not None:
        sweep = tmp_path / "sweeps" / "s1"
        run = CandidateRun(
            candidate="baseline",
            fingerprint="sha256:x",
            backend="vllm",
            host=recorded["host"],
            is_baseline=True,
            startup=StartupRecord(ok=recorded["ok"], time_to_ready_s=recorded["ready"]),
        )
        path = SweepPaths(sweep).candidate("baseline").run_file
        path.parent.mkdir(parents=True)
        write_model(path, run)
        point_latest(tmp_path / "sweeps", sweep)
    assert startup_estimate(cfg, recorded_startup(cfg)) == expected
