"""The host's prices and the cost gate's bounds, checked when the config is composed: a bad value is
refused naming its file, field and value (orchestrator/config/measure_bounds.py)."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from orchestrator.config.compose import load


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
