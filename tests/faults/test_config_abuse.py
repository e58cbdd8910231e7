"""Fault matrix, config abuse: hostile names, flags and YAML refused at compose time, file and field named.

Each case writes one candidate file into a copy of ``conf/`` and composes it as a sweep would; the error
must name the file and the field, and (one subprocess case) nothing is started. Rows of
``docs/reliability.md``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.paths import CONF_DIR, PROJECT_ROOT
from orchestrator.config.candidate_names import check_candidate_names
from orchestrator.config.compose import ConfigLocation, load
from orchestrator.config.guard import (
    MAX_YAML_BYTES,
    config_roots,
    expanded_nodes,
    flag_problem,
    used_yaml_files,
)
from orchestrator.doctor import doctor
from orchestrator.plan import plan

BOMB = """\
defaults:
  - baseline
  - _self_
name: bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
"""


def conf_with(tmp_path: Path, name: str, body: str) -> Path:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "candidate" / f"{name}.yaml").write_text(body)
    return conf


def candidate(lines: str) -> str:
    """A candidate file extending the baseline with ``lines``."""
    return f"defaults:\n  - baseline\n  - _self_\n{lines}\n"


def refusal(tmp_path: Path, body: str) -> str:
    conf = conf_with(tmp_path, "evil", body)
    with pytest.raises(ConfigError) as info:
        load(["candidate=evil"], config_dir=conf)
    return str(info.value)


@pytest.mark.parametrize(
    "name",
    ["../../etc", "a/b", "..", "x;rm -rf ~", "$(id)", "`id`", "a b", "x" * 200, ".hidden", "a\\b"],
    ids=[
        "dotdot-path",
        "slash",
        "dotdot",
        "semicolon",
        "subshell",
        "backtick",
        "space",
        "200-chars",
        "dot",
        "bslash",
    ],
)
def test_a_candidate_name_unfit_for_a_directory_is_refused(tmp_path: Path, name: str) -> None:
    text = refusal(tmp_path, candidate(f"name: {name!r}"))
    assert "candidate/evil.yaml: name = " in text and "it names a directory" in text


@pytest.mark.parametrize(
    ("extra", "field", "why"),
    [
        ("port: 9000", "port", "not --port"),
        ("served_model_name: other", "served_model_name", "not --served-model-name"),  # vLLM maps _ to -
        ("po: 9000", "po", "not --port"),  # argparse expands an unambiguous prefix
        ("host: 0.0.0.0", "host", "not --host"),
        ("model: /other/model", "model", "not --model"),
        ("config: /tmp/flags.yaml", "config", "not --config"),  # a second file of flags
        ("uds: /tmp/vllm.sock", "uds", "not --uds"),
        ("api-key: sk-1", "api-key", "not --api-key"),
        ("max-loras: '--port=9000'", "max-loras", "would be read as another flag"),
        ("'max-loras 1 --port': 2", "max-loras 1 --port", "a flag name"),
        ("'x=1': 2", "x=1", "a flag name"),
        ('lora-modules: "a\\n--port 9"', "lora-modules", "one-line value"),
    ],
)
def test_a_flag_that_would_move_the_service_or_smuggle_another_is_refused(
    tmp_path: Path, extra: str, field: str, why: str
) -> None:
    text = refusal(tmp_path, candidate(f"name: evil\nextra_args:\n  {extra}"))
    assert f"candidate/evil.yaml: candidate.extra_args.{field} = " in text, text
    assert why in text, text


@pytest.mark.parametrize(
    ("name", "value"),
    [("max-loras", 4), ("swap-space", "-1"), ("max_num_partial_prefills", 2), ("hf-overrides", {"a": "-x"})],
)
def test_ordinary_extra_flags_pass(name: str, value: object) -> None:
    assert flag_problem(name, value) is None


def test_an_anchor_bomb_is_refused_before_hydra_reads_it(tmp_path: Path) -> None:
    conf = conf_with(tmp_path, "bomb", BOMB)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load(["candidate=bomb"], config_dir=conf)
    assert time.monotonic() - started < 10
    text = str(info.value)
    assert "candidate/bomb.yaml: <anchors>" in text and "aliases expand to more than" in text


HUGE = candidate("name: huge\n# " + "x" * MAX_YAML_BYTES)


def test_a_huge_config_file_is_refused_by_the_commands_that_select_it_only(tmp_path: Path) -> None:
    conf = conf_with(tmp_path, "huge", HUGE)
    with pytest.raises(ConfigError, match=r"huge\.yaml: <file> = '\d+ bytes': a config file of at most"):
        load(["candidate=huge"], config_dir=conf)
    cfg, _ = load(["candidate=tp4_dp2"], config_dir=conf)  # the huge file is not read: nothing blocks
    assert cfg.candidate.name == "tp4_dp2"


def test_one_huge_candidate_in_a_config_dir_blocks_only_the_plans_that_select_it(tmp_path: Path) -> None:
    extra = tmp_path / "mine"
    (extra / "candidate").mkdir(parents=True)
    (extra / "candidate" / "huge.yaml").write_text(HUGE)
    (extra / "candidate" / "mine.yaml").write_text(candidate("name: mine\nmax_num_seqs: 64"))
    where = ConfigLocation(config_dir=str(extra))
    assert [p.option for p in plan(["candidate=mine"], where)] == ["mine"]
    assert [p.option for p in plan(["candidate=tp4_dp2"], where)] == ["tp4_dp2"]
    for selecting in (["candidate=huge"], ["candidate=glob(*)"]):
        with pytest.raises(ConfigError, match=r"mine/candidate/huge\.yaml: <file> = '\d+ bytes'"):
            plan(selecting, where)


@pytest.mark.parametrize(
    ("argv", "read", "not_read"),
    [
        ([], ["config", "candidate/baseline", "host/sim", "workload/serial", "gates/default"],
         ["candidate/tp4_dp2", "host/cpu", "experiment/demo", "slo/interactive"]),
        (["candidate=tp4_dp2"], ["candidate/tp4_dp2", "candidate/baseline"], ["candidate/eplb"]),
        (["candidate=tp4_dp2,eplb"], ["candidate/tp4_dp2", "candidate/eplb"], ["candidate/mega_moe"]),
        (["-m", "candidate=glob(tp*)"], ["candidate/tp4_dp2", "candidate/mega_moe"], []),  # any: all read
        (["host=cpu"], ["host/cpu"], ["host/sim"]),
        (["+experiment=demo"], ["experiment/demo", "slo/interactive"], ["host/cpu"]),
        (["candidate@baseline=tp4_dp2", "run.repeats=1"], ["candidate/tp4_dp2", "candidate/baseline"],
         ["candidate/eplb"]),
    ],
)  # fmt: skip
def test_the_files_a_composition_may_read(argv: list[str], read: list[str], not_read: list[str]) -> None:
    used = {str(p.relative_to(CONF_DIR).with_suffix("")) for p in used_yaml_files([CONF_DIR], argv)}
    assert set(read) <= used, sorted(used)
    assert not set(not_read) & used, sorted(used)


def test_alias_expansion_is_counted_without_expanding() -> None:
    import yaml

    assert expanded_nodes(yaml.compose(BOMB), limit=50_000) == 50_001
    assert expanded_nodes(yaml.compose("a: &x [1, 2]\nb: *x\n"), limit=100) == 9


def test_config_roots_follow_the_search_path_and_config_dir() -> None:
    roots = config_roots(["-m", "hydra.searchpath=[file://tests/x,file:///abs/y]", "--config-dir", "/c"])
    assert roots == [CONF_DIR, Path("tests/x"), Path("/abs/y"), Path("/c")]


@pytest.mark.integration
def test_the_sweep_command_refuses_a_bomb_and_starts_nothing(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    (extra / "candidate").mkdir(parents=True)
    (extra / "candidate" / "bomb.yaml").write_text(BOMB)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "-m", "candidate=bomb", f"hydra.searchpath=[file://{extra}]",
         f"run.sweeps_dir={tmp_path / 'sweeps'}"],
        cwd=PROJECT_ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert time.monotonic() - started < 60
    assert proc.returncode == ConfigError.exit_code, proc.stdout + proc.stderr
    assert "bomb.yaml: <anchors>" in proc.stderr
    assert not (tmp_path / "sweeps").exists(), "nothing was opened or started"


@pytest.mark.parametrize(
    ("body", "where", "said"),
    [
        (candidate("name: bad\nmax_num_seqs: [1, 2"), ":6:1", "expected ',' or ']', but got '<stream end>'"),
        (candidate("name: bad\n  max_num_seqs: 8"), ":5:15", "mapping values are not allowed here"),
        (candidate("name: bad\nextra_args: {a: 1"), ":6:1", "begun at line 5, column 13"),
        ("defaults:\n- baseline\n\t- _self_\nname: bad\n", ":3:1", "that cannot start any token"),
    ],
    ids=["unclosed-list", "bad-indent", "unclosed-mapping", "tab"],
)
def test_a_yaml_syntax_error_names_file_line_and_column(
    tmp_path: Path, body: str, where: str, said: str
) -> None:
    text = refusal(tmp_path, body)
    assert f"candidate/evil.yaml{where}: <syntax> = " in text, text
    assert said in text, text
    assert "every candidate needs a name" not in text


@pytest.mark.parametrize("command", ["plan", "doctor", "check_candidate_names"])
def test_plan_and_doctor_report_a_yaml_syntax_error_as_the_parser_does(tmp_path: Path, command: str) -> None:
    """They check the candidates' names before composing; a file the parser refuses has no name to read."""
    conf = conf_with(tmp_path, "evil", candidate("name: evil\nmax_num_seqs: [64"))
    run: dict[str, Callable[[], object]] = {
        "plan": lambda: plan(["candidate=evil"], ConfigLocation(config_path=str(conf))),
        "doctor": lambda: doctor(["candidate=evil"], ConfigLocation(config_path=str(conf))),
        "check_candidate_names": lambda: check_candidate_names([conf]),
    }
    with pytest.raises(ConfigError) as info:
        run[command]()
    text = str(info.value)
    assert "candidate/evil.yaml:6:1: <syntax> = " in text, text
    assert "expected ',' or ']', but got '<stream end>'" in text, text
    assert "every candidate needs a name" not in text


def test_a_missing_defaults_parent_names_the_file_that_asked_for_it(tmp_path: Path) -> None:
    text = refusal(tmp_path, "defaults:\n  - basline\n  - _self_\nname: evil\n")
    assert "candidate/evil.yaml: defaults = 'basline': one of baseline, " in text, text
    assert "(no candidate/basline.yaml in " in text
    assert "fix the file named above" in text
