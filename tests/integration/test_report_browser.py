"""report.html in a real headless browser (Debian's chromium): a screenshot that is not blank, and the DOM
the browser built holds the decision table's rows. Skipped when no chromium is installed, unless
``GAUNTLET_REQUIRE_BROWSER=1`` (CI), which makes a missing browser a failure."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from gates.judge import judge_sweep
from report import write_report
from report.html import HTML_FILE
from tests.unit.gates_fixtures import case_study, sweep_config, write_config

pytestmark = [pytest.mark.integration]

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CANDIDATES = ("baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb")


def browser() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        reason = f"no headless browser on PATH ({', '.join(BROWSERS)}): `apt-get install -y chromium`"
        if os.environ.get("GAUNTLET_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (GAUNTLET_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    return found


def headless(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless run; no network is reachable from the page (every host resolves to nothing)."""
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",  # root in a container: chromium's sandbox needs user namespaces
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        encoding="utf-8",  # the page is UTF-8, whatever the locale
        errors="replace",
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = sweep_config()
    sweep = case_study(tmp_path_factory.mktemp("browser") / "sweep")
    write_config(sweep, cfg)
    judge_sweep(sweep, cfg)
    write_report(sweep, cfg)
    return sweep / HTML_FILE


def test_the_browser_renders_a_page_that_is_not_blank(page: Path, tmp_path: Path) -> None:
    exe = browser()
    shot = tmp_path / "report.png"
    done = headless(
        exe, tmp_path / "profile", "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri()
    )
    assert shot.is_file(), done.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == (1400, 1800)
        rgb = image.convert("RGB")
        colors = rgb.getcolors(maxcolors=1 << 20) or []
        background = max(colors)[1] if colors else (0, 0, 0)
        pixels = rgb.width * rgb.height
        inked = pixels - sum(n for n, c in colors if c == background)
    assert len(colors) > 200, "a rendered table, badges and plots have many colours"
    assert inked / pixels > 0.15, f"only {inked / pixels:.1%} of the screenshot differs from the background"


def test_the_browsers_dom_has_the_decision_table(page: Path, tmp_path: Path) -> None:
    exe = browser()
    done = headless(exe, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    table = dom.split('<table id="decision">', 1)[1].split("</table>", 1)[0]
    rows = dict(re.findall(r'data-candidate="([^"]+)".*?data-decision="([^"]+)"', table, re.DOTALL))
    assert rows == {
        "baseline": "baseline",
        "tp4_dp2": "reject",
        "spec_probabilistic": "reject",
        "mega_moe": "incompatible",
        "eplb": "incompatible",
    }
    assert dom.count('<figure data-plot="') >= 3
