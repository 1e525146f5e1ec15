"""`icplay scan --html`'s page in a real headless Chromium with the network off (as the study
report's page is checked: tests/study/test_study_report_page.py). Nothing is fetched, nothing
runs, the bars are drawn to scale, the three tables hold what the scan found. The screenshot is
kept under pytest's tmp path; ``ICPLAY_DOCS_IMAGES=1`` copies it to docs/images/scan-report.png."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from headless_chromium import element_box, offline_browser, open_self_contained
from scan_helpers import sql_runs

from icplay.cli import main

DOCS_IMAGE = Path(__file__).resolve().parents[1] / "docs" / "images" / "scan-report.png"

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    yield from offline_browser()


def test_the_scan_page_opens_offline_with_its_chart_and_tables(browser, tmp_path, capsys):
    from selenium.webdriver.common.by import By

    runs = sql_runs(tmp_path / "runs")
    page = tmp_path / "scan.html"
    assert main(["scan", str(runs), "--html", str(page), "--counts"]) == 0
    capsys.readouterr()
    text = page.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text

    open_self_contained(browser, page, "icplay scan")

    # one bar per kind of flag raised, its length the episodes flagged: suspect 2 (the agent's
    # empty answer, the human's), loop 1, submit-without-looking 2 (a blind submit, a failing one), error-run 1
    bars = browser.find_elements(By.CSS_SELECTOR, "#flag-counts rect.bar")
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#flag-counts text")][::2]
    assert labels == ["reward-hack-suspect", "loop", "submit-without-looking", "error-run"]
    widths = [element_box(browser, b)["width"] for b in bars]
    assert widths[0] == widths[2] > 100 and widths[1] == widths[3] == pytest.approx(widths[0] / 2, rel=0.02)

    counts = browser.find_element(By.ID, "counts").text
    assert "reward-hack-suspect" in counts and "a full reward the strict verdict does not back" in counts
    health = browser.find_element(By.ID, "health").text
    assert "sql/bookshop-empty" in health and "solved-only-by-suspects" in health and "gold-broken" in health
    assert "humans-agents-split: humans 1/1, agents 0/1" in health
    episodes = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
    assert len(episodes) == 5

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1100, height + 120)
    shot = tmp_path / "scan-report.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
    print(f"\nscreenshot: {shot}")
    if os.environ.get("ICPLAY_DOCS_IMAGES") == "1":
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_IMAGE)
