"""No secret in a URL, nor in a value read from the environment (issue 42, item 11).

A URL's password (``search.storage: postgresql+psycopg://team:pw@db/g``) is written nowhere: the sweep moves
it out of every composition into its own environment (``<from $GAUNTLET_SECRET_SEARCH_STORAGE>`` in
config.yaml, Hydra's records and the launcher's pickled jobs) and the search opens its storage with it put
back, in memory; on the command line it is refused (every user of the host reads a command line). A value
read through ``${oc.env:VAR}`` is a secret by what it holds (a URL with a password) or where it goes (an
``env`` key that looks secret: ``HF_TOKEN: ${oc.env:HFTOK}``), whatever the variable's name. The sweep
end to end, against a PostgreSQL that asks for the password: tests/integration/test_storage_secret.py.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import optuna
import pytest
from omegaconf import DictConfig, OmegaConf

import orchestrator.search.study as study_module
from contracts.errors import ConfigError, ConfigProblem
from contracts.search import SearchConfig
from contracts.secrets import conceal_url, only_password_references, redacted, url_password
from launch.command import child_env
from launch.spec import render_spec
from orchestrator.app import entry
from orchestrator.app.controller import explain
from orchestrator.app.sweeper import conceal, save_config
from orchestrator.config.compose import ConfigLocation, compose_config, to_typed
from orchestrator.config.secrets import revealed
from orchestrator.search.study import TrialTicket, open_study
from orchestrator.servers.seams import say_stderr
from tests.unit.composed import load
from tests.unit.fakes import FakeSupervisor
from tests.unit.test_controller import run_sweep

PASSWORD = "S3cr3tPw0rd"  # what no file, message or pickle may show
URL = f"postgresql+psycopg://team:{PASSWORD}@db.example:5432/gauntlet"
TOKEN = "hf_4d1f9c0ffee"
VARIABLE = "GAUNTLET_SECRET_SEARCH_STORAGE"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFTOK", TOKEN)  # a secret by where it goes, not by its name
    monkeypatch.setenv("TEAM_DB", URL)  # a secret by what it holds
    monkeypatch.delenv(VARIABLE, raising=False)


@pytest.mark.parametrize(
    ("value", "password", "shown", "concealed"),
    [
        (URL, PASSWORD, "postgresql+psycopg://team:***@db.example:5432/gauntlet",
         "postgresql+psycopg://team:<from $V>@db.example:5432/gauntlet"),
        ("mysql://u:p/w:x@h/db", "p/w:x", "mysql://u:***@h/db", "mysql://u:<from $V>@h/db"),  # as SQLAlchemy
        ("postgresql://team@db/g", None, "postgresql://team@db/g", None),  # no password: libpq's PGPASSWORD
        ("postgresql://team:@db/g", None, "postgresql://team:@db/g", None),  # an empty one
        ("postgresql://team:<from $PGPW>@db/g", None, "postgresql://team:<from $PGPW>@db/g", None),  # a name
        ("sqlite:////tmp/study.db", None, "sqlite:////tmp/study.db", None),
        ("no redis://:pw@cache:6379/0 (refused)", "pw", "no redis://:***@cache:6379/0 (refused)",
         "no redis://:<from $V>@cache:6379/0 (refused)"),
    ],
)  # fmt: skip
def test_a_urls_password_is_found_redacted_and_concealed(
    value: str, password: str | None, shown: str, concealed: str | None
) -> None:
    assert url_password(value) == password
    assert redacted(value) == shown
    assert conceal_url(value, "V") == ((concealed, password) if concealed is not None else None)
    if concealed is not None:
        assert only_password_references(concealed) and url_password(concealed) is None


#: Overrides that carry a URL's password: refused before Hydra reads (or records) anything.
ON_THE_COMMAND_LINE = [
    f"search.storage={URL}",
    f"+search.storage={URL}",
    f"search={{storage: '{URL}'}}",
    f"+service.env.DATABASE_URL={URL}",
]


@pytest.mark.parametrize("override", ON_THE_COMMAND_LINE)
def test_plan_refuses_a_password_on_the_command_line_and_never_echoes_it(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(["+experiment=demo_search", override])
    text = str(info.value)
    assert PASSWORD not in text and "team:***@db.example" in text, text
    assert "a URL without its password on the command line" in text and "PGPASSWORD or ~/.pgpass" in text


@pytest.mark.parametrize(
    "override",
    ["search.storage=postgresql+psycopg://team@db.example/gauntlet", "search.storage=${oc.env:TEAM_DB}"],
)
def test_a_url_without_a_password_or_from_a_variable_is_no_password_on_the_command_line(
    override: str,
) -> None:
    cfg, _ = load(["+experiment=demo_search", override])
    assert cfg.search is not None and PASSWORD not in cfg.search.storage  # type: ignore[operator]


def test_the_sweep_refuses_a_password_on_the_command_line_before_anything_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # service.port=0, refused by validation too, keeps the parent commit from running a whole search
    code = entry.main(["+experiment=demo_search", f"search.storage={URL}", "service.port=0",
                       f"run.sweeps_dir={tmp_path}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and PASSWORD not in err
    assert "search.storage = 'postgresql+psycopg://team:***@db.example:5432/gauntlet'" in err, err
    assert not any(tmp_path.iterdir())  # no sweep directory: nothing was started or written


@pytest.mark.parametrize(
    ("override", "field", "written"),
    [
        ("+service.env.HF_TOKEN=${oc.env:HFTOK}", ("service", "HF_TOKEN"), "<from $HFTOK>"),
        ("+candidate.env.WANDB_API_KEY=${oc.env:HFTOK}", ("candidate", "WANDB_API_KEY"), "<from $HFTOK>"),
        ("+host.env.DB_PASSWORD=${oc.env:HFTOK}", ("host", "DB_PASSWORD"), "<from $HFTOK>"),
        ("+service.env.DATABASE_URL=${oc.env:TEAM_DB}", ("service", "DATABASE_URL"), "<from $TEAM_DB>"),
        ("+service.env.PLAIN=${oc.env:HFTOK}", ("service", "PLAIN"), TOKEN),  # neither looks secret: a value
    ],
)
def test_a_value_from_the_environment_is_a_secret_by_what_it_holds_or_the_env_key_it_goes_to(
    override: str, field: tuple[str, str], written: str
) -> None:
    cfg, _ = load(["candidate=baseline", override])
    section, name = field
    assert getattr(cfg, section).env[name] == written
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.env[name] == written  # what spec.json and every message show
    value = URL if "TEAM_DB" in override else TOKEN
    assert child_env(spec, os.environ)[name] == value  # the server's environment gets the value, at launch


def test_search_storage_may_come_whole_from_the_environment_and_is_read_back_where_it_is_used() -> None:
    cfg, _ = load(["+experiment=demo_search", "search.storage=${oc.env:TEAM_DB}"])
    assert cfg.search is not None and cfg.search.storage == "<from $TEAM_DB>"
    assert revealed(cfg.search.storage) == URL


def _composed(*overrides: str) -> DictConfig:
    cfg, _ = compose_config(["+experiment=demo_search", *overrides])
    return cfg


@pytest.mark.parametrize(
    ("storage", "written", "moved"),
    [
        (URL, f"postgresql+psycopg://team:<from ${VARIABLE}>@db.example:5432/gauntlet", PASSWORD),
        ("postgresql+psycopg://team@db.example/g", "postgresql+psycopg://team@db.example/g", None),
        ("<from $TEAM_DB>", "<from $TEAM_DB>", None),
        (None, None, None),  # the sqlite file in the sweep directory
    ],
)
def test_the_sweep_moves_a_url_password_out_of_a_composition_into_its_environment(
    storage: str | None, written: str | None, moved: str | None
) -> None:
    cfg = _composed()
    OmegaConf.update(cfg, "search.storage", storage, merge=False)
    environ: dict[str, str] = {}
    assert conceal(cfg, environ) is cfg
    assert OmegaConf.select(cfg, "search.storage") == written
    assert environ == ({VARIABLE: moved} if moved else {})
    assert PASSWORD not in OmegaConf.to_yaml(cfg) + pickle.dumps(cfg).decode("latin-1")
    typed = to_typed(cfg)  # a reference standing as the URL's password is where a secret may stand
    assert typed.search is not None and typed.search.storage == written
    if written is not None:
        expected = URL if written.startswith("<from") else storage
        assert revealed(written, environ={**environ, "TEAM_DB": URL}) == expected


def test_overrides_txt_keeps_an_interpolation_as_typed(tmp_path: Path) -> None:
    """``str()`` of Hydra's override resolves ``${oc.env:TEAM_DB}``: the URL with its password was written."""
    cfg, _ = compose_config(["+experiment=demo_search", "search.storage=${oc.env:TEAM_DB}"])
    hydra = {
        "hydra": {"overrides": {"task": ["+experiment=demo_search", "search.storage=${oc.env:TEAM_DB}"]}}
    }
    full = OmegaConf.create({**OmegaConf.to_container(cfg), **hydra})  # type: ignore[dict-item]
    save_config(full, tmp_path)
    assert (tmp_path / "overrides.txt").read_text().splitlines()[-1] == "search.storage=${oc.env:TEAM_DB}"
    assert PASSWORD not in (tmp_path / "overrides.txt").read_text() + (tmp_path / "config.yaml").read_text()


def test_the_study_is_opened_with_the_password_put_back_and_a_trial_carries_only_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[Any] = []
    real = optuna.create_study

    def create_study(**kw: Any) -> optuna.Study:
        return real(study_name=kw["study_name"], directions=kw["directions"])  # in memory

    class Storage:  # the database's storage (a class: optuna checks isinstance): the URL it connects with
        def __init__(self, url: str, **kw: Any) -> None:
            opened.append(url)

    monkeypatch.setattr(optuna, "create_study", create_study)
    monkeypatch.setattr(optuna.storages, "RDBStorage", Storage)
    monkeypatch.setattr(study_module, "prepare_tables", lambda url: opened.append(revealed(url)))
    monkeypatch.setenv(VARIABLE, PASSWORD)
    concealed = f"postgresql+psycopg://team:<from ${VARIABLE}>@db.example:5432/gauntlet"
    open_study(SearchConfig(name="s", space={}, storage=concealed), concealed)
    assert opened == [URL, URL]  # the tables made, then the study opened: with the password put back
    ticket = TrialTicket(concealed, "s", 1, 8.0, False, "none", 3)  # what a launcher's job pickles
    assert PASSWORD not in pickle.dumps(ticket).decode("latin-1")


def test_a_variable_the_password_moved_to_that_a_job_lacks_is_named_not_guessed() -> None:
    with pytest.raises(ConfigError) as info:
        revealed(f"postgresql://team:<from ${VARIABLE}>@db/g", environ={})
    text = str(info.value)
    assert f"${VARIABLE} set in gauntlet's environment" in text and "search.storage" in text
    assert "PGPASSWORD or ~/.pgpass" in text


@pytest.mark.parametrize(
    "say",
    [
        lambda: str(ConfigProblem(f"command-line override 'x={URL}'", "x", URL, "allowed")),
        lambda: say_stderr(f"could not open the study at {URL}"),
        lambda: explain(RuntimeError(f"cannot connect to {URL}"), ""),
        lambda: explain(RuntimeError(f"cannot connect to {URL}"), "<logdir>"),
    ],
)
def test_a_message_or_log_never_shows_a_urls_password(
    say: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shown = str(say() or "") + capsys.readouterr().err
    logs = "".join(p.read_text() for p in tmp_path.rglob("*.log"))
    assert "team:***@db.example" in shown and PASSWORD not in shown + logs, shown


def test_a_sweep_writes_no_secret_read_from_a_variable_whose_name_does_not_look_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep in-process with fake servers: the values reach each server's environment, no file."""
    monkeypatch.setenv("GAUNTLET_LOCK_DIR", str(tmp_path / "locks"))
    sup = FakeSupervisor()
    code, messages, sweep = run_sweep(
        tmp_path / "sweeps",
        sup,
        "+service.env.HF_TOKEN=${oc.env:HFTOK}",
        "+baseline.env.DATABASE_URL=${oc.env:TEAM_DB}",
        "run.retained_after_sweep=stop",
    )
    assert code == 0, messages
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert (sweep / "config.yaml") in files and any(p.parent.name.startswith("port-") for p in files)
    for path in files:
        text = path.read_bytes().decode("latin-1")
        assert TOKEN not in text and PASSWORD not in text, path
    assert TOKEN not in "\n".join(messages) and PASSWORD not in "\n".join(messages)
    assert "<from $HFTOK>" in (sweep / "config.yaml").read_text()


@pytest.mark.parametrize(
    ("group", "body", "refused"),
    [
        ("candidate", f"env:\n  DATABASE_URL: {URL}\n", "candidate.env.DATABASE_URL"),
        ("candidate", f"extra_args:\n  kv-transfer-url: {URL}\n", "candidate.extra_args.kv-transfer-url"),
        ("candidate", "env:\n  DATABASE_URL: postgresql://team@db/g\n", None),  # no password: a value
        ("search", f"storage: {URL}\n", None),  # read back where it is used: the sweep moves it out
    ],
)
def test_a_url_password_in_a_file_stands_only_where_it_is_read_back(
    tmp_path: Path, group: str, body: str, refused: str | None
) -> None:
    (tmp_path / group).mkdir()
    if group == "candidate":
        head, select = "defaults:\n  - baseline\n  - _self_\nname: mine\n", ["candidate=mine"]
    else:
        head, select = "defaults:\n  - demo\n  - _self_\n", ["+experiment=demo_search", "search=mine"]
    (tmp_path / group / "mine.yaml").write_text(head + body)
    location = ConfigLocation(config_dir=str(tmp_path))
    if refused is None:
        load(select, location=location)
        return
    with pytest.raises(ConfigError) as info:
        load(select, location=location)
    text = str(info.value)
    assert f"{group}/mine.yaml: {refused} = 'postgresql+psycopg://team:***@db.example" in text, text
    assert "no password in a URL" in text and PASSWORD not in text
