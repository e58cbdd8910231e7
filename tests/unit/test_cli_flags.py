"""Hydra's command-line flags on every command (table-driven): the composing commands (the sweep, plan,
list) behave as a ``@hydra.main`` app, the commands that read a recorded sweep (rollback, stop, status,
judge, report) give each flag the meaning orchestrator/cli.py documents, without running anything."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from contracts.paths import CONF_DIR
from orchestrator.__main__ import main
from tests.unit.gates_fixtures import sweep_config, write_config

Capture = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A user's config dir outside the repo, a copy of conf/ (for -cp) and a recorded sweep."""
    root = tmp_path_factory.mktemp("world")
    user = root / "my-conf"
    (user / "candidate").mkdir(parents=True)
    (user / "host").mkdir()
    (user / "candidate" / "mine_a.yaml").write_text(
        "defaults:\n  - baseline\n  - _self_\nname: mine_a\ndescription: my first\nmax_num_seqs: 64\n"
    )
    (user / "host" / "mysim.yaml").write_text(
        "# My lab's simulated box\n"
        + (CONF_DIR / "host" / "sim.yaml").read_text().replace("name: sim", "name: mysim")
    )
    (user / "myconf.yaml").write_text("defaults:\n  - config\n  - _self_\nrun:\n  repeats: 5\n")
    conf_copy = root / "conf-copy"
    shutil.copytree(CONF_DIR, conf_copy)
    sim = conf_copy / "host" / "sim.yaml"
    sim.write_text(sim.read_text().replace("(simulated)", "(copied conf)"))
    sweeps = root / "sweeps"
    sweep = sweeps / "20261203-010101"
    write_config(sweep, sweep_config())
    (sweep / "journal.jsonl").write_text("")
    hydra_node = {
        "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"},
        "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
        "sweep": {"dir": "${run.sweeps_dir}/x"},
        "runtime": {
            "config_sources": [
                {"path": str(CONF_DIR), "schema": "file", "provider": "main"},
                {"path": str(user), "schema": "file", "provider": "command-line"},
            ],
            "choices": {"candidate": "mine_a", "host": "sim"},
        },
    }
    config = yaml.safe_load((sweep / "config.yaml").read_text())
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra_node, **config}))
    (sweep / "overrides.txt").write_text("candidate=glob(*)\n")
    (sweeps / "latest").symlink_to(sweep.name)
    return {"user": user, "conf_copy": conf_copy, "sweeps": sweeps, "sweep": sweep}


def fill(args: list[str], world: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in world.items()}) for a in args]


def run(capfd: Capture, argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # Hydra's own exits (--help of the sweep, argparse errors)
        code = exc.code if isinstance(exc.code, int) else 1
    except ValueError as exc:  # Hydra's own usage errors of a @hydra.main app (the sweep)
        code, message = 1, str(exc)
    else:
        message = ""
    out, err = capfd.readouterr()
    return code, out + err + message


# ------------------------------------------------------------------------ the composing commands

#: (flags, what the output must hold) for plan, list and the sweep alike.
COMPOSING: list[tuple[list[str], list[str]]] = [
    (["--config-dir", "{user}", "--cfg", "job", "-p", "candidate", "candidate=mine_a"], ["name: mine_a"]),
    (["-cd", "{user}", "--cfg", "all", "--resolve", "host=mysim"], ["name: mysim", "hydra:"]),
    (["-cd", "{user}", "--cfg", "hydra", "-p", "hydra.runtime.choices", "host=mysim"], ["host: mysim"]),
    (["-cd", "{user}", "-cn", "myconf", "--cfg", "job", "-p", "run"], ["repeats: 5"]),
    (["--config-name", "myconf", "--config-dir", "{user}", "-c", "job", "-p", "run"], ["repeats: 5"]),
    (["-cp", "{conf_copy}", "--cfg", "job", "-p", "host"], ["(copied conf)"]),
    (["--config-path", "{conf_copy}", "--cfg", "job", "-p", "host"], ["(copied conf)"]),
    (["-cd", "{user}", "--info", "searchpath"], ["command-line", "file://{user}"]),
    (["-cd", "{user}", "--info", "defaults", "candidate=mine_a"], ["candidate/mine_a"]),
    (["-cd", "{user}", "--help"], ["gauntlet is powered by Hydra", "candidate: baseline", "mine_a"]),
]
PREFIX = {"sweep": [], "plan": ["plan"], "list": ["list"]}


@pytest.mark.parametrize("command", list(PREFIX))
@pytest.mark.parametrize(("flags", "expected"), COMPOSING)
def test_hydra_flags_on_composing_commands(
    command: str, flags: list[str], expected: list[str], world: dict[str, Path], capfd: Capture
) -> None:
    code, out = run(capfd, PREFIX[command] + fill(flags, world))
    assert code == 0, out
    for fragment in fill(expected, world):
        assert fragment in out, f"{fragment!r} not in:\n{out}"


@pytest.mark.parametrize("command", list(PREFIX))
def test_resolve_without_cfg_is_refused_as_in_hydra(command: str, capfd: Capture) -> None:
    code, out = run(
        capfd, [*PREFIX[command], "--resolve", "--info"] if command == "sweep" else [command, "--resolve"]
    )
    assert code != 0
    assert "--resolve" in out


@pytest.mark.parametrize("command", ["plan", "list"])
def test_a_missing_config_dir_is_named(command: str, tmp_path: Path, capfd: Capture) -> None:
    code, out = run(capfd, [command, "-cd", str(tmp_path / "nope")])
    assert code == 2
    assert f"--config-dir: config_dir = '{tmp_path / 'nope'}': an existing directory" in out


def test_plan_picks_up_the_user_dirs_candidates(world: dict[str, Path], capfd: Capture) -> None:
    code, out = run(capfd, ["plan", "-cd", str(world["user"]), "host=mysim"])
    assert code == 0, out
    assert "6 candidate(s) on host 'mysim'" in out
    assert "mine_a\n" in out and "--max-num-seqs 64" in out
    code, out = run(capfd, ["plan", "-cd", str(world["user"]), "candidate=glob(mine_*)"])
    assert code == 0, out
    assert "1 candidate(s)" in out and "mine_a" in out


def test_plan_help_says_what_plan_does(capfd: Capture) -> None:
    code, out = run(capfd, ["plan", "--help"])
    assert code == 0
    assert out.startswith("usage: python -m orchestrator plan [hydra flags] [overrides]")
    assert "== Configuration groups ==" in out


# ------------------------------------------------------------------------ list


def test_list_shows_every_group_with_description_and_path(world: dict[str, Path], capfd: Capture) -> None:
    code, out = run(capfd, ["list", "-cd", str(world["user"])])
    assert code == 0, out
    counted = ("workload", "slo", "host", "experiment", "search")
    shipped = {g: len(list((CONF_DIR / g).glob("*.yaml"))) for g in counted}
    groups = (
        "candidate (6)",
        f"host ({shipped['host'] + 1})",  # the user's mysim
        "service (2)",
        f"workload ({shipped['workload']})",
        f"experiment ({shipped['experiment']})",
        f"search ({shipped['search']})",
    )
    for group in (*groups, "gates (1)", f"slo ({shipped['slo']})"):
        assert group in out
    assert "gauntlet_slurm" in out and "conf/hydra/launcher/gauntlet_slurm.yaml" in out
    lines = out.splitlines()
    at = lines.index("  mine_a              my first")
    assert lines[at + 1].strip() == str(world["user"] / "candidate" / "mine_a.yaml")
    at = next(i for i, line in enumerate(lines) if line.startswith("  mysim"))
    assert "My lab's simulated box" in lines[at]
    assert "  tp4_dp2             TP4 x DP2 instead of TP2 x DP4" in lines
    assert "conf/candidate/tp4_dp2.yaml" in out


def test_list_one_group_and_an_unknown_one(capfd: Capture) -> None:
    code, out = run(capfd, ["list", "host"])
    assert code == 0
    hosts = len(list((CONF_DIR / "host").glob("*.yaml")))
    assert out.startswith(f"host ({hosts}): choose with host=OPTION") and "candidate (" not in out
    code, out = run(capfd, ["list", "hosts"])
    assert code == 2 and "unknown group hosts" in out


# ------------------------------------------------------------------------ commands on a recorded sweep

SWEEP_DIR_COMMANDS = ["rollback", "stop", "status", "judge", "report"]

#: (flags, exit code, what the output must hold); none of these runs the command itself.
RECORDED: list[tuple[list[str], int, list[str]]] = [
    (["--cfg", "job", "{sweep}"], 0, ["served_model_name: deepseek-v4-flash"]),
    (["-c", "hydra", "{sweep}"], 0, ["hydra:", "BasicSweeper"]),
    (["--cfg", "all", "--resolve", "{sweep}"], 0, ["hydra:", "dir: sweeps/x", "service:"]),
    (["--cfg", "job", "--package", "run", "{sweep}"], 0, ["# @package run", "repeats: 3"]),
    # --info takes an optional value (Hydra's parser), so SWEEP_DIR goes first or after `--info all`.
    (
        ["{sweep}", "--info"],
        0,
        ["config search path", "file://{user}", "candidate", "mine_a", "BasicLauncher"],
    ),
    (["--info", "all", "{sweep}"], 0, ["group choices", "launcher:"]),
    (["-i", "searchpath", "{sweep}"], 0, ["command-line", "file://{user}"]),
    # No SWEEP_DIR: the config flags and overrides locate the latest sweep (run.sweeps_dir).
    (["--config-dir", "{user}", "run.sweeps_dir={sweeps}", "--info", "searchpath"], 0, ["sweep: {sweep}"]),
    (["-cd", "{user}", "-cn", "myconf", "run.sweeps_dir={sweeps}", "--info", "config"], 0, ["{sweep}"]),
    (["-cp", "{conf_copy}", "run.sweeps_dir={sweeps}", "--cfg", "job", "-p", "host.name"], 0, ["sim"]),
    (
        ["--config-path", "{conf_copy}", "--config-name", "config", "run.sweeps_dir={sweeps}", "-i"],
        0,
        ["{sweep}"],
    ),
    # With a SWEEP_DIR the config flags change nothing, and the command says so.
    (["-cd", "{user}", "--cfg", "job", "-p", "run.repeats", "{sweep}"], 0, ["change nothing here", "3"]),
    (["--help"], 0, ["usage: python -m orchestrator", "-cd, --config-dir DIR", "--cfg job|hydra|all"]),
    (["-h"], 0, ["Hydra flags"]),
    (["-m", "{sweep}"], 2, ["-m starts or completes a Hydra run"]),
    (["--shell-completion", "{sweep}"], 2, ["--shell-completion starts or completes a Hydra run"]),
    (["--resolve", "{sweep}"], 2, ["--resolve works only together with --cfg"]),
    (["--cfg", "job", "{sweep}", "{sweeps}"], 2, ["one SWEEP_DIR at most"]),
    (["--cfg", "nope", "{sweep}"], 2, ["invalid choice: 'nope'"]),
]


@pytest.mark.parametrize("command", SWEEP_DIR_COMMANDS)
@pytest.mark.parametrize("case", RECORDED)
def test_hydra_flags_on_commands_that_read_a_sweep(
    command: str, case: tuple[list[str], int, list[str]], world: dict[str, Path], capfd: Capture
) -> None:
    flags, code, expected = case
    got, out = run(capfd, [command, *fill(flags, world)])
    assert got == code, out
    for fragment in fill(expected, world):
        assert fragment in out, f"{fragment!r} not in:\n{out}"
    assert "state:" not in out and "verdicts written" not in out  # nothing ran


@pytest.mark.parametrize("command", SWEEP_DIR_COMMANDS)
def test_without_flags_nothing_is_parsed_by_hydra(
    command: str, tmp_path: Path, capfd: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain SWEEP_DIR goes straight to the command (which does not load Hydra)."""
    seen: list[list[str]] = []
    import orchestrator.__main__ as entry

    def fake(cmd: str) -> Callable[[list[str]], int]:
        def handler(args: list[str]) -> int:
            seen.append([cmd, *args])
            return 0

        return handler

    monkeypatch.setattr(entry, "_handler", fake)
    assert main([command, str(tmp_path)]) == 0
    assert seen == [[command, str(tmp_path)]]
    monkeypatch.setattr("orchestrator.config.compose.parse_hydra_args", None)  # would fail if called
    assert main([command]) == 0
    assert seen[-1] == [command]


def test_a_flag_runs_the_command_on_the_located_sweep(
    world: dict[str, Path], capfd: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orchestrator.__main__ as entry

    seen: list[list[str]] = []

    def handler(args: list[str]) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(entry, "_handler", lambda cmd: handler)
    assert main(["rollback", "-cd", str(world["user"]), f"run.sweeps_dir={world['sweeps']}"]) == 0
    assert seen == [[str(world["sweep"].resolve())]]
    capfd.readouterr()


def test_the_recorded_hydra_node_is_json_free_yaml(world: dict[str, Path], capfd: Capture) -> None:
    code, out = run(capfd, ["status", "--cfg", "hydra", str(world["sweep"])])
    assert code == 0
    parsed = yaml.safe_load(out)
    assert parsed["hydra"]["runtime"]["choices"] == {"candidate": "mine_a", "host": "sim"}
    assert json.dumps(parsed)  # plain data, printable as Hydra prints --cfg


# ------------------------------------------------------------------------ shell completion (the sweep)


@pytest.mark.parametrize(
    ("argv", "line", "expected"),
    [
        (
            ["-sc", "query=bash"],
            "gauntlet -cd /my/conf -m candidate=",
            ["-cd", "/my/conf", "-sc", "query=bash"],
        ),
        (
            ["-sc", "query=bash"],
            "gauntlet --config-dir /a -cn x c=",
            ["-cn", "x", "--config-dir", "/a", "-sc", "query=bash"],
        ),
        (["-sc", "query=bash"], None, ["-sc", "query=bash"]),
        (["-sc", "install=bash"], "gauntlet -cd /a", ["-sc", "install=bash"]),
        (["-cd", "/b", "-sc", "query=bash"], "gauntlet -cd /b x=", ["-cd", "/b", "-sc", "query=bash"]),
    ],
)
def test_completion_takes_the_location_flags_from_the_line(
    argv: list[str], line: str | None, expected: list[str]
) -> None:
    from orchestrator.app.entry import completion_argv

    assert completion_argv(argv, line) == expected


def test_shell_completion_installs_hydras_bash_script(capfd: Capture) -> None:
    code, out = run(capfd, ["-sc", "install=bash"])
    assert code == 0, out
    assert "hydra_bash_completion()" in out
    assert "complete -o nospace -o default -F hydra_bash_completion" in out


@pytest.mark.parametrize(
    "case",
    [
        ("gauntlet -m candidate=", ["candidate=baseline", "candidate=tp4_dp2"], ["candidate=mine_a"]),
        ("gauntlet -cd {user} -m candidate=", ["candidate=mine_a", "candidate=tp4_dp2"], []),
        ("gauntlet -cd {user} -m host=", ["host=mysim", "host=sim"], []),
        ("gauntlet -m run.retained", ["run.retained_after_sweep="], []),
    ],
)
def test_shell_completion_queries_the_groups_of_the_search_path(
    case: tuple[str, list[str], list[str]],
    world: dict[str, Path],
    capfd: Capture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What bash asks on the sweep: `gauntlet -sc query=bash` with the line in COMP_LINE and none of its
    flags; the line's -cd still adds that dir's groups."""
    line, expected, absent = case
    monkeypatch.setenv("COMP_LINE", fill([line], world)[0])
    code, out = run(capfd, ["-sc", "query=bash"])
    assert code == 0, out
    words = out.split()
    for word in expected:
        assert word in words, f"{word!r} not in {words}"
    for word in absent:
        assert word not in words
