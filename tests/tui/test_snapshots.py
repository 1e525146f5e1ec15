"""Snapshots of the main screens (pytest-textual-snapshot), on the real environments.

Deterministic: a frozen display (the clock never moves, turn durations are not shown,
the cursor does not blink), a fixed task, commands whose output does not change.
Update after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from icplay.tui.screens.modals import ScoreScreen

from tui_helpers import run_command, settled, wait_for, wait_ready

SIZES = [(120, 40), (80, 24)]


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_picker(snap_compare, frozen_app, size):
    assert snap_compare(frozen_app(env="bash", tasks="bash"), terminal_size=size, run_before=settled)


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_play_bash(snap_compare, frozen_app, size):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "ls /testbed/logs")
        await run_command(pilot, "cd /testbed/logs/nginx")
        await run_command(pilot, "cat missing.txt")
        await pilot.press(*"head -3 access.log")
        await settled(pilot)

    assert snap_compare(frozen_app(env="bash", tasks="bash", task="b001"), terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_score_with_gold(snap_compare, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "wc -l /testbed/logs/nginx/access.log")
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ScoreScreen), 30, "the score")
        await pilot.press("g")
        await settled(pilot)

    assert snap_compare(frozen_app(env="bash", tasks="bash", task="b001"), terminal_size=(120, 40), run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_help(snap_compare, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await pilot.press("f1")
        await settled(pilot)

    assert snap_compare(frozen_app(env="bash", tasks="bash", task="b001"), terminal_size=(120, 40), run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_turn_details(snap_compare, frozen_app):
    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "printf 'one\\ntwo\\n'; ls /nowhere")
        await pilot.press("f3", "enter")
        await settled(pilot)

    assert snap_compare(frozen_app(env="bash", tasks="bash", task="b001"), terminal_size=(100, 30), run_before=work)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_play_sql(snap_compare, frozen_app, shop_catalog, size):
    async def work(pilot):
        from test_play_sql import run_sql

        await wait_ready(pilot)
        tree = pilot.app.screen.query_one("#schema")
        await wait_for(pilot, lambda: len(tree.root.children) == 2, 10, "the schema")
        await run_sql(pilot, "SELEC 1")
        await run_sql(pilot, "SELECT c.name, c.city, o.total FROM customers c JOIN orders o ON o.customer_id = c.id "
                             "ORDER BY o.total DESC;")
        await settled(pilot)

    app = frozen_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    assert snap_compare(app, terminal_size=size, run_before=work)


@pytest.mark.usefixtures("bwrap_ready")
def test_play_bash_light_theme(snap_compare, frozen_app):
    from icplay.frontend.config import Config

    async def work(pilot):
        await wait_ready(pilot)
        await run_command(pilot, "ls --color=always /testbed")
        await settled(pilot)

    app = frozen_app(env="bash", tasks="bash", task="b001", config=Config(history=False, theme="textual-light"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=work)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_watch(snap_compare, frozen_app, shop_catalog, size, monkeypatch):
    """The watch screen (fake model, streamed): one approved agent turn, the next proposal waiting."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))
    from fake_openai_server import FakeOpenAIServer, Script, fenced

    from icplay.frontend.config import AgentChoice
    from icplay.tui.screens.live import LiveScreen

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeOpenAIServer(Script([
        "Thought: first see who the customers are.\n" + fenced("SELECT name, city FROM customers"),
        "Thought: keep the London ones, sorted by name.\n"
        + fenced("SELECT name FROM customers WHERE city = 'London' ORDER BY name")], then="submit")).start()

    def screen(app):
        return next(s for s in app.screen_stack if isinstance(s, LiveScreen) and s.agent is not None)

    def waiting(app, n):
        request = screen(app).request
        return request is not None and request.kind == "proposal" and request.open and len(fake.requests) == n

    async def work(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: waiting(app, 1), 30, "the first proposal")
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: waiting(app, 2) and len(screen(app).trajectory.turns) == 1, 30,
                       "the second proposal")
        await settled(pilot)

    try:
        app = frozen_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None,
                         watch=AgentChoice(policy="llm", model="fake-model", base_url=fake.url, mode="confirm"))
        assert snap_compare(app, terminal_size=size, run_before=work)
    finally:
        fake.stop()
