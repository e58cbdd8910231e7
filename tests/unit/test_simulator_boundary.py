"""The simulator's boundary (docs/architecture.md, "Why the simulator stays in launch/"): ``launch/sim/`` is a
server program of its own inside the launcher. It imports contracts and the launch spec only, and only
doctor's probes, the sweep's seams and the benchmarks import it (the ``protected`` contract in
pyproject.toml, which these toy trees prove can fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("benchmarks", "contracts", "launch", "load", "gates", "report", "orchestrator")
#: What the simulator may import outside itself: the records it writes and the spec versus.py reads.
ALLOWED = ("contracts", "launch.spec")


def outside_imports(graph: grimp.ImportGraph) -> set[str]:
    """The gauntlet modules a module of launch.sim imports, outside launch.sim itself."""
    inside = {m for m in graph.modules if m == "launch.sim" or m.startswith("launch.sim.")}
    return {imported for m in inside for imported in graph.find_modules_directly_imported_by(m)} - inside


def test_the_simulator_imports_only_contracts_and_the_launch_spec() -> None:
    graph = grimp.build_graph("launch", "contracts")
    found = outside_imports(graph)
    assert found, "the walk found the simulator's imports"
    beyond = sorted(m for m in found if not any(m == a or m.startswith(f"{a}.") for a in ALLOWED))
    assert not beyond, f"launch.sim reaches into {beyond}: the simulator is a program of its own"


def _house(tmp_path: Path, imports: dict[str, str]) -> Path:
    """The project's contracts over one empty module per package and the modules they name."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    sweep = next(c for c in contracts if c.get("containers") == ["orchestrator"])
    folders = [f"orchestrator/{n.strip()}" for layer in sweep["layers"] for n in layer.split("|")]
    for folder in ["launch/sim", *folders]:
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    allowed: dict[str, list[str]] = {}  # Hydra's and Optuna's own modules, each with the imports allowed
    for contract in contracts:
        if contract["type"] != "forbidden":
            continue
        for rule in contract.get("ignore_imports", []):
            module, target = rule.split(" -> ")
            allowed.setdefault(module, []).append(target)
    for module, targets in sorted(allowed.items()):
        (tmp_path / f"{module.replace('.', '/')}.py").write_text("".join(f"import {t}\n" for t in targets))
    for module in ("launch/sim/cli", "launch/sim/client", "launch/preflight", "orchestrator/servers/seams"):
        (tmp_path / f"{module}.py").write_text("")
    for module, source in imports.items():
        (tmp_path / module.replace(".", "/")).with_suffix(".py").write_text(source)
    return tmp_path


def _lint(house: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--no-cache"],
        cwd=house,
        env={"PYTHONPATH": str(house), "PATH": str(exe.parent)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_doctor_the_seams_and_the_benchmarks_may_import_the_simulator(tmp_path: Path) -> None:
    house = _house(
        tmp_path,
        {
            "launch.preflight": "import launch.sim.cli\n",
            "orchestrator.servers.seams": "import launch.sim.client\n",
            "benchmarks.sim_throughput": "import launch.sim.cli\n",
        },
    )
    done = _lint(house)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("importer", ["launch.supervisor", "orchestrator.measure.launch", "launch.spec"])
def test_no_other_module_may_import_the_simulator(tmp_path: Path, importer: str) -> None:
    house = _house(tmp_path, {importer: "import launch.sim.client\n"})
    done = _lint(house)
    assert done.returncode != 0
    assert "The simulator is imported only by" in done.stdout
    assert f"{importer} -> launch.sim.client" in done.stdout
