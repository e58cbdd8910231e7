"""What a search derives from the service and its baseline (issue 43 item 12): capacity bounds from
``max_num_seqs`` x ``data_parallel_size``, the gates' profiles that fit ``service.max_model_len``; a value
the user wrote is never replaced; ``plan`` prints the derived values, the sweep says them at its opening
and records them in ``config.yaml``; what cannot be derived (``capacity.profile``) is refused with what
to set. Also: a search's trials keep the user's baseline (``candidate@baseline=...``) and a search needs
no ``candidate=``."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.errors import StartupFailure
from contracts.layout import SweepPaths
from contracts.paths import CONF_DIR
from contracts.schema import GauntletConfig
from contracts.search import Dimension, SearchConfig, Space
from orchestrator import plan as plan_command
from orchestrator.app import entry
from orchestrator.config.search_defaults import derive, user_setter
from orchestrator.config.validate import Sources
from orchestrator.servers.seams import Seams
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

_FAKES: list[tuple[FakeSupervisor, FakeLoad, list[str]]] = []
SEAMS = f"hydra.sweeper.seams={__name__}.current_seams"
LAYOUTS = {"narrow": {"data_parallel_size": 2}, "wide": {"data_parallel_size": 8}}


def current_seams() -> Seams:
    sup, fake, messages = _FAKES[-1]
    return fake_seams(sup, fake, messages)


@pytest.fixture(scope="module")
def shipped() -> GauntletConfig:
    """The shipped configuration with a capacity profile (decode_heavy: closed loop, 128 in flight)."""
    cfg, _ = load(["capacity.profile=decode_heavy"])
    return cfg


def _space(*dims: Dimension, fixed: dict[str, Any] | None = None) -> Space:
    return Space(dimensions=dims, layouts=LAYOUTS, fixed=fixed or {})


SEQS = Dimension("max_num_seqs", values=(32, 64, 128))


@pytest.mark.parametrize(
    ("row", "seqs", "dp", "space", "written", "change", "expected"),
    [
        ("baseline alone", 64, 4, _space(), set(), {}, {"capacity.max_level": 256, "capacity.start": 64}),
        (
            "space's largest",
            64,
            4,
            _space(SEQS),
            set(),
            {},
            {"capacity.max_level": 512, "capacity.start": 128},
        ),
        (
            "space below the baseline",
            64,
            4,
            _space(Dimension("max_num_seqs", values=(16, 32))),
            set(),
            {},
            {"capacity.max_level": 256, "capacity.start": 64},
        ),
        (
            "an interval's top",
            64,
            1,
            _space(Dimension("max_num_seqs", low=16, high=300)),
            set(),
            {},
            {"capacity.max_level": 300, "capacity.start": 75},
        ),
        (
            "the widest layout",
            64,
            4,
            _space(Dimension("layout", values=("narrow", "wide"))),
            set(),
            {},
            {"capacity.max_level": 512, "capacity.start": 128},
        ),
        (
            "a layout fixed",
            64,
            4,
            _space(fixed={"layout": "wide"}),
            set(),
            {},
            {"capacity.max_level": 512, "capacity.start": 128},
        ),
        (
            "layouts not searched",
            64,
            4,
            _space(),
            set(),
            {},
            {"capacity.max_level": 256, "capacity.start": 64},
        ),
        ("a tiny ceiling", 2, 1, _space(), set(), {}, {"capacity.max_level": 2, "capacity.start": 1}),
        ("max_level written", 64, 4, _space(SEQS), {"capacity.max_level"}, {}, {}),
        ("start written", 64, 4, _space(), {"capacity.start"}, {}, {"capacity.max_level": 256}),
        # Without the baseline's max_num_seqs the ceiling is not known: the default stays, said so.
        ("baseline's seqs unknown", None, 4, _space(SEQS), set(), {}, {"capacity.max_level": 512}),
        ("open-loop profile", 64, 4, _space(), set(), {"mode": "open", "rate": 4.0}, {}),
        ("no search", 64, 4, None, set(), {}, {}),
    ],
    ids=lambda v: v if isinstance(v, str) else "-",
)
def test_capacity_bounds_come_from_max_num_seqs_times_data_parallel(  # noqa: PLR0917  (the table's)
    shipped: GauntletConfig,
    row: str,
    seqs: int | None,
    dp: int,
    space: Space | None,
    written: set[str],
    change: dict[str, Any],
    expected: dict[str, float],
) -> None:
    assert row  # the row's name, for its test id
    cfg = copy.deepcopy(shipped)
    cfg.search = SearchConfig() if space is not None else None
    cfg.baseline.max_num_seqs, cfg.baseline.data_parallel_size = seqs, dp
    for key, value in change.items():
        setattr(cfg.workloads["decode_heavy"], key, value)
    derived = [d for d in derive(cfg, space, written.__contains__) if d.field.startswith("capacity.")]
    assert {d.field: d.value for d in derived} == expected
    if seqs is None and expected:
        assert "set the baseline's max_num_seqs, or capacity.max_level" in derived[0].line


@pytest.mark.parametrize(
    ("context", "capacity_profile", "written", "expected"),
    [
        (
            8192,
            "decode_heavy",
            set(),
            {
                "run.profiles": ["serial", "short", "decode_heavy", "answer_gate"],
                "run.recovery_profiles": ["decode_heavy"],
                "gates.accepted_profiles": ["decode_heavy"],
                "gates.loaded_profiles": ["short", "decode_heavy"],
            },
        ),
        # Named by the user: not replaced (validation refuses the profile that does not fit, naming it).
        (
            8192,
            "decode_heavy",
            {"run.profiles", "gates.loaded_profiles"},
            {"run.recovery_profiles": ["decode_heavy"], "gates.accepted_profiles": ["decode_heavy"]},
        ),
        # The search's own profile is never dropped: validation refuses it.
        (
            16000,
            "prefill_10k",
            set(),
            {
                "run.profiles": ["serial", "short", "prefill_10k", "decode_heavy", "answer_gate"],
                "gates.loaded_profiles": ["short", "prefill_10k", "decode_heavy"],
            },
        ),
        (131072, "decode_heavy", set(), {}),
    ],
)
def test_the_gates_profiles_are_those_that_fit_the_models_context(
    shipped: GauntletConfig,
    context: int,
    capacity_profile: str,
    written: set[str],
    expected: dict[str, list[str]],
) -> None:
    cfg = copy.deepcopy(shipped)
    cfg.search = SearchConfig()
    cfg.service.max_model_len = context
    cfg.capacity.profile = capacity_profile
    derived = [d for d in derive(cfg, _space(), written.__contains__) if not d.field.startswith("capacity.")]
    assert {d.field: d.value for d in derived} == expected
    for item in derived:  # each dropped profile named, with its length and the context
        section, key = item.field.split(".")
        dropped = [n for n in getattr(getattr(shipped, section), key) if n not in item.value]
        assert dropped and all(f"{n} (" in item.line for n in dropped), item.line
        assert f"longer than service.max_model_len ({context})" in item.line


# ---------------------------------------------------------------- who wrote a value


@pytest.mark.parametrize(
    ("field", "overrides", "choices", "files", "written"),
    [
        ("capacity.max_level", ["capacity.max_level=64"], {}, {}, True),
        ("capacity.max_level", ["+capacity.max_level=64"], {}, {}, True),
        ("capacity.max_level", ["capacity.start=4"], {}, {}, False),
        ("run.profiles", [], {}, {}, False),  # the shipped conf/config.yaml is the default
        ("capacity.max_level", [], {"experiment": "demo_search"}, {}, True),  # via demo.yaml
        (
            "capacity.max_level",
            [],
            {"experiment": "mine"},
            {"experiment/mine.yaml": "run: {repeats: 1}\n"},
            False,
        ),
        (
            "run.profiles",
            [],
            {"experiment": "mine"},
            {"experiment/mine.yaml": "run: {profiles: [serial]}\n"},
            True,
        ),
        ("gates.accepted_profiles", [], {"gates": "default"}, {}, False),
        (
            "gates.accepted_profiles",
            [],
            {"gates": "mine"},
            {"gates/mine.yaml": "defaults: [default, _self_]\naccepted_profiles: [serial]\n"},
            True,
        ),
        (
            "gates.accepted_profiles",
            [],
            {"gates": "mine"},
            {"gates/mine.yaml": "defaults: [default, _self_]\nmin_gain: 0.1\n"},
            False,
        ),
    ],
)
def test_a_value_is_the_users_when_an_override_an_experiment_or_a_file_of_theirs_sets_it(  # noqa: PLR0917  (the table's)
    tmp_path: Path,
    field: str,
    overrides: list[str],
    choices: dict[str, str],
    files: dict[str, str],
    written: bool,
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    sources = Sources(choices=choices, search_path=[CONF_DIR, tmp_path], overrides=overrides)
    assert user_setter(sources)(field) is written


# ---------------------------------------------------------------- plan, the sweep, a refusal


SEARCH = (
    "\n".join(
        [
            "defaults:",
            "  - /schema/search@_here_",
            "  - _self_",
            "name: seqs",
            "space:",
            "  max_num_seqs: choice(32, 64, 128)",
        ]
    )
    + "\n"
)


def my_conf(root: Path) -> Path:
    """A user's own directory: a baseline with its max_num_seqs and a search of one field."""
    d = root / "my-conf"
    for group in ("candidate", "search"):
        (d / group).mkdir(parents=True, exist_ok=True)
    (d / "candidate" / "my_base.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_base\nmax_num_seqs: 64\n"
    )
    (d / "search" / "seqs.yaml").write_text(SEARCH)
    return d


MINE = ["candidate@baseline=my_base", "search=seqs", "capacity.profile=decode_heavy"]
CEILING = (
    "capacity.max_level: 512, from the search's largest max_num_seqs (128) x the baseline's "
    "data_parallel_size (4)"
)
SHORT = "run.profiles: [serial, short, decode_heavy, answer_gate], without prefill_10k (10064 tokens)"


@pytest.mark.parametrize(
    ("extra", "said", "recorded"),
    [
        (
            [],
            [CEILING, "capacity.start: 128, a quarter of capacity.max_level"],
            {"max_level": 512, "start": 128},
        ),
        (["capacity.max_level=100"], [], {"max_level": 100, "start": 8}),  # written: nothing derived
        (["service.max_model_len=8192"], [CEILING, SHORT], {"max_level": 512, "start": 128}),
    ],
)
def test_plan_prints_and_the_sweep_says_and_records_what_was_derived(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    said: list[str],
    recorded: dict[str, float],
) -> None:
    d = my_conf(tmp_path)
    out = io.StringIO()
    code = plan_command.main(["-cd", str(d), *MINE, *extra], out=out)
    text = out.getvalue()
    assert code == 0, capsys.readouterr().err
    assert ("derived, as your files do not set them" in text) is bool(said), text
    for line in said:
        assert line in text, text
    # The sweep's opening says the same lines and records the values; its baseline does not start here,
    # which ends it after config.yaml is written.
    failure = StartupFailure("exited", kind="bad-args", exit_code=2, matched_line="error: --x")
    sup, messages = FakeSupervisor(failures={"my_base": failure}), []
    _FAKES.append((sup, FakeLoad(), messages))
    sweeps = tmp_path / "sweeps"
    try:
        entry.main(["-cd", str(d), "-m", f"run.sweeps_dir={sweeps}", SEAMS, *MINE, *extra])
    finally:
        _FAKES.pop()
    assert sup.started == ["my_base"], messages  # no candidate= named: the search's candidate is the baseline
    for line in said:
        assert any(m.startswith("search: ") and line in m for m in messages), messages
    (sweep,) = [p for p in sweeps.iterdir() if p.is_dir() and not p.is_symlink()]
    config = yaml.safe_load(SweepPaths(sweep).config.read_text())
    assert {k: config["capacity"][k] for k in recorded} == recorded
    if "service.max_model_len=8192" in extra:
        assert (
            "prefill_10k" not in config["run"]["profiles"]
            and "mixed" not in config["gates"]["loaded_profiles"]
        )


@pytest.mark.parametrize(
    ("run_profiles", "offered"),
    [
        (
            [],
            "(capacity.profile=decode_heavy) or in an experiment; closed-loop profiles of run.profiles: "
            "decode_heavy (128 in flight), prefill_10k (64 in flight), short (32 in flight)",
        ),
        (
            ["run.profiles=[serial]"],
            "(capacity.profile=NAME) or in an experiment; closed-loop profiles of "
            "run.profiles: none in run.profiles",
        ),
    ],
)
def test_a_search_without_capacity_profile_is_told_what_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_profiles: list[str], offered: str
) -> None:
    d = my_conf(tmp_path)
    code = plan_command.main(["-cd", str(d), "candidate@baseline=my_base", "search=seqs", *run_profiles])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{d}/search/seqs.yaml: capacity.profile = None: a workload: a search screens and measures" in err
    assert f"set it on the command line {offered}" in err, err


@pytest.mark.parametrize(
    ("gpus", "named"),
    [
        (2, []),  # the shipped 8-GPU candidate, the default of `candidate`, is not the search's
        (2, ["candidate=my_base"]),
        (8, []),
    ],
)
def test_a_search_needs_no_candidate_on_the_users_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpus: int, named: list[str]
) -> None:
    d = my_conf(tmp_path)
    (d / "host").mkdir()
    (d / "host" / "mylab.yaml").write_text(
        (CONF_DIR / "host" / "sim.yaml")
        .read_text()
        .replace("name: sim", "name: mylab")
        .replace("gpu_count: 8", f"gpu_count: {gpus}")
    )
    (d / "candidate" / "my_base.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: my_base\nmax_num_seqs: 64\n"
        f"tensor_parallel_size: 2\ndata_parallel_size: {gpus // 2}\n"
    )
    failure = StartupFailure("exited", kind="bad-args", exit_code=2, matched_line="error: --x")
    sup, messages = FakeSupervisor(failures={"my_base": failure}), []
    _FAKES.append((sup, FakeLoad(), messages))
    try:
        entry.main(
            ["-cd", str(d), "-m", f"run.sweeps_dir={tmp_path / 'sweeps'}", SEAMS, "host=mylab", *MINE, *named]
        )
    finally:
        _FAKES.pop()
    err = capsys.readouterr().err
    assert "conf/candidate/baseline.yaml" not in err, err
    assert sup.started == ["my_base"], (messages, err)  # opened: the baseline launched (and failed here)
