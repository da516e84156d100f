"""The instructor's report (grader/report.py) opened in headless Chromium, offline.

The hand-built class of tests/test_report.py is reported, the page is opened from its
file and screenshot (into the test's tmp folder); its plots must have been decoded
(an image's natural width is 0 when its data is broken) and its tables laid out, and
the page must ask for nothing outside itself.
"""
from __future__ import annotations

import os

import pytest

from grader.report import write_report
from tests.browser._support import ConsoleLog, launch_chromium, missing_browser
from tests.test_report import MODULE, SCORES, build_class

_MISSING = missing_browser()
if _MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"browser tests cannot run in CI: {_MISSING}")

pytestmark = [pytest.mark.browser, pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING)),
              pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]


def test_report_renders_its_plots_and_tables(tmp_path):
    from playwright.sync_api import sync_playwright

    course = build_class(tmp_path / "course")
    page_path = write_report(course, MODULE, tmp_path / "reports").html
    shot = tmp_path / "report.png"
    requests: list[str] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            console = ConsoleLog(page)
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            page.screenshot(path=str(shot), full_page=True)
            images = page.evaluate("() => [...document.images].map(i => ({alt: i.alt, "
                                   "complete: i.complete, width: i.naturalWidth, "
                                   "height: i.naturalHeight, shown: i.clientWidth}))")
            tables = page.evaluate("() => Object.fromEntries([...document.querySelectorAll"
                                   "('table')].map((t, k) => [t.className + k, "
                                   "[t.rows.length, t.clientHeight]]))")
            title = page.title()
        finally:
            browser.close()
    assert title == f"{MODULE}: instructor analytics"
    # Three score histograms and the grading-time plot, decoded and on screen.
    assert len(images) == 4, images
    assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 and i["shown"] > 0
               for i in images), images
    # Header rows + one row per exercise, per student, per submission needing attention.
    rows = {name.rstrip("0123456789"): n for name, (n, _) in tables.items()}
    assert rows["summary"] == 1 + 3 and rows["matrix"] == 1 + len(SCORES)
    assert rows["attention"] == 1 + 2  # s2 (timeout) and s5 (malformed)
    assert all(height > 0 for _, height in tables.values()), tables
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    assert console.errors() == []
    assert shot.stat().st_size > 20_000  # a real page, not a blank one
