"""``search=null`` on the command line: a ConfigProblem naming the override and ``~search``, for the sweep
and for plan, instead of Hydra's bare ``ValueError`` (orchestrator.config.overrides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.paths import CONF_DIR
from orchestrator.__main__ import main
from orchestrator.config.overrides import null_group_problems
from tests.unit.composed import load


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("search=null", True),
        ("candidate=null", True),
        ("+search=null", True),
        ("candidate@baseline=null", True),
        ("search= null", True),
        ("~search", False),  # Hydra's own way to drop the group
        ("search=demo", False),
        ("slo.tpot_s=null", False),  # a field, which Hydra sets to null itself
        ("nonesuch=null", False),  # no such group: Hydra's error, which names it
        ("hydra/launcher=null", False),
    ],
)
def test_null_group_problems(override: str, refused: bool) -> None:
    problems = null_group_problems([override], [CONF_DIR])
    assert bool(problems) is refused
    if refused:
        (problem,) = problems
        group = override.lstrip("+").split("@")[0].split("=")[0]
        assert problem.field == group and problem.value == "null" and override in problem.file
        assert f"~{group}" in problem.allowed


def test_the_group_lists_its_configs_from_every_search_root(tmp_path: Path) -> None:
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "mine.yaml").write_text("name: mine\n")
    (problem,) = null_group_problems(["search=null"], [CONF_DIR, tmp_path])
    assert "demo" in problem.allowed and "mine" in problem.allowed


def test_plan_refuses_it_with_the_override_and_the_way_to_drop_the_group() -> None:
    with pytest.raises(ConfigError) as caught:
        load(["+experiment=demo_search", "search=null"])
    text = str(caught.value)
    assert "search=null" in text and "~search" in text and "Traceback" not in text


def test_the_sweep_refuses_it_before_anything_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["+experiment=demo_search", "search=null", f"run.sweeps_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert "search=null" in err and "~search" in err and "ValueError" not in err
    assert not any(tmp_path.iterdir())  # no sweep directory: nothing was started
