"""The host's prices and the cost gate's bounds, checked when the config is composed: a bad value is
refused naming its file, field and value (orchestrator/config/measure_bounds.py); so is a cost bound on a
host without ``host.gpu_hour_price`` (issue 42, item 5), naming where the price is missing and what to set."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError
from orchestrator.config.compose import ConfigLocation
from tests.unit.composed import load


@pytest.mark.parametrize(
    ("overrides", "field", "value"),
    [
        pytest.param(["host.gpu_hour_price=-1"], "host.gpu_hour_price", "-1", id="negative price"),
        pytest.param(["host.power_price_kwh=-0.1"], "host.power_price_kwh", "-0.1", id="negative power"),
        pytest.param(
            ["host.gpu_hour_price=null", "host.power_price_kwh=0.15"],
            "host.power_price_kwh",
            "0.15",
            id="power price without a GPU-hour price",
        ),
        pytest.param(
            ["gates.cost.tolerance=-0.05"], "gates.cost.tolerance", "-0.05", id="negative tolerance"
        ),
        pytest.param(["gates.cost.max_usd_per_mtok=0"], "gates.cost.max_usd_per_mtok", "0", id="zero budget"),
    ],
)
def test_bad_prices_and_bounds_are_refused_naming_file_field_and_value(
    overrides: list[str], field: str, value: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(["candidate=baseline", *overrides])
    text = str(info.value)
    assert field in text and value in text
    assert ("conf/host/" in text) if field.startswith("host.") else ("conf/gates/" in text)


def test_prices_and_bounds_in_range_are_accepted() -> None:
    cfg, _ = load(["candidate=baseline", "gates.cost.tolerance=0.05", "gates.cost.max_usd_per_mtok=3"])
    assert cfg.host.gpu_hour_price == 2.5 and cfg.gates.cost.max_usd_per_mtok == 3


# ----------------------------------------------- a cost bound without a price (issue 42, item 5)

MY_GATES = "defaults:\n  - default\n  - _self_\ncost:\n  tolerance: 0.1\n"
MY_HOST = "defaults:\n  - h100x8\n  - _self_\nname: my_h100\n"


def _user_conf(root: Path) -> Path:
    (root / "gates").mkdir(parents=True)
    (root / "gates" / "my_gates.yaml").write_text(MY_GATES)
    (root / "host").mkdir()
    (root / "host" / "my_host.yaml").write_text(MY_HOST)
    return root


@pytest.mark.parametrize(
    ("overrides", "user", "bound", "value", "bound_at", "price_at"),
    [
        pytest.param(
            ["host=h100x8", "gates.cost.tolerance=0.05"],
            False,
            "gates.cost.tolerance",
            "0.05",
            "command-line override 'gates.cost.tolerance=0.05'",
            "conf/host/h100x8.yaml",
            id="tolerance on a host without a price",
        ),
        pytest.param(
            ["host=h100x8", "gates.cost.max_usd_per_mtok=3"],
            False,
            "gates.cost.max_usd_per_mtok",
            "3.0",
            "command-line override 'gates.cost.max_usd_per_mtok=3'",
            "conf/host/h100x8.yaml",
            id="budget on a host without a price",
        ),
        pytest.param(
            ["host.gpu_hour_price=null", "host.power_price_kwh=null", "gates.cost.tolerance=0.05"],
            False,
            "gates.cost.tolerance",
            "0.05",
            "command-line override 'gates.cost.tolerance=0.05'",
            "command-line override 'host.gpu_hour_price=null'",
            id="the price taken away on the command line",
        ),
        pytest.param(
            ["gates=my_gates", "host=my_host"],
            True,
            "gates.cost.tolerance",
            "0.1",
            "gates/my_gates.yaml",
            "conf/host/h100x8.yaml",
            id="the user's own gates and host files",
        ),
    ],
)
def test_a_cost_bound_without_a_gpu_hour_price_is_refused_when_composed(
    tmp_path: Path,
    *,
    overrides: list[str],
    user: bool,
    bound: str,
    value: str,
    bound_at: str,
    price_at: str,
) -> None:
    location = ConfigLocation(config_dir=str(_user_conf(tmp_path / "my-conf"))) if user else None
    with pytest.raises(ConfigError) as info:
        load(["candidate=baseline", *overrides], location=location)
    (problem,) = [p for p in info.value.problems if p.field == bound]
    text = str(problem)
    assert problem.file.endswith(bound_at), text  # the file (or override) that set the bound
    assert str(problem.value) == value
    assert f"host.gpu_hour_price is null ({price_at}" in text  # where the price is missing
    assert "set host.gpu_hour_price to your provider's $ per GPU-hour" in text  # what to set
    assert f"or leave {bound} null" in text
