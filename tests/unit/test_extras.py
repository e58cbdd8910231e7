"""Launchers of an optional extra: which overrides choose one, and the error when it is not installed."""

from __future__ import annotations

import sys

import pytest

from contracts.errors import ConfigError
from orchestrator.config.extras import LAUNCHER_EXTRAS, check_extras, extra_problems, installed


@pytest.mark.parametrize(
    ("overrides", "missing", "refused"),
    [
        (["hydra/launcher=gauntlet_slurm"], {"hydra_plugins.hydra_submitit_launcher"}, ["gauntlet_slurm"]),
        (["hydra/launcher=gauntlet_slurm"], set(), []),
        (["+hydra/launcher=submitit_local"], {"hydra_plugins.hydra_submitit_launcher"}, ["submitit_local"]),
        (["hydra/launcher='gauntlet_local'"], {"hydra_plugins.hydra_submitit_launcher"}, ["gauntlet_local"]),
        (["hydra/launcher=ray"], {"hydra_plugins.hydra_ray_launcher"}, ["ray"]),
        (["hydra/launcher=ray"], {"hydra_plugins.hydra_submitit_launcher"}, []),
        (["hydra/launcher=basic"], {"hydra_plugins.hydra_submitit_launcher"}, []),
        (["candidate=glob(*)", "host=sim"], {"hydra_plugins.hydra_submitit_launcher"}, []),
        (["hydra.launcher.partition=gauntlet_slurm"], {"hydra_plugins.hydra_submitit_launcher"}, []),
    ],
    ids=["slurm-missing", "slurm-installed", "plus", "quoted", "ray-missing", "other-extra", "basic", "none",
         "a-field-not-the-group"],
)  # fmt: skip
def test_a_launcher_is_refused_only_when_its_extra_is_missing(
    overrides: list[str], missing: set[str], refused: list[str]
) -> None:
    problems = extra_problems(overrides, lambda module: module not in missing)
    assert [p.value for p in problems] == refused
    for p in problems:
        extra = LAUNCHER_EXTRAS[str(p.value)].name
        assert f"pip install 'gauntlet[{extra}]'" in p.allowed
        assert p.file.startswith("command-line override ") and overrides[0] in p.file
        assert p.field == "hydra/launcher"


def test_check_extras_raises_one_config_error_with_the_pip_command() -> None:
    with pytest.raises(ConfigError) as info:
        check_extras(["hydra/launcher=gauntlet_slurm"], lambda module: False)
    text = str(info.value)
    assert text.count("pip install 'gauntlet[slurm]'") == 1, text
    assert "install the extra named above" in text


def test_installed_answers_without_raising_for_a_missing_parent() -> None:
    assert installed("contracts.errors")
    assert not installed("no_such_package_gauntlet.sub")


def test_the_slurm_plugin_without_the_extra_raises_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chosen in a config file instead of on the command line, the launcher itself says what to install."""
    from hydra_plugins.gauntlet_submitit_slurm import SubmititSlurmLauncher

    monkeypatch.setitem(sys.modules, "hydra_plugins.hydra_submitit_launcher.submitit_launcher", None)
    with pytest.raises(ConfigError, match=r"pip install 'gauntlet\[slurm\]'"):
        SubmititSlurmLauncher()
