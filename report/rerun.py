"""The report's "Re-running a profile by hand" section: the command line that drives a server again with
one recorded profile.

Pipeline position: part of the report (:mod:`report.build`), reading only the sweep's files. Every
``summary.json`` records the run's salt and the load runner's exact settings
(:class:`contracts.results.LoadSettings`); ``python -m load SUMMARY --base-url URL`` runs that profile
again from them. Sweeps written before the settings were recorded get no section.
"""

from __future__ import annotations

from pathlib import Path

from contracts.files import read_model
from contracts.layout import candidate_dir, summary_glob
from contracts.results import ProfileSummary
from contracts.schema import GauntletConfig


def example_summary(sweep_dir: Path, cfg: GauntletConfig, baseline: str) -> Path | None:
    """The baseline's first recorded repeat of the first loaded profile (else of any profile)."""
    order = [*cfg.gates.loaded_profiles, *cfg.run.profiles]
    root = candidate_dir(sweep_dir, baseline)
    for profile in dict.fromkeys(order):
        for path in sorted((root / profile).glob(summary_glob())):
            return path
    return None


def rerun_section(sweep_dir: Path, cfg: GauntletConfig, baseline: str) -> str:
    """Markdown lines that show how to re-run one profile by hand, or "" when no summary records how."""
    path = example_summary(sweep_dir, cfg, baseline)
    if path is None:
        return ""
    summary = read_model(path, ProfileSummary)
    settings = summary.settings
    if settings is None:
        return ""
    return "\n".join(
        [
            "",
            "## Re-running a profile by hand",
            "",
            "Every `summary.json` records the run's salt and the load runner's exact settings. To drive a "
            "server you started with the same profile (here the baseline's "
            f"{summary.profile}, repeat {summary.repeat}; a fresh salt unless `--same-salt`):",
            "",
            "```",
            settings.rerun_command(str(path)),
            "```",
            "",
            f"That run's salt was `{settings.salt}`: request *i* carried `cache_salt` `{settings.salt}-i`.",
            "",
        ]
    )
