"""The watch screen over the Python pane: the gold policy's def streams into the pane and
its submit NAME is scored (real interpreter in bwrap)."""

from __future__ import annotations

import pytest

from icplay.frontend.config import AgentChoice
from icplay.tui.screens.modals import ScoreScreen

from tui_helpers import wait_for

pytestmark = pytest.mark.usefixtures("bwrap_ready")


async def test_the_gold_agent_works_a_python_task_in_the_watch_screen(make_app, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    app = make_app(env="python", tasks="python", task="py-09", watch=AgentChoice(policy="gold", mode="auto"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 90, "the score")
        assert app.screen.result.reward == 1.0
        assert app.screen.result.breakdown["function"] == "factorial"
        await pilot.press("escape")
        lines = "\n".join(app.screen.pane.output.plain_lines())
        assert "def factorial(n):" in lines
