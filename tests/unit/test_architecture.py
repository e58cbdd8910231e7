"""The house's arrows (docs/architecture.md): the import-linter contracts in pyproject.toml hold on the
tree, and they do fail on an upward import or a stray Hydra import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launch", "load", "gates", "report", "orchestrator")


def lint_imports(cwd: Path, *, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_tree_keeps_every_import_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _toy_house(tmp_path: Path, imports: dict[str, str]) -> Path:
    """A copy of the contracts over one empty module per package, plus the given imports."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert set(config["root_packages"]) == set(PACKAGES)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for package in ("orchestrator",):
        (tmp_path / package / "config.py").write_text("import hydra\nimport omegaconf\n")
        (tmp_path / package / "hydra_app.py").write_text("import hydra\nimport omegaconf\n")
    for module, source in imports.items():
        (tmp_path / module.replace(".", "/")).with_suffix(".py").write_text(source)
    return tmp_path


def test_the_top_may_import_stages_and_contracts(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path,
        {"orchestrator.sweep": "import launch\nimport load\nimport gates\nimport report\nimport contracts\n"},
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_breaks_the_build(tmp_path: Path) -> None:
    house = _toy_house(tmp_path, {"launch.spec": "import orchestrator\n", "contracts.x": "import gates\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "launch.spec -> orchestrator" in done.stdout
    assert "contracts.x -> gates" in done.stdout


def test_one_stage_may_not_reach_into_another(tmp_path: Path) -> None:
    house = _toy_house(tmp_path, {"report.render": "import gates\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "report.render -> gates" in done.stdout


def test_hydra_only_in_the_entry_point_and_config_composition(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path, {"gates.stats": "import omegaconf\n", "orchestrator.sweep": "import hydra\n"}
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "gates.stats -> omegaconf" in done.stdout
    assert "orchestrator.sweep -> hydra" in done.stdout


def test_commands_that_rebuild_from_disk_do_not_load_hydra() -> None:
    """judge, report, rollback, stop and status read config.yaml typed, without Hydra or OmegaConf."""
    code = (
        "import sys\n"
        "import gates.judge, report, orchestrator.rollback, orchestrator.__main__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
