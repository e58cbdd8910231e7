"""``plan`` composes the part its candidates share once (orchestrator.config.candidates), and every
candidate still reads exactly as Hydra composes it alone: the same typed config, sources and errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl

from contracts.errors import ConfigError
from orchestrator.config import guard
from orchestrator.config.candidates import CandidateComposer
from orchestrator.config.compose import ConfigLocation, load, select
from orchestrator.plan import plan

PLAIN = "defaults:\n  - baseline\n  - _self_\nname: {name}\nmax_num_seqs: 77\n"
FILES: dict[str, str] = {
    # the common shape: the baseline and one difference
    "aa_plain": PLAIN.format(name="aa_plain"),
    # three files deep, _self_ first in one of them
    "ab_deep": "defaults:\n  - _self_\n  - aa_plain\nname: ab_deep\ngpu_memory_utilization: 0.8\n",
    # no defaults list: the schema comes from GauntletConfig's field alone
    "ac_leaf": "name: ac_leaf\ntensor_parallel_size: 1\ndata_parallel_size: 1\n",
    # an interpolation into another group's node
    "ad_interp": "defaults:\n  - baseline\n  - _self_\nname: ad_interp\ndescription: for ${service.model}\n",
    # a value of the wrong type: refused while merging, Hydra's message with the file
    "ae_bad_type": "defaults:\n  - baseline\n  - _self_\nname: ae_bad_type\ntensor_parallel_size: abc\n",
    # an unknown key: the schema refuses it while merging (Hydra in full says so)
    "af_typo": "defaults:\n  - baseline\n  - _self_\nname: af_typo\ntensor_parallel_sise: 2\n",
    # not plain: it moves another group (Hydra in full)
    "ag_override": "defaults:\n  - baseline\n  - override /host: cpu\n  - _self_\nname: ag_override\n",
    # not plain: a package header
    "ah_header": "# @package _global_\ndefaults:\n  - /candidate/baseline@candidate\n  - _self_\n"
    "candidate:\n  name: ah_header\n",
    # not plain: a default that does not exist
    "ai_missing": "defaults:\n  - no_such_candidate\n  - _self_\nname: ai_missing\n",
}


def user_dir(root: Path, names: list[str]) -> ConfigLocation:
    (root / "candidate").mkdir(parents=True)
    for name in names:
        (root / "candidate" / f"{name}.yaml").write_text(FILES[name])
    return ConfigLocation(config_dir=str(root))


def outcome(call: Callable[[], tuple[Any, Any]]) -> tuple[str, Any, Any]:
    try:
        typed, sources = call()
    except ConfigError as exc:
        return ("error", str(exc), None)
    return ("ok", typed, sources)


@pytest.mark.parametrize(
    ("names", "rest", "quick"),
    [
        pytest.param([], [], {"eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"}, id="shipped"),
        pytest.param([], ["host=h100x8", "run.repeats=2"], {"eplb", "mega_moe", "spec_probabilistic",
                     "tp4_dp2"}, id="shipped-with-overrides"),
        pytest.param(["aa_plain"], ["host=cpu"], {"aa_plain", "eplb", "mega_moe", "spec_probabilistic",
                     "tp4_dp2"}, id="every-candidate-refused"),
        pytest.param(["aa_plain", "ab_deep", "ac_leaf", "ad_interp"], [], {"aa_plain", "ab_deep", "ac_leaf",
                     "ad_interp", "eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"}, id="plain-chains"),
        pytest.param(["ae_bad_type", "af_typo"], [], {"eplb", "mega_moe", "spec_probabilistic", "tp4_dp2"},
                     id="refused-by-the-merge"),
        pytest.param(["ag_override", "ah_header", "ai_missing"], [], {"eplb", "mega_moe",
                     "spec_probabilistic", "tp4_dp2"}, id="not-plain"),
        pytest.param(["aa_plain"], ["candidate.max_num_seqs=5"], set(), id="a-candidate-override"),
        # the user's directory on hydra.searchpath instead of --config-dir
        pytest.param(["aa_plain", "ab_deep"], ["searchpath"], {"aa_plain", "ab_deep", "eplb", "mega_moe",
                     "spec_probabilistic", "tp4_dp2"}, id="on-the-searchpath"),
    ],
)  # fmt: skip
def test_each_candidate_composes_as_hydra_composes_it_alone(
    names: list[str], rest: list[str], quick: set[str], tmp_path: Path
) -> None:
    location = user_dir(tmp_path / "my-conf", names)
    if rest == ["searchpath"]:
        rest, location = [f"hydra.searchpath=[file://{location.config_dir}]"], ConfigLocation()
    options = select(location, [*rest, "candidate=glob(*)"]).candidates
    assert set(names) <= set(options)
    alone = {o: outcome(partial(load, [*rest, f"candidate={o}"], location=location)) for o in options}
    shared: dict[str, tuple[str, Any, Any]] = {}
    merged: set[str] = set()
    with CandidateComposer(location, rest) as composer:
        for option in ["baseline", *[o for o in options if o != "baseline"]]:  # Hydra in full first
            before = composer.quick
            shared[option] = outcome(partial(composer.load, option))
            if composer.quick > before:
                merged.add(option)
    assert shared == alone
    assert merged == quick


def test_a_plan_composes_the_tree_once_and_checks_each_file_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the shared composition, Hydra composed the whole tree for each candidate (0.2 s of CPU
    each) and the YAML guard before it read every shared file again per candidate."""
    location = user_dir(tmp_path / "my-conf", ["aa_plain", "ab_deep", "ad_interp"])
    compositions: list[list[str]] = []
    checked: Counter[Path] = Counter()
    compose, problem = ConfigLoaderImpl.load_configuration, guard._yaml_problem

    def counted_compose(
        self: ConfigLoaderImpl, config_name: Any, overrides: list[str], *a: Any, **k: Any
    ) -> Any:
        compositions.append(list(overrides))
        return compose(self, config_name, overrides, *a, **k)

    def counted_problem(path: Path) -> Any:
        checked[path] += 1
        return problem(path)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted_compose)
    monkeypatch.setattr(guard, "_yaml_problem", counted_problem)
    planned = plan([], location)
    assert len(planned) == 8
    assert compositions == [["candidate=aa_plain"]]  # the first of the sorted options
    # once by the names check of the whole group, once by the guard before composing (9 times before)
    assert checked and max(checked.values()) == 2, checked.most_common(3)
