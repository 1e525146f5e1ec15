"""A real headless Chromium for the browser tests (Debian's chromium and chromium-driver,
driven by selenium). Under CI=true a missing piece fails the test (``unavailable``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci_rules import unavailable

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# every connection to a closed port, every host name to nothing: a page that fetched
# anything from outside would show it
OFFLINE = ("--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND")


def start_chromium(*arguments: str, width: int = 1400, height: int = 900) -> Any:
    """A started driver (quit it when done). ``--no-sandbox``: the tests run as root."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("selenium is not installed (pip install -e '.[dev]')")
    for program in (CHROMIUM, CHROMEDRIVER):
        if not Path(program).exists():
            unavailable(f"{program} is missing (apt-get install chromium chromium-driver; ci/provision-docker.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", *arguments):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def offline_browser(width: int = 1100, height: int = 900) -> Any:
    """A pytest fixture body: a headless Chromium with no way out to the network, quit after."""
    driver = start_chromium(*OFFLINE, "--hide-scrollbars", width=width, height=height)
    try:
        yield driver
    finally:
        driver.quit()


def element_box(browser: Any, element: Any) -> dict:
    """Where ``element`` is drawn: x, y, width, height in CSS pixels."""
    return browser.execute_script("const r = arguments[0].getBoundingClientRect();"
                                  "return {x: r.x, y: r.y, width: r.width, height: r.height};", element)


def open_self_contained(browser: Any, page: Path, title: str) -> None:
    """Open ``page`` and check it is whole on its own: loaded, titled ``title``, nothing
    fetched (no resource entries) and nothing run (no script)."""
    browser.get(page.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    assert browser.title == title
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert browser.execute_script("return document.scripts.length") == 0
