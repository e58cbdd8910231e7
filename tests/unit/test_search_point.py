"""One encoding of a point (orchestrator.search.point): the typed candidate, the trial's Hydra overrides and
the winner's candidate file are the same candidate, composed by Hydra as the sweep composes them.

Before the encoding was one, the three disagreed on these rows: a baseline without speculative decoding
and a point that turns it on (the candidate and the winner's file had it, the trial's overrides crashed in
Hydra: a failed launch each), and an integer field given a float (100.0 and 100.7 were candidates, the
overrides and the file were refused by the schema; 3.7 draft tokens were truncated to 3)."""

from __future__ import annotations

import shutil
import typing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from contracts.schema import CandidateConfig, GauntletConfig, SpeculativeConfig
from contracts.search import INTEGER_FIELDS, SEARCH_FIELDS, SearchConfig, Space
from contracts.trials import TrialRecord
from orchestrator.config.compose import CONF_DIR, compose_config, to_typed
from orchestrator.search.point import candidate_at, point_overrides, speculative_off
from orchestrator.search.prune import point_refusal
from orchestrator.search.rules import winner_yaml

LAYOUTS = {"tp4_dp2": {"tensor_parallel_size": 4, "data_parallel_size": 2, "enable_expert_parallel": True}}
NO_SPEC = "defaults:\n  - baseline\n  - _self_\nname: nospec\nspeculative: null\n"
#: A baseline that sets two vLLM flags itself, one in each spelling.
CACHING = (
    "defaults:\n  - baseline\n  - _self_\nname: caching\n"
    "extra_args: {enable_prefix_caching: true, block-size: 16}\n"
)
REFUSED = "refused"


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of conf/ with a baseline that runs without speculative decoding (candidate/nospec.yaml)."""
    root = tmp_path_factory.mktemp("conf") / "conf"
    shutil.copytree(CONF_DIR, root)
    (root / "candidate" / "nospec.yaml").write_text(NO_SPEC)
    (root / "candidate" / "caching.yaml").write_text(CACHING)
    return root


def _composed(conf: Path, overrides: list[str]) -> GauntletConfig:
    cfg, _ = compose_config(overrides, config_dir=conf)
    return to_typed(cfg)


def _settings(candidate: CandidateConfig) -> dict[str, Any]:
    out = asdict(candidate)
    del out["name"], out["description"]
    return out


def _forms(conf: Path, base_option: str, point: dict[str, Any]) -> list[dict[str, Any] | str]:
    """The point's three forms, each as the candidate's settings Hydra composes (or REFUSED)."""
    baseline = _composed(conf, [f"candidate@baseline={base_option}"]).baseline
    forms: list[dict[str, Any] | str] = []
    try:
        forms.append(_settings(candidate_at(baseline, point, LAYOUTS, "t")))
    except ValueError:
        forms.append(REFUSED)
    try:
        overrides = point_overrides(point, LAYOUTS, baseline, baseline_option=base_option, name="t")
        forms.append(_settings(_composed(conf, [f"candidate@baseline={base_option}", *overrides]).candidate))
    except ValueError:
        forms.append(REFUSED)
    trial = TrialRecord(number=1, name="t", params=point, state="complete", values=[1.0])
    try:
        text = winner_yaml(SearchConfig(name="s"), trial, base_option, LAYOUTS, baseline)
        (conf / "candidate" / "win.yaml").write_text(text)
        forms.append(
            _settings(_composed(conf, [f"candidate@baseline={base_option}", "candidate=win"]).candidate)
        )
    except ValueError:
        forms.append(REFUSED)
    return forms


@pytest.mark.parametrize(
    ("base", "point", "expected"),
    [
        (
            "baseline",
            {"layout": "tp4_dp2", "max_num_seqs": 64},
            {"tensor_parallel_size": 4, "max_num_seqs": 64},
        ),
        ("baseline", {"moe_backend": "triton", "max_num_batched_tokens": 8192}, {"moe_backend": "triton"}),
        (
            "baseline",
            {"gpu_memory_utilization": 0.8500000000000001},
            {"gpu_memory_utilization": 0.8500000000000001},
        ),
        # speculative decoding off: no block, whatever else of it the point sets
        ("baseline", {"speculative.method": "off", "speculative.num_speculative_tokens": 3}, {"spec": None}),
        ("nospec", {"speculative.method": "off", "speculative.num_speculative_tokens": 3}, {"spec": None}),
        # the baseline's block changed field by field, its other fields kept
        (
            "baseline",
            {"speculative.method": "ngram", "speculative.num_speculative_tokens": 3},
            {"spec": ("ngram", 3)},
        ),
        ("baseline", {"speculative.method": "ngram"}, {"spec": ("ngram", 7)}),
        ("baseline", {"speculative.num_speculative_tokens": 5}, {"spec": ("dspark", 5)}),
        # an integer field: a whole float is the integer, a fraction no candidate (was: 100.0 and 100.7
        # candidates that the schema refused in the overrides and the file; 3.7 tokens truncated to 3)
        ("baseline", {"max_num_seqs": 100.0}, {"max_num_seqs": 100}),
        ("nospec", {"layout": "tp4_dp2", "max_num_batched_tokens": 8192.0}, {"max_num_batched_tokens": 8192}),
        ("baseline", {"max_num_seqs": 100.7}, REFUSED),
        ("baseline", {"speculative.num_speculative_tokens": 3.7}, REFUSED),
        # turning speculative decoding on for a baseline without it (was: a candidate and a winner's file,
        # but overrides Hydra cannot merge into the baseline's null block: a failed launch each)
        ("nospec", {"speculative.method": "ngram", "speculative.num_speculative_tokens": 3}, REFUSED),
        ("nospec", {"speculative.num_speculative_tokens": 3}, REFUSED),
        # any vLLM flag (extra_args.<flag>, issue 43 item 6): added to the baseline's extra_args in vLLM's
        # dashed spelling, or set under the baseline's own key when it sets the flag in either spelling
        (
            "baseline",
            {"extra_args.block_size": 32, "extra_args.enable_prefix_caching": False},
            {"extra_args": {"block-size": 32, "enable-prefix-caching": False}},
        ),
        (
            "caching",
            {"extra_args.enable-prefix-caching": False, "max_num_seqs": 64},
            {"extra_args": {"enable_prefix_caching": False, "block-size": 16}, "max_num_seqs": 64},
        ),
        (
            "caching",
            {"extra_args.block_size": 128},
            {"extra_args": {"enable_prefix_caching": True, "block-size": 128}},
        ),
        ("baseline", {"extra_args.async_scheduling": True}, {"extra_args": {"async-scheduling": True}}),
        ("baseline", {"kv_cache_dtype": "fp8_e5m2"}, {"kv_cache_dtype": "fp8_e5m2"}),
    ],
)
def test_the_candidate_the_overrides_and_the_winners_file_are_one_candidate(
    conf: Path, base: str, point: dict[str, Any], expected: dict[str, Any] | str
) -> None:
    forms = _forms(conf, base, point)
    if expected == REFUSED:
        assert forms == [REFUSED] * 3
        return
    assert REFUSED not in forms
    assert forms[0] == forms[1] == forms[2], forms
    got = forms[0]
    assert isinstance(got, dict) and isinstance(expected, dict)
    for field, value in expected.items():
        if field == "spec":
            spec = got["speculative"]
            assert (None if spec is None else (spec["method"], spec["num_speculative_tokens"])) == value
        else:
            assert got[field] == value and type(got[field]) is type(value)


@pytest.mark.parametrize(
    ("point", "refused"),
    [
        ({"max_num_seqs": 100.7}, "max_num_seqs 100.7: the field takes whole numbers"),
        (
            {"speculative.method": "ngram", "speculative.num_speculative_tokens": 3},
            "runs without speculative",
        ),
        ({"speculative.method": "off", "speculative.num_speculative_tokens": 3}, None),
    ],
)
def test_a_point_that_cannot_be_encoded_is_pruned_with_the_reason(
    conf: Path, point: dict[str, Any], refused: str | None
) -> None:
    cfg = _composed(conf, ["candidate@baseline=nospec", "candidate=nospec"])
    why = point_refusal(cfg, Space(dimensions=(), layouts=LAYOUTS, fixed={}), point, None)
    assert (why is None) if refused is None else (why is not None and refused in why), why


@pytest.mark.parametrize(
    ("point", "off"),
    [
        ({"speculative.method": "off"}, True),
        ({"speculative.method": "off", "speculative.num_speculative_tokens": 5}, True),
        ({"speculative.method": "ngram"}, False),
        ({"speculative.num_speculative_tokens": 5}, False),  # the baseline's block, its tokens changed
        ({}, False),
    ],
)
def test_one_rule_says_a_point_turns_speculative_decoding_off(point: dict[str, Any], off: bool) -> None:
    assert speculative_off(point) is off


def _is_int(hint: Any) -> bool:
    return hint is int or int in typing.get_args(hint)


def test_the_integer_fields_are_the_schemas_integer_fields() -> None:
    candidate = typing.get_type_hints(CandidateConfig)
    speculative = typing.get_type_hints(SpeculativeConfig)
    whole = set()
    for field in SEARCH_FIELDS:
        if field == "layout":
            continue
        if field.startswith("speculative."):
            hint = speculative[field.removeprefix("speculative.")]
        else:
            hint = candidate[field]
        if _is_int(hint):
            whole.add(field)
    assert whole == set(INTEGER_FIELDS)
