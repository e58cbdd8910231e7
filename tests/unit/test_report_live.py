"""What is live and what is recommended after a sweep's promotions, as ``report``, report.md, report.html and
the judge's summary say it: read from the records ``promote`` writes (``promotions/<stamp>/``), never from
the order in which the report happened to be rendered (issue 43, item 14).

A sweep with a KEEP (``faster``) is judged once; each row copies it, writes the promotion folders a
promotion leaves (promoted, failed with the previous configuration restored and validated or not,
interrupted, promoted then a later one failed, two in the same second) and runs the ``report`` and
``judge`` commands on it.
"""

from __future__ import annotations

import html
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contracts.files import write_model
from contracts.layout import PromotionPaths, SweepPaths, promotion_dir
from contracts.results import RecoveryValidation
from contracts.schema import GauntletConfig
from gates import judge
from report import build
from tests.unit.gates_fixtures import sweep_config, with_faster, write_config
from tests.unit.test_report import finish_sweep, judged_report

WHEN = "2026-12-06 09:47:12 UTC"
SERVED = (
    "promoted faster (launched byte-for-byte from its recorded spec) and served 1 recovery run(s) cleanly"
)


def validation(candidate: str, ok: bool, reason: str) -> RecoveryValidation:
    return RecoveryValidation(
        ok=ok,
        candidate=candidate,
        fingerprint="sha256:f",
        recorded_fingerprint="sha256:f",
        pid=7,
        reason=reason,
    )


@dataclass(frozen=True)
class Folder:
    """One promotion's folder as ``promote`` leaves it: its candidate file, the candidate's validation
    (None: not written), and the previous configuration's restore (``restored``: restored/ exists)."""

    stamp: str
    candidate: str = "faster"
    launch: RecoveryValidation | None = None
    restored: bool = False
    back: RecoveryValidation | None = None

    def write(self, sweep: Path) -> None:
        paths = PromotionPaths(promotion_dir(sweep, self.stamp))
        file = paths.candidate_file(self.candidate)
        file.parent.mkdir(parents=True)
        file.write_text(f"name: {self.candidate}\n")
        if self.launch is not None:
            paths.launch.root.mkdir()
            write_model(paths.launch.validation, self.launch)
        if self.restored:
            paths.restored.root.mkdir()
            if self.back is not None:
                write_model(paths.restored.validation, self.back)


PROMOTED = Folder("20261206T094712Z", launch=validation("faster", True, SERVED))
DIED = "server events: expected none, observed died at 3.0"
FAILED = Folder(
    "20261206T094712Z",
    launch=validation("faster", False, DIED),
    restored=True,
    back=validation("baseline", True, "restored baseline byte-for-byte and served 1 recovery run(s) cleanly"),
)


@dataclass(frozen=True)
class Case:
    folders: list[Folder]
    says: list[str]  # in the terminal's summary, report.md and report.html (the same words)
    baseline: str  # the decision table's cell for the baseline (report.md, report.html, the judge)
    card: str  # report.html's first card
    never: list[str] = field(default_factory=list)  # in none of them


CASES = {
    "never promoted": Case(
        [],
        ["recommended: faster (faster is kept", "not live"],
        "recommended: faster",
        "recommended (not live)",
        ["live: faster", "replaced by"],
    ),
    "promoted": Case(
        [PROMOTED],
        [
            f"live: faster (promoted {WHEN}, validation PASSED)",
            "the gates' KEEP: faster (faster is kept",
            "restored after the sweep, before its promotion: baseline, recovery validation PASSED",
        ],
        "replaced by faster (promoted)",
        "live (promoted)",
        ["not live", "recommended: faster"],
    ),
    "failed, the previous one back validated": Case(
        [FAILED],
        [
            f"the promotion of faster failed ({WHEN}: {DIED}); the previous configuration baseline was "
            "restored, validation PASSED",
            "recommended: faster (faster is kept",
            "not live: `python -m orchestrator promote SWEEP faster` adopts it",
        ],
        "recommended: faster",
        "last promotion",
        ["live: faster", "replaced by"],
    ),
    "failed, the previous one back but failing": Case(
        [
            Folder(
                "20261206T094712Z",
                launch=validation("faster", False, DIED),
                restored=True,
                back=validation("baseline", False, "max_model_len: expected 8, observed 4"),
            )
        ],
        [
            "the previous configuration baseline was restored, validation FAILED: max_model_len: expected 8, "
            "observed 4"
        ],
        "recommended: faster",
        "last promotion",
        ["live: faster", "replaced by"],
    ),
    "failed, its restore interrupted": Case(
        [Folder("20261206T094712Z", launch=validation("faster", False, DIED), restored=True)],
        [
            "the previous configuration baseline was not restored (its restore did not finish): "
            "`python -m orchestrator rollback SWEEP` restores it"
        ],
        "recommended: faster",
        "last promotion",
        ["live: faster", "replaced by"],
    ),
    "interrupted after its validation passed": Case(
        [
            Folder(
                "20261206T094712Z",
                launch=validation("faster", True, SERVED),
                restored=True,
                back=validation("baseline", True, "restored baseline byte-for-byte"),
            )
        ],
        [
            f"the promotion of faster failed ({WHEN}: stopped after its validation passed (interrupted or an "
            "error), before it was made retained); the previous configuration baseline was restored, "
            "validation PASSED"
        ],
        "recommended: faster",
        "last promotion",
        ["live: faster", "replaced by"],
    ),
    "unfinished": Case(
        [Folder("20261206T094712Z")],
        [
            f"the promotion of faster ({WHEN}) did not finish (interrupted, or running now): the retained "
            "configuration is still baseline; `python -m orchestrator rollback SWEEP` restores it"
        ],
        "recommended: faster",
        "last promotion",
        ["live: faster", "replaced by"],
    ),
    "promoted, then another failed": Case(
        [
            PROMOTED,
            Folder(
                "20261206T101500Z",
                candidate="other",
                launch=validation("other", False, DIED),
                restored=True,
                back=validation("faster", True, "restored faster byte-for-byte"),
            ),
        ],
        [
            f"live: faster (promoted {WHEN}, validation PASSED)",
            "the promotion of other failed (2026-12-06 10:15:00 UTC: server events",
            "the previous configuration faster was restored, validation PASSED",
        ],
        "replaced by faster (promoted)",
        "last promotion",
        ["not live"],
    ),
    "failed, then promoted in the same second": Case(
        [FAILED, Folder("20261206T094712Z-2", launch=validation("faster", True, SERVED))],
        [f"live: faster (promoted {WHEN}, validation PASSED)"],
        "replaced by faster (promoted)",
        "live (promoted)",
        ["not live"],
    ),
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GauntletConfig]:
    """A sweep whose gates keep ``faster`` (the baseline restored after it), judged and reported."""
    cfg = sweep_config()
    sweep = tmp_path_factory.mktemp("live") / "sweep"
    with_faster(sweep)
    finish_sweep(sweep, cfg)
    write_config(sweep, cfg)
    judged_report(sweep, cfg)
    return sweep, cfg


def _baseline_row(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_report_says_what_the_promotions_left_live(
    judged: tuple[Path, GauntletConfig], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    source, _ = judged
    sweep = tmp_path / "sweep"
    shutil.copytree(source, sweep)
    for folder in case.folders:
        folder.write(sweep)
    assert build.main([str(sweep)]) == 0
    said_out = capsys.readouterr().out
    terminal = " ".join(said_out.split())  # the summary is wrapped to the terminal's width
    paths = SweepPaths(sweep)
    markdown = paths.report_md.read_text().replace("**", "")
    page = html.unescape(paths.report_html.read_text()).replace("<code>", "").replace("</code>", "")
    for said in case.says:
        assert said in terminal, terminal
        assert said in markdown, markdown
        if case.folders:  # the page words a sweep never promoted its own way (test_report_html.py)
            assert said in page, page.split("<h2>Serial versus loaded", 1)[-1][:3000]
    for never in case.never:
        assert never not in terminal and never not in markdown, never
    assert f"| {case.baseline}" in _baseline_row(markdown, "| baseline ")
    assert f"| {case.baseline}" in _baseline_row(said_out, "| baseline ")
    assert f'data-card="{case.card}"' in page
    assert judge.main([str(sweep)]) == 0
    summary = capsys.readouterr().out
    assert _baseline_row(summary, "baseline ").split(maxsplit=2)[2] == case.baseline, summary
