"""The house's arrows (docs/architecture.md): the import-linter contracts in pyproject.toml hold on the
tree, and they do fail on an upward import or a stray Hydra import."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("benchmarks", "contracts", "launch", "load", "gates", "report", "orchestrator")
#: orchestrator/: the command line's modules, then its folders from the top layer down (pyproject.toml).
ENTRY = ("__main__", "cli", "catalog", "plan", "doctor", "lm_eval")
SWEEP_FOLDERS = ("app", "search", "recovery", "measure", "servers", "ledger", "config")


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
    for module in ENTRY:
        (tmp_path / "orchestrator" / f"{module}.py").write_text("")
    for folder in SWEEP_FOLDERS:
        (tmp_path / "orchestrator" / folder).mkdir()
        (tmp_path / "orchestrator" / folder / "__init__.py").write_text("")
    # Every module a "forbidden" contract lets import what it forbids elsewhere (Hydra and OmegaConf, Optuna),
    # with what it may import (read from pyproject.toml's ignore_imports, so a module added there is in the
    # toy tree too).
    allowed: dict[str, list[str]] = {}
    for contract in config["contracts"]:
        if contract["type"] != "forbidden":
            continue
        for rule in contract.get("ignore_imports", []):
            module, target = rule.split(" -> ")
            allowed.setdefault(module, []).append(target)
    for module, targets in allowed.items():
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text("".join(f"import {t}\n" for t in targets))
    # The simulator and the only modules that may import it (the "protected" contract names them).
    (tmp_path / "launch" / "sim").mkdir()
    (tmp_path / "launch" / "sim" / "__init__.py").write_text("")
    (tmp_path / "launch" / "preflight.py").write_text("")
    (tmp_path / "orchestrator" / "servers" / "seams.py").write_text("")
    for module, source in imports.items():
        (tmp_path / module.replace(".", "/")).with_suffix(".py").write_text(source)
    return tmp_path


def test_the_top_may_import_stages_and_contracts(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path,
        {
            "orchestrator.measure.begin": "import launch\nimport load\nimport gates\nimport report\n"
            "import contracts\n"
        },
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_breaks_the_build(tmp_path: Path) -> None:
    house = _toy_house(tmp_path, {"launch.spec": "import orchestrator\n", "contracts.x": "import gates\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "launch.spec -> orchestrator" in done.stdout
    assert "contracts.x -> gates" in done.stdout


def test_a_benchmark_may_import_every_package(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path,
        {
            "benchmarks.decision_quality": "import orchestrator.config\nimport launch\nimport load\n"
            "import gates\nimport report\nimport contracts\n"
        },
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("importer", ["orchestrator.measure.begin", "gates.stats", "contracts.layout"])
def test_no_package_may_import_a_benchmark(tmp_path: Path, importer: str) -> None:
    house = _toy_house(
        tmp_path, {"benchmarks.noise_models": "", importer: "import benchmarks.noise_models\n"}
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert f"{importer} -> benchmarks.noise_models" in done.stdout


def test_one_stage_may_not_reach_into_another(tmp_path: Path) -> None:
    house = _toy_house(tmp_path, {"report.render": "import gates\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "report.render -> gates" in done.stdout


def test_hydra_only_in_the_entry_point_and_config_composition(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path, {"gates.stats": "import omegaconf\n", "orchestrator.measure.begin": "import hydra\n"}
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "gates.stats -> omegaconf" in done.stdout
    assert "orchestrator.measure.begin -> hydra" in done.stdout


@pytest.mark.parametrize(
    "importer",
    [
        "orchestrator.search.loop",  # the run loop sees a study through the adapter only
        "orchestrator.search.rules",
        "orchestrator.app.jobs",  # a trial's job reports to the pruner through the adapter
        "report.search",
        "benchmarks.search_quality",
    ],
)
def test_optuna_only_in_the_searchs_adapter(tmp_path: Path, importer: str) -> None:
    house = _toy_house(tmp_path, {importer: "import optuna\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "Optuna only in the search's adapter BROKEN" in done.stdout
    assert f"{importer} -> optuna" in done.stdout


def test_the_optuna_adapter_may_import_optuna(tmp_path: Path) -> None:
    house = _toy_house(tmp_path, {"orchestrator.app.jobs": "import orchestrator.search.study\n"})
    assert (house / "orchestrator" / "search" / "study.py").read_text() == "import optuna\n"
    done = lint_imports(house, pythonpath=house)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_sweep_folders_are_layers_in_their_declared_order() -> None:
    layers = [
        c
        for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
        if c.get("containers") == ["orchestrator"]
    ]
    assert len(layers) == 1 and layers[0]["type"] == "layers"
    assert [layer for layer in layers[0]["layers"] if "|" not in layer][1:] == list(SWEEP_FOLDERS)
    on_disk = sorted(p.name for p in (ROOT / "orchestrator").iterdir() if (p / "__init__.py").exists())
    assert on_disk == sorted(SWEEP_FOLDERS)
    modules = [p.stem for p in (ROOT / "orchestrator").glob("*.py") if p.stem != "__init__"]
    assert sorted(modules) == sorted(ENTRY) and len(modules) <= 12


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("orchestrator.ledger.journal", "orchestrator.measure"),  # the ledger reaching up into measuring
        ("orchestrator.config.validate", "orchestrator.servers"),  # config at the bottom
        ("orchestrator.measure.candidate", "orchestrator.recovery"),
        ("orchestrator.app.jobs", "orchestrator.cli"),  # the command line is on top of everything
    ],
)
def test_an_upward_import_inside_the_sweep_breaks_the_build(
    tmp_path: Path, importer: str, imported: str
) -> None:
    house = _toy_house(tmp_path, {importer: f"import {imported}\n"})
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert f"{importer} -> {imported}" in done.stdout


def test_a_downward_import_inside_the_sweep_is_allowed(tmp_path: Path) -> None:
    house = _toy_house(
        tmp_path,
        {
            "orchestrator.app.jobs": "import orchestrator.measure.candidate\n",
            "orchestrator.measure.candidate": "import orchestrator.servers.session\nimport launch\n",
            "orchestrator.servers.session": "import orchestrator.ledger.journal\n",
            "orchestrator.ledger.journal": "import orchestrator.config.validate\n",
        },
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_circle_inside_a_folder_breaks_the_build(tmp_path: Path) -> None:
    """The capacity <-> measure circle, once hidden by a lazy import, cannot come back."""
    house = _toy_house(
        tmp_path,
        {
            "orchestrator.measure.candidate": "def f():\n    import orchestrator.measure.capacity\n",
            "orchestrator.measure.capacity": "import orchestrator.measure.candidate\n",
        },
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "No import circle inside the sweep BROKEN" in done.stdout


def test_a_circle_inside_the_launcher_breaks_the_build(tmp_path: Path) -> None:
    """The simulator's stream holding the whole server (a circle with server.py) cannot come back."""
    house = _toy_house(tmp_path, {})
    (house / "launch" / "sim" / "server.py").write_text("import launch.sim.stream\n")
    (house / "launch" / "sim" / "stream.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import launch.sim.server\n"
    )
    done = lint_imports(house, pythonpath=house)
    assert done.returncode != 0
    assert "No import circle inside the launcher BROKEN" in done.stdout


def _loaded(modules: Sequence[str], packages: Sequence[str]) -> list[str]:
    """The modules of ``packages`` that importing ``modules`` loads, in a fresh interpreter."""
    code = f"import sys\nimport {', '.join(modules)}\n" + (
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {tuple(packages)!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(ast.literal_eval(done.stdout.strip()))


#: What `status`, `stop` and `rollback` import.
RECOVERY = ("orchestrator.__main__", "orchestrator.recovery.rollback", "orchestrator.recovery.stop",
            "orchestrator.recovery.status")  # fmt: skip


def test_commands_that_rebuild_from_disk_do_not_load_hydra() -> None:
    """judge, report, rollback, stop, status and promote read config.yaml typed, without Hydra or
    OmegaConf."""
    modules = ("gates.judge", "report", *RECOVERY, "orchestrator.recovery.promote")
    assert _loaded(modules, ("hydra", "omegaconf")) == []


def test_the_recovery_commands_do_not_load_scipy() -> None:
    """rollback, stop and status never compute a statistic: scipy (about 1 s of imports on CI's cores) is
    imported by the gates on first use, so these commands start in a fraction of a second, and so does
    every test that runs them."""
    assert _loaded(RECOVERY, ("scipy",)) == []
