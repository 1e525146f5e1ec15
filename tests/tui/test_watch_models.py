"""Watching today's models: reasoning streamed in its own place (and kept on the turn), truncation
said as such, a draft inside <think> never run — real openai client, local server, SQLite, Pilot."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

from icplay.frontend.config import AgentChoice  # noqa: E402
from icplay.tui.widgets.agent import TRUNCATED_LINE  # noqa: E402

from test_watch import turns, wait_request, watch  # noqa: E402
from tui_helpers import wait_for  # noqa: E402

THINKING = "The customers table has a city column. I will list the London ones by name."


async def test_reasoning_streams_folds_and_is_kept_and_truncation_is_said(make_app, shop_catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    hold = threading.Event()
    fake = FakeOpenAIServer(Script([
        Reply(fenced("SELECT name FROM customers"), reasoning=THINKING, hold=hold, hold_after=6),
        Reply("<think>Start over?\n```sql\nDROP TABLE customers\n```\nno", finish_reason="length"),
        "submit"], then="submit")).start()
    try:
        choice = AgentChoice(policy="llm", model="fake-reasoner", base_url=fake.url, mode="confirm",
                             max_tokens="512")
        app = make_app(env="sql", catalog=shop_catalog(), task="s1", watch=choice, sandbox=None)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = watch(app)
            panel = screen.panel
            # mid-stream: the first pieces of thinking are on screen, in their own place, no action yet
            await wait_for(pilot, lambda: len(panel.reasoning) >= 12, 20, "the first reasoning pieces")
            assert THINKING.startswith(panel.reasoning) and panel.action is None
            assert panel.reasoning_text().plain.startswith("▾ thinking ·")
            hold.set()
            await wait_request(pilot, "proposal")
            assert panel.reasoning == THINKING and panel.action == "SELECT name FROM customers"
            assert panel.reasoning_text().plain.startswith("▸ reasoning · 15 words")      # folded to one line
            await pilot.press("alt+r")
            assert THINKING in panel.reasoning_text().plain                               # shown whole
            await pilot.press("alt+r")
            assert "▸ reasoning" in panel.reasoning_text().plain
            await pilot.press("ctrl+y")
            await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the approved turn")
            first = turns(app)[0]
            assert first.reasoning == THINKING and "reasoning" not in first.info
            assert first.info["request"]["params"]["max_tokens"] == 512
            # the next reply is cut inside <think>: truncated, its draft never run
            await wait_request(pilot, "invalid")
            assert panel.truncated and "cut at the token limit" in str(panel.failure)
            assert TRUNCATED_LINE in "\n".join(str(p) for p in panel.body().renderables)
            assert "DROP TABLE" in panel.reasoning and "DROP" not in str(panel.action)
            await pilot.press("ctrl+y")                                                  # ask again
            await wait_request(pilot, "submit")
            cut = turns(app)[1]
            assert cut.info["invalid_reason"] == "truncated" and cut.info["reply_truncated"] and not cut.action
            assert "DROP TABLE" in cut.reasoning
            assert "cut off at the length limit (512 tokens)" in str(fake.requests[2]["messages"])
            assert all(m["content"] for m in fake.requests[2]["messages"])       # no empty assistant message
            assert all("DROP" not in str(t.action) for t in turns(app))
            assert fake.requests[1]["max_tokens"] == 512
    finally:
        fake.stop()
