"""Without the ``.[slurm]`` extra: every command works and says nothing about it, and choosing its launcher
is one error naming the pip command.

The environment without the extra is this venv's site-packages seen through a folder of links that leaves
out submitit and its Hydra plugin (``python -S`` with that folder on ``PYTHONPATH``): nothing is
uninstalled from the shared venv, and Hydra's plugin scan sees the ``hydra_plugins`` it would see there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.paths import PROJECT_ROOT

#: What the extra installs (submitit and hydra-submitit-launcher).
EXTRA = ("submitit", "hydra_submitit_launcher")


def without_the_extra(view: Path) -> Path:
    """A folder of links to site-packages, less the extra's packages (also inside ``hydra_plugins``)."""
    site = Path(sysconfig.get_paths()["purelib"])
    view.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith(EXTRA) or entry.suffix == ".pth" or entry.name == "hydra_plugins":
            continue
        (view / entry.name).symlink_to(entry)
    (view / "hydra_plugins").mkdir()
    for entry in (site / "hydra_plugins").iterdir():
        if not entry.name.startswith(EXTRA):
            (view / "hydra_plugins" / entry.name).symlink_to(entry)
    return view


def gauntlet(view: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(view), str(PROJECT_ROOT)])}
    return subprocess.run(
        [sys.executable, "-S", "-W", "error", "-m", "orchestrator", *args],
        cwd=PROJECT_ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return without_the_extra(tmp_path_factory.mktemp("noslurm") / "site")


def test_the_view_lacks_the_extra(view: Path) -> None:
    """The environment the other tests run in: submitit cannot be imported, Hydra and gauntlet can."""
    probe = "import hydra, orchestrator.plan\ntry:\n import submitit\nexcept ImportError:\n print('absent')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(view), str(PROJECT_ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "absent", proc.stderr


def test_a_command_that_does_not_ask_for_the_extra_says_nothing_about_it(view: Path) -> None:
    proc = gauntlet(view, "plan", "candidate=baseline")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Error importing" not in proc.stderr, proc.stderr
    assert "gauntlet_submitit_slurm" not in proc.stderr, proc.stderr
    assert "candidate(s) on host 'sim'" in proc.stdout


@pytest.mark.parametrize("command", [["plan"], ["-m"]], ids=["plan", "sweep"])
def test_choosing_the_slurm_launcher_without_the_extra_is_one_error_naming_pip(
    view: Path, tmp_path: Path, command: list[str]
) -> None:
    proc = gauntlet(
        view,
        *command,
        "candidate=baseline",
        "hydra/launcher=gauntlet_slurm",
        f"run.sweeps_dir={tmp_path / 's'}",
    )
    assert proc.returncode == ConfigError.exit_code, proc.stdout + proc.stderr
    assert "pip install 'gauntlet[slurm]'" in proc.stderr, proc.stderr
    assert "Could not load" not in proc.stderr and "Error importing" not in proc.stderr, proc.stderr
    assert not (tmp_path / "s").exists(), "nothing was opened"
