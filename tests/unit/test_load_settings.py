"""The run's salt and load settings in every summary: older summaries stay readable, and the report shows
the command line that re-runs a profile by hand."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.files import read_model, write_model
from contracts.results import LoadSettings, ProfileSummary
from contracts.schema import GauntletConfig, RunConfig
from report.rerun import rerun_section
from tests.unit.fakes import summary
from tests.unit.load_fixtures import workload

SETTINGS = LoadSettings(
    base_url="http://127.0.0.1:8000",
    served_model="deepseek-v4-flash",
    salt="gauntlet-0123456789abcdef",
    scale=1.0,
    time_scale=20.0,
    prompts_dir="/x/conf/workload",
    workload=workload(name="decode_heavy", concurrency=128),
)


def test_settings_round_trip_with_the_workload_as_run(tmp_path: Path) -> None:
    written = summary("baseline", "decode_heavy", 1, "sha256:f").model_copy(update={"settings": SETTINGS})
    write_model(tmp_path / "summary.json", written)
    back = read_model(tmp_path / "summary.json", ProfileSummary)
    assert back.settings == SETTINGS
    assert back.settings is not None and back.settings.workload.concurrency == 128
    assert json.loads((tmp_path / "summary.json").read_text())["settings"]["salt"] == SETTINGS.salt


def test_a_summary_written_before_settings_were_recorded_still_reads(tmp_path: Path) -> None:
    raw = json.loads(summary("baseline", "short", 1, "sha256:f").model_dump_json())
    raw.pop("settings")
    (tmp_path / "summary.json").write_text(json.dumps(raw))
    assert read_model(tmp_path / "summary.json", ProfileSummary).settings is None


def test_the_rerun_command_names_the_summary_and_the_server() -> None:
    line = SETTINGS.rerun_command("sweeps/x/candidates/baseline/decode_heavy/r1/summary.json")
    assert line == (
        "python -m load sweeps/x/candidates/baseline/decode_heavy/r1/summary.json --base-url http://127.0.0.1:8000"
    )
    assert SETTINGS.rerun_command("s.json", base_url="http://gpu7:8000").endswith(
        "--base-url http://gpu7:8000"
    )


def _sweep(tmp_path: Path, settings: LoadSettings | None) -> tuple[Path, GauntletConfig]:
    cfg = GauntletConfig(run=RunConfig(profiles=["short", "decode_heavy"]))
    for profile in ("short", "decode_heavy"):
        s = summary("baseline", profile, 1, "sha256:f").model_copy(update={"settings": settings})
        write_model(tmp_path / "candidates" / "baseline" / profile / "r1" / "summary.json", s)
    return tmp_path, cfg


def test_the_report_shows_how_to_rerun_a_loaded_profile(tmp_path: Path) -> None:
    sweep, cfg = _sweep(tmp_path, SETTINGS)
    cfg.gates.loaded_profiles = ["decode_heavy"]
    text = rerun_section(sweep, cfg, "baseline")
    assert "## Re-running a profile by hand" in text
    assert f"python -m load {sweep}/candidates/baseline/decode_heavy/r1/summary.json --base-url" in text
    assert "gauntlet-0123456789abcdef" in text


def test_no_section_for_a_sweep_without_recorded_settings(tmp_path: Path) -> None:
    sweep, cfg = _sweep(tmp_path, None)
    assert rerun_section(sweep, cfg, "baseline") == ""
    assert rerun_section(tmp_path / "missing", cfg, "baseline") == ""
