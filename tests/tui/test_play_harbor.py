"""A Harbor task in the playground on real Docker: a human plays it to 1.0 in the play screen
and opens the saved episode in the viewer; a scripted model (real openai client against the
fake server) works it on the watch screen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icplay.store import load_trajectory
from icplay.frontend.config import AgentChoice
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen
from icplay.tui.screens.view import ViewApp, ViewScreen
from icplay.tui.screens.view_episode import EpisodeScreen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from fake_openai_server import FakeOpenAIServer, Script, fenced  # noqa: E402
from tui_helpers import play_screen, run_command, text_of, wait_for, wait_ready  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "harbor"
pytestmark = pytest.mark.docker


@pytest.fixture
def harbor_ready(docker_client):
    from icplay.sandbox.images import image_exists

    if not image_exists(docker_client, "debian:bookworm-slim"):
        from ci_rules import unavailable

        unavailable("debian:bookworm-slim is not on this machine (ci/provision-docker.sh provides it)")


def output_text(app) -> str:
    return "\n".join(play_screen(app).query_one("#output").plain_lines())


async def test_play_a_harbor_task_to_one_and_view_it(harbor_ready, make_app, home):
    app = make_app(tasks=f"harbor:{DATA}", task="count-errors", sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot, 120)
        screen = play_screen(app)
        assert screen.task_record.env == "harbor"
        assert text_of(screen.query_one("#prompt")).startswith("/app")
        await run_command(pilot, "ls /tests", 60)
        assert "cannot access '/tests'" in output_text(app)
        await run_command(pilot, "grep -ciw error service.log > answer.txt", 60)
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.query("#breakdown"), 60,
                       "the score")
        assert app.screen.result.reward == 1.0
        assert "the verifier ran inside the container" in text_of(app.screen.query_one("#strict-reasons"))
        breakdown = text_of(app.screen.query_one("#breakdown"))
        assert "/logs/verifier/reward.txt" in breakdown and "PASS: 3" in breakdown
    saved = load_trajectory(home / "trajectories" / "default" / "harbor" / "count-errors.json")
    assert saved.status == "submitted" and saved.reward == 1.0 and saved.strict["solved"] is False
    assert [t.action for t in saved.turns] == ["ls /tests", "grep -ciw error service.log > answer.txt"]

    viewer = ViewApp(home=home, config=app.config)
    try:
        async with viewer.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(viewer.screen, ViewScreen) and not viewer.screen.reading, 20,
                           "the episodes")
            assert [s.task for s in viewer.screen.shown] == ["count-errors"]
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(viewer.screen, EpisodeScreen), 10, "the stepper")
            assert "Turn 1 of 2" in text_of(viewer.screen.query_one("#turn-head"))
            assert "Final 1.00" in text_of(viewer.screen.query_one("#final"))
    finally:
        viewer.close_envs()


async def test_watch_a_scripted_model_on_a_harbor_task(harbor_ready, make_app, home, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replies = ["I count whole words.\n" + fenced("grep -ciw error /app/service.log > /app/answer.txt", "bash"),
               "submit"]
    with FakeOpenAIServer(Script(replies, then="submit")) as server:
        choice = AgentChoice(policy="llm", model="fake-model", base_url=server.url, mode="auto")
        app = make_app(tasks=f"harbor:{DATA}", task="count-errors", sandbox=None, watch=choice)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 120, "the score")
            assert app.screen.result.reward == 1.0
        system = server.requests[0]["messages"][0]["content"]
    assert "the task's tests then" in system
    saved = load_trajectory(next((home / "trajectories").rglob("count-errors.json")))
    assert saved.reward == 1.0 and [t.author for t in saved.turns] == ["agent"]
    assert saved.turns[0].action == "grep -ciw error /app/service.log > /app/answer.txt"
