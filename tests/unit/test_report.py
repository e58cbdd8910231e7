"""The report, rendered from synthetic sweep directories the judge has judged: decision table, reversal,
drift, recovery, plots; and the report stage on its own, from disk, without the gates."""

from __future__ import annotations

import dataclasses
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.files import read_model, write_model
from contracts.layout import PLOT_RANKING, PLOT_THROUGHPUT, PLOT_TTFT
from contracts.results import CandidateRun, HostProbe, ProfileSummary, RecoveryCheck, RecoveryValidation
from contracts.schema import GauntletConfig
from contracts.sweepdir import record_planned, resume_command
from contracts.verdicts import Comparison
from gates.judge import judge_sweep
from report import ReportModel, build_report, main, plots
from report.markdown import table
from report.model import short_comparison
from tests.unit.gates_fixtures import (
    BASELINE,
    SweepBuilder,
    baseline_like,
    case_study,
    sweep_config,
    with_faster,
    write_config,
)

ROOT = Path(__file__).resolve().parents[2]

FINGERPRINT = "sha256:" + "ab" * 32
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def base_cfg() -> GauntletConfig:
    return sweep_config()


def write_validation(sweep: Path, *, ok: bool = True, fingerprint: str = FINGERPRINT) -> None:
    checks = [
        RecoveryCheck(
            name="fingerprint", ok=fingerprint == FINGERPRINT, expected=FINGERPRINT, observed=fingerprint
        ),
        RecoveryCheck(name="max_model_len", ok=True, expected="131072", observed="131072"),
        RecoveryCheck(
            name="decode_heavy/r1 completed",
            ok=ok,
            expected="128/128",
            observed="128/128" if ok else "120/128",
        ),
    ]
    write_model(
        sweep / "recovery" / "validation.json",
        RecoveryValidation(
            ok=ok,
            candidate="baseline",
            fingerprint=fingerprint,
            recorded_fingerprint=FINGERPRINT,
            pid=4242,
            checks=checks,
            profiles=["decode_heavy/r1"],
            reason="restored baseline byte-for-byte and served 1 recovery profile run(s) cleanly"
            if ok
            else "decode_heavy/r1 completed: expected 128/128, observed 120/128",
        ),
    )


def finish_sweep(sweep: Path, cfg: GauntletConfig, *, probe: HostProbe | None = None) -> Path:
    write_config(sweep, cfg)
    write_model(
        sweep / "host.json",
        probe or HostProbe(driver=False, reason="simulated host (launch.sim)", simulated=True),
    )
    write_validation(sweep)
    return sweep


def judged_report(sweep: Path, cfg: GauntletConfig | None = None) -> str:
    """What the sweep does when it closes: the judge writes verdicts.json, then the report renders it."""
    judge_sweep(sweep, cfg)
    return build_report(sweep, cfg)


def decisions(markdown: str) -> dict[str, str]:
    """The decision table as {candidate: verdict label}."""
    section = markdown.split("## Decision", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    return {cells[0]: cells[1] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows)}


def section(markdown: str, title: str) -> str:
    return markdown.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory, base_cfg: GauntletConfig) -> tuple[Path, str]:
    """The case study's sweep, reported once (config read back from the sweep's own config.yaml)."""
    sweep = finish_sweep(case_study(tmp_path_factory.mktemp("case") / "sweep"), base_cfg)
    return sweep, judged_report(sweep)


# ------------------------------------------------------------------------------------------ the case study


def test_decision_table_of_the_case_study(case: tuple[Path, str]) -> None:
    _, text = case
    assert decisions(text) == {
        "baseline": "baseline",
        "eplb": "INCOMPATIBLE",
        "mega_moe": "INCOMPATIBLE",
        "spec_probabilistic": "REJECT",
        "tp4_dp2": "REJECT",
    }


@pytest.mark.parametrize(
    ("candidate", "fragments"),
    [
        ("mega_moe", ["startup failed (incompatible)", "DeepGEMM MegaMoE requires SM100"]),
        ("eplb", ["startup failed (init-failed)", "EPLB is not supported"]),
        (
            "spec_probabilistic",
            ["visible-answer reliability", "visible answers 3/5 vs 4/5", "no clear load advantage"],
        ),
        (
            "tp4_dp2",
            ["concurrency regression", "decode_heavy TTFT p50 64.7x", "decode_heavy output tok/s 0.119x"],
        ),
        ("baseline", ["retained configuration"]),
    ],
)
def test_each_row_names_what_it_failed(case: tuple[Path, str], candidate: str, fragments: list[str]) -> None:
    _, text = case
    row = next(line for line in section(text, "Decision").splitlines() if line.startswith(f"| {candidate} "))
    for fragment in fragments:
        assert fragment in row


def test_header_says_simulated_and_shows_the_host_probe(case: tuple[Path, str]) -> None:
    _, text = case
    head = text.split("## Decision", 1)[0]
    assert "**SIMULATED**" in head
    assert "host probe: simulated host (launch.sim)" in head
    assert "real vLLM" not in head


def test_key_figures_carry_intervals_against_the_baseline(case: tuple[Path, str]) -> None:
    _, text = case
    rows = {
        cells[0]: cells[1:]
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in section(text, "Key figures against the baseline").splitlines()
            if line.startswith("| ")
        )
    }
    assert rows["figure"] == ["baseline", "spec_probabilistic", "tp4_dp2"]
    assert rows["decode_heavy output tok/s"][0] == "10,039 tok/s"
    assert rows["decode_heavy output tok/s"][2].startswith("1,197 tok/s  0.119x [0.1")
    assert rows["decode_heavy TTFT p50"][2].startswith("22.45 s  64.7x [")
    assert rows["serial e2e p50"][2].startswith("4.10 s  0.820x [")
    assert rows["visible answers"] == ["4/5", "3/5  0.750x", "4/5  1.000x"]
    assert rows["visible-answer censored median"][1].startswith("76.85 s")
    # Profiles configured but measured by nobody are named, not shown as empty rows.
    assert "short output tok/s" not in rows
    assert "Not measured in this sweep: short output tok/s, mixed output tok/s" in text


def test_the_reversal_has_its_own_paragraph(case: tuple[Path, str]) -> None:
    _, text = case
    body = section(text, "Serial versus loaded ranking")
    paragraph = next(p for p in body.split("\n\n") if p.startswith("**tp4_dp2**"))
    assert "faster than baseline on the empty road (serial e2e p50 4.10 s vs 5.00 s" in paragraph
    assert "decode_heavy it serves 8.4x less output (1,197 tok/s vs 10,039 tok/s)" in paragraph
    assert "its median TTFT is 64.7x worse (22.45 s vs 0.347 s)" in paragraph
    assert "- serial e2e p50: tp4_dp2 > baseline" in body
    assert "- decode_heavy output tok/s: spec_probabilistic > baseline > tp4_dp2" in body


def test_drift_and_recovery_sections(case: tuple[Path, str]) -> None:
    _, text = case
    assert section(text, "Baseline drift").strip().startswith("drift check: **pass**. no drift beyond noise")
    recovery = section(text, "Retained configuration and recovery")
    assert "retained: **baseline**" in recovery
    assert "recovery validation: **PASSED**" in recovery
    assert f"fingerprint matches the one recorded at the start: `{FINGERPRINT}`" in recovery
    assert "| max_model_len " in recovery


def test_report_json_is_the_validated_model(case: tuple[Path, str]) -> None:
    sweep, _ = case
    report = read_model(sweep / "report.json", ReportModel)
    assert report.simulated and report.backend == "sim"
    assert [r.candidate for r in report.reversals] == ["tp4_dp2"]
    assert report.retained == "baseline"
    rows = {r.candidate: r for r in report.rows}
    assert rows["mega_moe"].startup.kind == "incompatible" and rows["mega_moe"].figures == []
    assert rows["tp4_dp2"].failed == ["concurrency"]
    out = next(f for f in rows["tp4_dp2"].figures if f.metric == "output_tps" and f.profile == "decode_heavy")
    assert out.source == "gates" and out.interval is not None
    assert out.interval[1] < 1 and out.ratio == pytest.approx(1197 / 10039, rel=0.02)
    assert report.recovery is not None and report.recovery.ok
    assert (sweep / "verdicts.json").exists()


def test_run_plots_false_writes_the_report_without_plots_and_never_embeds_an_earlier_ones(
    tmp_path: Path, base_cfg: GauntletConfig
) -> None:
    cfg = dataclasses.replace(base_cfg, run=dataclasses.replace(base_cfg.run, plots=False))
    sweep = finish_sweep(case_study(tmp_path / "sweep"), cfg)
    stale = sweep / PLOT_TTFT
    stale.write_bytes(PNG_MAGIC)  # an earlier report's plot
    text = judged_report(sweep, cfg)
    html = (sweep / "report.html").read_text()
    assert (
        decisions(text)["tp4_dp2"] == "REJECT" and "<h2>Plots</h2>" not in html and 'data-plot="' not in html
    )
    assert not (sweep / PLOT_THROUGHPUT).exists() and not (sweep / PLOT_RANKING).exists()
    assert stale.read_bytes() == PNG_MAGIC  # left as it was, not drawn again


def test_plots_are_non_empty_png_images(case: tuple[Path, str]) -> None:
    import matplotlib.image as mpimg

    sweep, _ = case
    for name in (PLOT_TTFT, PLOT_THROUGHPUT, PLOT_RANKING):
        path = sweep / name
        assert path.read_bytes()[:8] == PNG_MAGIC
        pixels = mpimg.imread(path)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400
        assert pixels.std() > 0.05  # something was drawn


@pytest.mark.parametrize(
    ("chosen", "after"), [(logging.NOTSET, logging.WARNING), (logging.DEBUG, logging.DEBUG)]
)
def test_matplotlib_info_stays_off_the_console_unless_the_user_chose_its_level(
    chosen: int, after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its font cache's "generated new fontManager" (INFO, first run on a machine) printed mid-sweep."""
    logger = logging.getLogger("matplotlib")
    monkeypatch.setattr(logger, "level", chosen)
    plots._pyplot()
    assert logger.level == after


def test_rebuilding_gives_the_same_markdown_and_json(case: tuple[Path, str]) -> None:
    sweep, first = case
    json_before = (sweep / "report.json").read_bytes()
    assert build_report(sweep) == first  # rendered again from the same verdicts.json
    verdicts_before = (sweep / "verdicts.json").read_bytes()
    (sweep / "verdicts.json").unlink()  # judged again from the results, not from an earlier judgement
    assert judged_report(sweep) == first
    assert (sweep / "verdicts.json").read_bytes() == verdicts_before
    assert (sweep / "report.md").read_text() == first
    assert (sweep / "report.json").read_bytes() == json_before


def test_the_report_shows_the_judges_reversal_and_figures(case: tuple[Path, str]) -> None:
    """One definition of a reversal: the report shows what verdicts.json says, it does not decide again."""
    from contracts.verdicts import read_verdicts

    sweep, _ = case
    verdicts = read_verdicts(sweep)
    report = read_model(sweep / "report.json", ReportModel)
    assert [(r.candidate, r.loaded_profile) for r in report.reversals] == [
        (r.candidate, r.loaded_profile) for r in verdicts.reversals
    ]
    tp4 = next(v for v in verdicts.verdicts if v.candidate == "tp4_dp2")
    assert (
        tp4.reversal is not None
        and next(r for r in report.rows if r.candidate == "tp4_dp2").reversal == tp4.reversal
    )
    assert next(r for r in report.rows if r.candidate == "tp4_dp2").figures == tp4.figures
    assert report.rankings == verdicts.rankings


# ------------------------------------------------------------------------------------------ other sweeps


def test_a_keep_replaces_the_baseline(tmp_path: Path, base_cfg: GauntletConfig) -> None:
    b = with_faster(tmp_path)
    # Same speed as the baseline, but most answers never become visible: an infinite censored median.
    b.run("silent", free_gib=[1.0] * 8)
    baseline_like(b, "silent")
    b.answers("silent", [None, None, None, 30.0, 40.0])
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    assert decisions(text) == {"baseline": "baseline", "faster": "KEEP", "silent": "REJECT"}
    row = next(line for line in text.splitlines() if line.startswith("| faster "))
    assert "gain: " in row and "TTFT p50 0.8" in row and "no requirement failed" in row
    assert "| baseline " in text and "recommended: faster" in text and "replaced by" not in text
    # the gates' pick, said apart from what the sweep restored (the baseline): not live until promoted
    assert "recommended: **faster** (faster is kept" in text
    assert "not live: the sweep restored **baseline** (below)" in text
    assert "No reversal" in section(text, "Serial versus loaded ranking")
    silent = next(line for line in text.splitlines() if line.startswith("| visible-answer censored median "))
    assert silent.split("|")[4].strip() == "inf (censored)"
    report = read_model(tmp_path / "report.json", ReportModel)  # infinity survives the JSON round trip
    figure = next(f for f in report.rows[2].figures if f.metric == "visible_p50_censored")
    assert figure.value == math.inf and figure.count is None


@pytest.mark.parametrize("adaptive", [False, True])
def test_confirmation_runs_are_counted_apart_from_the_repeats(
    tmp_path: Path, base_cfg: GauntletConfig, adaptive: bool
) -> None:
    """Fixed 3 repeats, or an adaptive 1..3 loop that ran to its last look: decode_heavy's two runs on top
    are confirmation runs, not repeats (the adaptive row read "5 repeats used" before)."""
    if adaptive:
        base_cfg = dataclasses.replace(
            base_cfg, run=dataclasses.replace(base_cfg.run, min_repeats=1, max_repeats=3)
        )
    with_faster(tmp_path)
    fig = BASELINE["decode_heavy"]  # two more decode_heavy runs of "faster", as confirmation runs leave them
    extra = SweepBuilder(tmp_path, repeats=5)
    extra.loaded(
        "faster",
        "decode_heavy",
        output_tps=fig["output_tps"],
        prompt_tps=fig["prompt_tps"],
        ttft=0.8 * fig["ttft"],
    )
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    repeats = section(text, "Repeats and measurement time")
    assert "up to 4 confirmation run(s)" in repeats
    rows = {
        cells[0]: cells[1:]
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in repeats.splitlines()
            if line.startswith("| ")
        )
    }
    assert rows["candidate"][:2] == ["repeats used", "confirmation runs"]
    assert rows["faster"][:2] == ["3", "2"] and rows["baseline"][:2] == ["3", "0"]
    report = read_model(tmp_path / "report.json", ReportModel)
    assert [(r.candidate, r.repeats_used, r.confirmation_runs) for r in report.rows] == [
        ("baseline", 3, 0),
        ("faster", 3, 2),
    ]


def test_missing_profiles_and_unmeasured_candidates_still_report(
    tmp_path: Path, base_cfg: GauntletConfig
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    # Measured, but decode_heavy and the answer gate are missing (an interrupted candidate).
    b.run("partial", free_gib=[1.0] * 8)
    fig = BASELINE["prefill_10k"]
    b.loaded(
        "partial", "prefill_10k", output_tps=fig["output_tps"], prompt_tps=fig["prompt_tps"], ttft=fig["ttft"]
    )
    b.serial("partial", ttft=0.20, e2e=5.0)
    b.run(
        "broken", ok=False, kind="bad-args", matched_line="vllm: error: unrecognized arguments: --frobnicate"
    )
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    # Partial evidence decides nothing (issue 21): incomplete, naming what is missing and how to resume.
    assert decisions(text) == {"baseline": "baseline", "broken": "INCOMPATIBLE", "partial": "INCOMPLETE"}
    row = next(line for line in text.splitlines() if line.startswith("| partial "))
    assert "missing: candidates/partial/decode_heavy: 0 of 3 repeat(s) on disk" in row
    assert "(the partial evidence said INCONCLUSIVE; not acted on)" in row
    assert "- partial: candidates/partial/answer_gate: 0 of 1 repeat(s) on disk" in text
    assert f"python -m orchestrator -m 'candidate=glob(*)' hydra.sweep.dir={tmp_path}" in text
    figures = {
        line.split("|")[1].strip(): line.split("|")[3].strip()
        for line in section(text, "Key figures against the baseline").splitlines()
        if line.startswith("| ")
    }
    assert figures["decode_heavy output tok/s"] == "not measured"
    assert figures["visible answers"] == "not measured"
    assert figures["prefill_10k output tok/s"].startswith("222 tok/s  1.00")
    for name in (PLOT_TTFT, PLOT_THROUGHPUT, PLOT_RANKING):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC


def test_candidates_stopped_in_their_launch_or_never_reached_are_named_not_measured(
    tmp_path: Path, base_cfg: GauntletConfig
) -> None:
    """A stop during ``starting``'s launch (no run.json) before ``late`` was reached: both rows say "not
    measured", and the command that measures them follows the table."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    (tmp_path / "candidates/starting").mkdir()
    record_planned(tmp_path, ["starting", "late"])
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    assert decisions(text) == {"baseline": "baseline", "starting": "INCOMPLETE", "late": "INCOMPLETE"}
    for name in ("starting", "late"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} "))
        assert "not measured: resuming the sweep measures it (the command below)" in row
    assert "- late: not measured (no candidates/late/: the sweep stopped before reaching it)" in text
    assert f"```\n{resume_command(tmp_path)}\n```" in text


def test_only_the_baseline_started(tmp_path: Path, base_cfg: GauntletConfig) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("mega_moe", ok=False, kind="incompatible", matched_line="RuntimeError: requires SM100")
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    assert decisions(text) == {"baseline": "baseline", "mega_moe": "INCOMPATIBLE"}
    assert "## Key figures" not in text
    assert (tmp_path / PLOT_RANKING).read_bytes()[:8] == PNG_MAGIC


def test_drift_beyond_noise_is_loud(tmp_path: Path, base_cfg: GauntletConfig) -> None:
    b = with_faster(tmp_path)
    b.run("baseline", root="recovery", is_baseline=True)
    fig = BASELINE["decode_heavy"]
    out, prompt, ttft = fig["output_tps"] * 0.6, fig["prompt_tps"] * 0.6, fig["ttft"] * 2  # a slower host
    b.loaded(
        "baseline", "decode_heavy", output_tps=out, prompt_tps=prompt, ttft=ttft, repeats=1, root="recovery"
    )
    text = judged_report(finish_sweep(tmp_path, base_cfg), base_cfg)
    assert "**DRIFT: the baseline moved beyond noise" in text
    assert decisions(text)["faster"] == "INCONCLUSIVE"
    assert "baseline drift (would have been KEEP)" in text


@pytest.mark.parametrize(
    ("ok", "fingerprint", "fragments"),
    [
        (True, FINGERPRINT, ["**PASSED**", "fingerprint matches"]),
        (False, FINGERPRINT, ["**FAILED**", "observed 120/128", "| NO "]),
        (
            False,
            "sha256:" + "cd" * 32,
            ["**FAILED**", "fingerprint DIFFERS from", f"(recorded `{FINGERPRINT}`)"],
        ),
    ],
)
def test_recovery_result_is_reported(
    tmp_path: Path, base_cfg: GauntletConfig, ok: bool, fingerprint: str, fragments: list[str]
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    finish_sweep(tmp_path, base_cfg)
    write_validation(tmp_path, ok=ok, fingerprint=fingerprint)
    recovery = section(judged_report(tmp_path, base_cfg), "Retained configuration and recovery")
    for fragment in fragments:
        assert fragment in recovery


def _as_real_vllm(sweep: Path) -> None:
    for path in sweep.rglob("run.json"):
        write_model(
            path, read_model(path, CandidateRun).model_copy(update={"backend": "vllm", "host": "h100x8"})
        )
    for path in sweep.rglob("summary.json"):
        write_model(path, read_model(path, ProfileSummary).model_copy(update={"backend": "vllm"}))


def test_header_states_real_vllm_and_the_nvml_probe(tmp_path: Path, base_cfg: GauntletConfig) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    _as_real_vllm(tmp_path)
    from contracts.results import GpuMemory

    probe = HostProbe(
        driver=True,
        driver_version="550.54.15",
        gpus=[
            GpuMemory(index=i, name="NVIDIA H100 80GB HBM3", total_gib=80, used_gib=0.5, free_gib=79.5)
            for i in range(8)
        ],
        compute_capability=["9.0"] * 8,
    )
    finish_sweep(tmp_path, base_cfg, probe=probe)
    head = judged_report(tmp_path, base_cfg).split("## Decision", 1)[0]
    assert "Numbers measured on **real vLLM**" in head and "SIMULATED" not in head
    assert "NVIDIA driver 550.54.15, 8 GPU(s) (NVIDIA H100 80GB HBM3), compute capability 9.0" in head


# ------------------------------------------------------------------------------------------ command line


def test_main_rebuilds_and_prints(case: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    sweep, text = case
    assert main([str(sweep)]) == 0
    printed = capsys.readouterr().out
    assert (sweep / "report.md").read_text() == text
    assert "| candidate " in printed and "full report:" in printed  # the summary, not report.md


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "the following arguments are required"),
        (["/nonexistent/sweep"], 6, "/nonexistent/sweep: no such sweep directory"),
    ],
)
def test_main_errors(args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == code
    assert message in capsys.readouterr().err


def test_main_on_a_directory_without_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 6
    err = capsys.readouterr().err
    assert "no config.yaml here" in err and "hint:" in err


def test_main_on_a_sweep_nobody_judged_says_to_run_the_judge(
    tmp_path: Path, base_cfg: GauntletConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    finish_sweep(tmp_path, base_cfg)
    assert main([str(tmp_path)]) == 6
    err = capsys.readouterr().err
    assert "no verdicts.json: the sweep was not judged" in err
    assert f"python -m orchestrator judge {tmp_path}" in err
    assert not (tmp_path / "report.md").exists()


def test_an_older_verdicts_file_still_renders_and_says_how_to_update_it(
    tmp_path: Path, base_cfg: GauntletConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from contracts.verdicts import read_verdicts, write_verdicts

    with_faster(tmp_path)
    judge_sweep(finish_sweep(tmp_path, base_cfg), base_cfg)
    current = read_verdicts(tmp_path)
    old = current.model_copy(
        update={
            "schema_version": 1,
            "baseline_figures": [],
            "rankings": [],
            "reversals": [],
            "verdicts": [v.model_copy(update={"figures": []}) for v in current.verdicts],
        }
    )
    write_verdicts(tmp_path, old)
    assert main([str(tmp_path)]) == 0
    _, err = capsys.readouterr()
    out = (tmp_path / "report.md").read_text()
    assert decisions(out) == {"baseline": "baseline", "faster": "KEEP"}
    assert "## Key figures" not in out
    assert "schema 1 (an older gauntlet)" in err and "python -m orchestrator judge" in err


def test_the_report_renders_from_disk_without_the_gates(case: tuple[Path, str]) -> None:
    """The report stage imports no stage: with the gates package unimportable it still renders the sweep."""
    sweep, first = case
    script = (
        "import sys\n"
        "class NoGates:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gates' or name.startswith('gates.'):\n"
        "            raise ImportError('the report must not import ' + name)\n"
        "sys.meta_path.insert(0, NoGates())\n"
        "import report\n"
        f"sys.exit(report.main([{str(sweep)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (sweep / "report.md").read_text() == first
    assert "| candidate " in done.stdout


# ------------------------------------------------------------------------------------------ formatting


def _cmp(metric: str, profile: str, **fields: object) -> Comparison:
    return Comparison.model_validate(
        {"metric": metric, "profile": profile, "status": "fail", "observed": None, "baseline": None, **fields}
    )


@pytest.mark.parametrize(
    ("comparison", "text"),
    [
        (
            _cmp("output_tps", "decode_heavy", ratio=0.1192, interval=(0.114, 0.124)),
            "decode_heavy output tok/s 0.119x [0.114x-0.124x]",
        ),
        (
            _cmp("serial_e2e_p50", "serial", ratio=0.82, interval=(0.81, 0.83)),
            "serial latency p50 0.820x [0.810x-0.830x]",
        ),
        (
            _cmp("serial_combined_p50", "serial", ratio=0.85, interval=(0.78, 0.93)),
            "serial TTFT and latency p50 (one test) 0.850x [0.780x-0.930x]",
        ),
        (
            _cmp("ttft_p50", "decode_heavy", ratio=64.7, interval=(58.4, 71.7)),
            "decode_heavy TTFT p50 64.7x [58.4x-71.7x]",
        ),
        (
            _cmp("visible_answers", "answer_gate", observed=3.0, baseline=4.0, n_candidate=5, n_baseline=5),
            "visible answers 3/5 vs 4/5",
        ),
        (
            _cmp("answer_accuracy", "accuracy", observed=0.8, baseline=0.975, n_candidate=40, n_baseline=40),
            "accuracy 32/40 vs 39/40 (non-inferiority)",
        ),
        (
            _cmp("visible_p50_censored", "answer_gate", observed=math.inf, baseline=43.95, ratio=math.inf),
            "censored median to visible answer inf (censored) vs 43.95 s",
        ),
        (
            _cmp("stability", "decode_heavy", message="decode_heavy: 3 preemptions"),
            "decode_heavy: 3 preemptions",
        ),
    ],
)
def test_short_comparison(comparison: Comparison, text: str) -> None:
    assert short_comparison(comparison) == text


def test_table_pads_columns_and_escapes_pipes() -> None:
    lines = table(["a", "bb"], [["x|y", "1"], ["long cell", "22"]])
    assert lines == [
        "| a         | bb |",
        "|-----------|----|",
        "| x\\|y      | 1  |",
        "| long cell | 22 |",
    ]
