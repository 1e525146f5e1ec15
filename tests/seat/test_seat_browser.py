"""The browser seat end to end: ``icplay serve`` in its own process, a real headless Chromium
(selenium) logging in with a token and playing a bundled SQL task to a score by typing into
the terminal page (xterm.js), the trajectory carrying the token's annotator; a supervisor
following it read-only; her finished queue said in her page; a wrong or missing token getting
401 and nothing else.

The page draws the terminal on a canvas (WebGL), so what it shows is read from the bytes the
app sends over the websocket: a script added before the page's own wraps ``WebSocket`` and
keeps them (``window.__seatText``). Under CI=true a missing Chromium fails (``unavailable``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from headless_chromium import start_chromium

from icplay.study.seats import digest_of

from seat_helpers import make_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
POETRY = "SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title"
CAPTURE = """
(() => {
  const Native = window.WebSocket;
  const decoder = new TextDecoder();
  window.__seatText = "";
  window.WebSocket = function (url, protocols) {
    const socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
    socket.addEventListener("message", (event) => {
      if (event.data instanceof ArrayBuffer) {
        window.__seatText += decoder.decode(new Uint8Array(event.data), {stream: true});
      }
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
})();
"""
WEBSOCKET = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
ESCAPES = re.compile(r"\x1b\[[0-9;:?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


@pytest.fixture
def browser():
    driver = start_chromium()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE})
    yield driver
    driver.quit()


def free_port() -> int:
    """A port free now (the kernel's pick; the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def icplay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icplay", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


@pytest.fixture
def seat_server(tmp_path):
    """``icplay serve`` of a study on a free port, its tokens made with ``icplay serve tokens``."""
    make_study("pilot")
    port = free_port()
    made = icplay("serve", "tokens", "--study", "pilot", "--annotator", "ada", "--supervisor", "sam", "--port", str(port))
    assert made.returncode == 0, made.stderr
    links = dict(re.findall(r"^\s+(\w+) \(\w+\)\s+(http://\S+)$", made.stdout, re.M))
    assert set(links) == {"ada", "sam"}
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "icplay", "serve", "--study", "pilot", "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while status_of(base + "/") != 401:
        assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
        time.sleep(0.1)
    yield base, links
    server.terminate()
    server.wait(30)
    log.close()


def status_of(url: str, headers: dict | None = None) -> int | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def screen_text(driver) -> str:
    return ESCAPES.sub("", driver.execute_script("return window.__seatText || ''"))


class Page:
    """What the app sent to the page, read forward: each wait looks only at what came after
    the previous one's match (an old screen's words do not satisfy a new wait)."""

    def __init__(self, driver) -> None:
        self.driver, self.seen = driver, 0

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while (found := screen_text(self.driver).find(text, self.seen)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {text!r}; its last bytes: "
                                     f"{screen_text(self.driver)[-600:]!r}")
            time.sleep(0.2)
        self.seen = found + len(text)


def wait_for_file(pattern: str, predicate, timeout: float = 60) -> tuple[Path, dict]:
    """The current trajectory file (not a kept attempt) matching ``pattern`` once ``predicate`` holds."""
    home = Path(os.environ["ICPLAY_HOME"])
    deadline = time.monotonic() + timeout
    while True:
        for path in home.glob(pattern):
            if not any(part in ("attempts", ".attempts") for part in path.relative_to(home).parts):
                data = json.loads(path.read_text())
                if predicate(data):
                    return path, data
        assert time.monotonic() < deadline, f"no trajectory {pattern} as expected under {home}"
        time.sleep(0.2)


def seat_apps(annotator: str) -> list[int]:
    """The pids of ``icplay play --study ... --annotator A`` processes of this test's home."""
    home = f"ICPLAY_HOME={os.environ['ICPLAY_HOME']}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"play" in argv and b"--study" in argv and annotator.encode() in argv and \
                    home in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    chain = ActionChains(driver)
    for key in keys:
        if key.startswith("ctrl+"):
            chain = chain.key_down(Keys.CONTROL).send_keys(key[5:]).key_up(Keys.CONTROL)
        else:
            chain = chain.send_keys({"enter": Keys.ENTER}.get(key, key))
    chain.perform()


def test_an_annotator_plays_a_sql_task_in_the_browser_and_a_supervisor_follows(browser, seat_server, tmp_path):
    base, links = seat_server
    browser.get(links["ada"] + "&annotator=bo")                      # the seat comes from the token, not the URL
    assert browser.current_url == base + "/?annotator=bo"            # the token left the address bar
    page = Page(browser)
    page.wait_for("study pilot")                                     # ada's queue, at her first task
    page.wait_for("ready")                                           # the episode is open, the editor focused
    terminal = browser.find_element("css selector", ".xterm-helper-textarea")
    cookie = {"Cookie": f"{browser.get_cookies()[0]['name']}={links['ada'].split('token=')[1]}"}
    second_tab = {**WEBSOCKET, **cookie, "Origin": base}
    assert status_of(base + "/ws", second_tab) == 409                 # one app per seat: no two on one queue
    terminal.send_keys(POETRY)
    press(browser, "ctrl+j")                                         # run it
    page.wait_for("7 rows")
    press(browser, "ctrl+s")                                         # submit, and confirm
    page.wait_for("for scoring after 1 turn")
    press(browser, "enter")
    page.wait_for("Reward 1.00")
    browser.save_screenshot(str(tmp_path / "browser-seat.png"))
    if os.environ.get("ICPLAY_SEAT_SCREENSHOT"):
        shutil.copy(tmp_path / "browser-seat.png", os.environ["ICPLAY_SEAT_SCREENSHOT"])
    path, saved = wait_for_file("**/bookshop-01.json", lambda d: d.get("status") == "submitted")
    assert saved["annotator"] == "ada" and saved["study"] == "pilot" and saved["reward"] == 1.0
    assert path.relative_to(Path(os.environ["ICPLAY_HOME"])).parts[:4] == ("studies", "pilot", "sessions", "ada")
    assert [t["action"] for t in saved["turns"]] == [POETRY] and saved["turns"][0]["author"] == "human"
    press(browser, "n")                                              # her only task: the queue is done,
    page.wait_for("queue is done: 1 of 1 tasks")                     # said in her page (it was blank)
    page.wait_for("close this page")
    browser.save_screenshot(str(tmp_path / "browser-seat-done.png"))
    if os.environ.get("ICPLAY_SEAT_SCREENSHOT"):
        shutil.copy(tmp_path / "browser-seat-done.png", Path(os.environ["ICPLAY_SEAT_SCREENSHOT"]).with_suffix(".done.png"))

    assert len(seat_apps("ada")) == 1
    browser.get(links["sam"])                                        # the supervisor: a list, then the episode
    deadline = time.monotonic() + 60
    while seat_apps("ada"):                                          # ada's page left: her app quits
        assert time.monotonic() < deadline, "ada's app outlived her page"
        time.sleep(0.2)
    assert "supervisor, read-only" in browser.page_source
    browser.find_element("partial link text", "bookshop-01").click()
    page = Page(browser)
    page.wait_for("by ada · read-only")                               # the status bar, then the episode under it
    page.wait_for("Poetry")


def test_a_wrong_or_missing_token_gets_401_and_nothing_else(browser, seat_server):
    base, links = seat_server
    token = links["ada"].split("token=")[1]
    browser.get(base + "/?token=" + token[:-2] + "xx")
    assert browser.find_element("tag name", "body").text.strip() == "401: Unauthorized"
    assert browser.get_cookies() == [] and "__seatText" not in browser.page_source
    browser.get(base + "/static/js/textual.js")
    assert browser.find_element("tag name", "body").text.strip() == "401: Unauthorized"
    websocket = {**WEBSOCKET, "Origin": base}
    for path in ("/", "/ws", "/static/js/textual.js", "/static/css/xterm.css", "/anything"):
        assert status_of(base + path) == 401, path
        assert status_of(base + path, websocket) == 401, path
        assert status_of(base + path, {"Cookie": f"icplay_seat{base.rsplit(':', 1)[1]}={token}x"}) == 401, path
    seats = (Path(os.environ["ICPLAY_HOME"]) / "studies" / "pilot" / "seats.json").read_text()
    assert token not in seats and digest_of(token) in seats          # stored hashed, never in plain text
