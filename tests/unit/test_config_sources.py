"""Every config error names the file that actually holds the value, whatever put it on the search path:
``hydra.searchpath`` (file:// and pkg://), ``--config-dir``, ``--config-path``, or a command-line override."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.paths import CONF_DIR
from orchestrator.config.compose import ConfigLocation, select
from orchestrator.plan import plan
from tests.unit.composed import load

TYPO = "defaults:\n  - baseline\n  - _self_\nname: zz_typo\ntensor_parallel_sise: 2\n"
BAD_VALUE = "defaults:\n  - baseline\n  - _self_\nname: zz_bad\ngpu_memory_utilization: 1.5\n"


def user_dir(root: Path) -> Path:
    (root / "candidate").mkdir(parents=True)
    (root / "candidate" / "zz_typo.yaml").write_text(TYPO)
    (root / "candidate" / "zz_bad.yaml").write_text(BAD_VALUE)
    return root


def setup(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], ConfigLocation, Path]:
    """(extra overrides, location, the directory that holds the user's candidate files) for one source."""
    if source == "searchpath":
        d = user_dir(tmp_path / "x")
        return [f"hydra.searchpath=[file://{d}]"], ConfigLocation(), d
    if source == "config-dir":
        d = user_dir(tmp_path / "my-conf")
        return [], ConfigLocation(config_dir=str(d)), d
    if source == "package":
        name = "mylab_" + "".join(c for c in tmp_path.name if c.isalnum())  # one module per test
        pkg = tmp_path / "site" / name
        (pkg / "conf").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "conf" / "__init__.py").write_text("")
        (pkg / "conf" / "candidate").mkdir()
        (pkg / "conf" / "candidate" / "zz_typo.yaml").write_text(TYPO)
        (pkg / "conf" / "candidate" / "zz_bad.yaml").write_text(BAD_VALUE)
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        return [f"hydra.searchpath=[pkg://{name}.conf]"], ConfigLocation(), pkg / "conf"
    assert source == "config-path"
    d = tmp_path / "conf-copy"
    shutil.copytree(CONF_DIR, d)
    (d / "candidate" / "zz_typo.yaml").write_text(TYPO)
    (d / "candidate" / "zz_bad.yaml").write_text(BAD_VALUE)
    return [], ConfigLocation(config_path=str(d)), d


SOURCES = ["searchpath", "config-dir", "package", "config-path"]


@pytest.mark.parametrize("source", SOURCES)
def test_a_misspelled_key_names_the_real_file(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra, location, where = setup(source, tmp_path, monkeypatch)
    with pytest.raises(ConfigError) as err:
        load([*extra, "candidate=zz_typo"], location=location)
    text = str(err.value)
    assert f"{where / 'candidate' / 'zz_typo.yaml'}: candidate.tensor_parallel_sise = 2" in text
    assert "did you mean 'tensor_parallel_size'" in text
    assert "conf/candidate/zz_typo.yaml" not in text.replace(str(where), "")


@pytest.mark.parametrize("source", SOURCES)
def test_a_bad_value_names_the_real_file(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra, location, where = setup(source, tmp_path, monkeypatch)
    with pytest.raises(ConfigError) as err:
        load([*extra, "candidate=zz_bad"], location=location)
    assert (
        f"{where / 'candidate' / 'zz_bad.yaml'}: gpu_memory_utilization = 1.5: a fraction in (0, 1]"
        in str(err.value)
    )


@pytest.mark.parametrize("source", SOURCES)
def test_the_user_candidates_join_the_group(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra, location, _ = setup(source, tmp_path, monkeypatch)
    chosen = select(location, [*extra, "candidate=glob(*)"]).candidates
    assert {"baseline", "tp4_dp2", "zz_typo", "zz_bad"} <= set(chosen)
    with pytest.raises(ConfigError) as err:  # plan checks every one of them and names both files
        plan([*extra], location)
    assert "zz_typo.yaml" in str(err.value) and "zz_bad.yaml" in str(err.value)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        (
            "candidate.tensor_parallel_sise=3",
            "command-line override 'candidate.tensor_parallel_sise=3': candidate.tensor_parallel_sise = '3': "
            "unknown key (did you mean 'tensor_parallel_size'?)",
        ),
        (
            "candidate.tensor_parallel_size=abc",
            "command-line override 'candidate.tensor_parallel_size=abc': "
            "candidate.tensor_parallel_size = 'abc': "
            "must be of type Integer",
        ),
        (
            "workloads.serial.concurency=2",
            "command-line override 'workloads.serial.concurency=2': workloads.serial.concurency = '2': "
            "unknown key (did you mean 'concurrency'?)",
        ),
        (
            "candidate=nosuch",
            "command-line override 'candidate=nosuch': candidate = 'nosuch': one of baseline, eplb, mega_moe",
        ),
        ("run.repeats=0", "command-line override 'run.repeats=0': run.repeats = 0: an integer >= 1"),
        ("candidate.gpu_memory_utilization=2", "command-line override 'candidate.gpu_memory_utilization=2'"),
    ],
)
def test_a_command_line_override_is_named_as_such(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        load([override])
    assert fragment in str(err.value)


def test_the_primary_config_path_comes_first_as_in_hydra(tmp_path: Path) -> None:
    """Hydra searches conf/ before a --config-dir: a user file named like a shipped one does not shadow it
    (the shipped one is read and named); give yours its own name."""
    d = tmp_path / "my-conf"
    (d / "candidate").mkdir(parents=True)
    (d / "candidate" / "tp4_dp2.yaml").write_text(TYPO.replace("zz_typo", "tp4_dp2"))
    cfg, sources = load(["candidate=tp4_dp2"], location=ConfigLocation(config_dir=str(d)))
    assert cfg.candidate.tensor_parallel_size == 4
    assert sources.group_file("candidate", "tp4_dp2") == CONF_DIR / "candidate" / "tp4_dp2.yaml"
    assert sources.search_path[:2] == [CONF_DIR, d]
