"""The study report's HTML page in a real headless Chromium, with the network off.

The page is opened from a file:// URL in a Chromium whose every connection goes to a closed
port (--proxy-server=127.0.0.1:9) and whose host names resolve to nothing: a page that
fetched anything would miss it (a control page with a remote image shows that it does).
The plots must be there with a size, their marks where the figures put them, and the
screenshot is kept under pytest's tmp path (its path printed; ``ICPLAY_DOCS_IMAGES=1`` also
copies it to docs/images/study-report.png, how the docs' picture is made).
Under CI=true a missing Chromium, chromedriver or selenium fails the test instead of skipping.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from headless_chromium import OFFLINE, open_self_contained, start_chromium
from study_report_data import STUDY, agent_folder, annotated

from icplay.study.html import render_html
from icplay.study.report import build_report, load_agents

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "study-report.png"

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    """A headless Chromium with no way out to the network."""
    driver = start_chromium(*OFFLINE, "--hide-scrollbars", width=1100, height=900)
    try:
        yield driver
    finally:
        driver.quit()


def write_page(tmp_path: Path) -> Path:
    report = build_report(STUDY, annotated(), load_agents([agent_folder(tmp_path)]))
    page = tmp_path / "report.html"
    page.write_text(render_html(report, generated=1_764_000_000), encoding="utf-8")
    return page


def test_the_network_is_off(browser, tmp_path):
    """The control: a remote image does not load in this browser."""
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><img id="i" src="http://example.org/pixel.png">', encoding="utf-8")
    browser.get(page.as_uri())
    browser.execute_async_script(
        "const done = arguments[0], i = document.getElementById('i');"
        "if (i.complete) done(); else { i.onerror = () => done(); i.onload = () => done(); }")
    assert browser.execute_script("return document.getElementById('i').naturalWidth") == 0


def box(browser, element) -> dict:
    return browser.execute_script("const r = arguments[0].getBoundingClientRect();"
                                  "return {x: r.x, y: r.y, width: r.width, height: r.height};", element)


def test_the_page_opens_offline_and_draws_its_plots(browser, tmp_path):
    from selenium.webdriver.common.by import By

    page = write_page(tmp_path)
    open_self_contained(browser, page, "Study pilot: report")     # nothing fetched, nothing run

    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert [p.get_attribute("id") for p in plots] == ["solve-rate", "time-per-task", "solved-by-turn"]
    for plot in plots:
        size = box(browser, plot)
        assert size["width"] > 300 and size["height"] > 80, (plot.get_attribute("id"), size)

    # solve rate: a dot per annotator, all of them, and the agent, where its rate puts it
    # (a 1/3, b 2/3, c 2/2, all 5/8, agent 2/4)
    dots = browser.find_elements(By.CSS_SELECTOR, "#solve-rate circle")
    assert len(dots) == 5
    xs = [box(browser, d)["x"] + box(browser, d)["width"] / 2 for d in dots]
    zero, full = (browser.execute_script(
        "const s = document.getElementById('solve-rate'), p = s.createSVGPoint(); p.x = arguments[0]; p.y = 0;"
        "return p.matrixTransform(s.getScreenCTM()).x;", v) for v in (190, 720 - 150))
    assert [(x - zero) / (full - zero) for x in xs] == pytest.approx([1 / 3, 2 / 3, 1.0, 5 / 8, 1 / 2], abs=0.01)
    whiskers = browser.find_elements(By.CSS_SELECTOR, "#solve-rate g.whisker")
    assert len(whiskers) == 5 and all(box(browser, w)["width"] > 10 for w in whiskers)

    # time per task: a box per annotator and all together, a dot per submitted task (3 + 3 + 2, then 8)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#time-per-task rect.box")) == 4
    assert len(browser.find_elements(By.CSS_SELECTOR, "#time-per-task circle.dot")) == 16

    # solved by turn: a line per annotator, all together and the agent, drawn with a length
    curves = browser.find_elements(By.CSS_SELECTOR, "#solved-by-turn polyline.curve")
    assert len(curves) == 5
    assert all(browser.execute_script("return arguments[0].getTotalLength()", c) > 100 for c in curves)

    tables = browser.find_elements(By.TAG_NAME, "table")
    assert len(tables) == 5                   # annotators, agents, agreement, humans vs agents, tasks
    assert "0.467" in tables[2].text and "0.255" in tables[2].text

    for _ in range(3):        # the whole page in the window (a new width can wrap lines: measure again)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        if browser.execute_script("return window.innerHeight") >= height:
            break
        browser.set_window_size(1100, height + 200)
    shot = tmp_path / "study-report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    print(f"\nscreenshot: {shot}")
    if os.environ.get("ICPLAY_DOCS_IMAGES") == "1":
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_IMAGE)
