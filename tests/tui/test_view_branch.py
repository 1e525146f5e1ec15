"""Branching from the screens (icplay/tui/screens/branching.py): the viewer's ``b`` at the turn
on screen and watch's Alt+B after the end run what ``icplay branch`` runs, on a worker thread:
each continuation replayed on real SQLite and scored, saved in the branches folder the viewer
lists, and the notices name each branch with its reward and strict verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_helpers import edit, watched_episode
from icplay.frontend.branching import branches_dir
from icplay.frontend.config import AgentChoice
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.modals import CommentScreen, ScoreScreen
from icplay.tui.screens.view import ViewScreen
from icplay.tui.screens.view_episode import EpisodeScreen
from tui_helpers import viewer_apps, viewer_loaded, wait_for

SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
LOOK = "SELECT genre FROM books"
WRONG = "SELECT title FROM books"


@pytest.fixture
def view_app(home):
    yield from viewer_apps(home, sandbox="sqlite")


def saved_branches(home: Path) -> dict[str, object]:
    folder = branches_dir(home)
    found = [load_trajectory(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return {b.forked_from["branch"]: b for b in found}


def notices(app) -> list[tuple[str, str, bool]]:
    return [(n.title, n.message, n.markup) for n in app._notifications]


def check_branched(app, home, source, turn: int, corrected_wins: bool) -> None:
    """Two branches of ``source`` at ``turn``, each scored; the notice names both; no markup."""
    branches = saved_branches(home)
    assert set(branches) == {"correction", "proposal"}
    for b in branches.values():
        assert b.forked_from["id"] == source.id and b.forked_from["turn"] == turn - 1
        assert b.status == "submitted" and b.reward is not None and b.strictly_solved is not None
    winner, loser = ("correction", "proposal") if corrected_wins else ("proposal", "correction")
    assert branches[winner].reward == 1.0 and branches[winner].strictly_solved is True
    assert branches[loser].reward < 1.0 and branches[loser].strictly_solved is False
    done = [message for title, message, _ in notices(app) if title == "Branched"]
    assert len(done) == 1 and f"2 branch(es) of {source.id} at turn {turn}" in done[0]
    for kind, b in branches.items():
        assert f"{kind}: reward {b.reward:.2f}, {'strictly solved' if b.strictly_solved else 'not strictly solved'}" \
            in done[0] and b.id in done[0]
    played = [message for title, message, _ in notices(app) if title == "Branch played"]
    assert sorted(m.split(":")[0] for m in played) == ["correction", "proposal"]
    assert not any(markup for title, _, markup in notices(app) if title.startswith("Branch"))


async def test_b_branches_the_episode_at_the_turn_on_screen(view_app, home):
    source = watched_episode(SQL_TASK, "sqlite", [LOOK, WRONG, None], [None, edit(SQL_TASK.gold, "mine")],
                             home / "trajectories" / "mine" / "src.json")
    assert [t.kind for t in source.turns] == ["agent", "edited"]
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await viewer_loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("b")                                      # turn 1: asked, then cancelled
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the N box")
        await pilot.press("escape")
        await pilot.press("n", "b")                                 # turn 2, the human's edit
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the N box")
        assert "Branch at turn 2" in str(app.screen.title_text)
        await pilot.press("enter")                                  # empty: N = 0
        await wait_for(pilot, lambda: any(t == "Branched" for t, _, _ in notices(app)), 60, "the branches")
        check_branched(app, home, source, 2, corrected_wins=True)
        await pilot.press("escape")
        browser = app.screen
        assert isinstance(browser, ViewScreen)
        await wait_for(pilot, lambda: not browser.reading and len(browser.all) == 3, 20, "the branches listed")


async def test_b_asks_a_whole_number_and_a_model_for_samples(view_app, home):
    watched_episode(SQL_TASK, "sqlite", [LOOK, WRONG, None], [None, edit(SQL_TASK.gold)],
                    home / "trajectories" / "mine" / "src.json")
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await viewer_loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("b", *"two", "enter")
        await pilot.press("b", "2", "enter")       # no [agent] model configured: refused
        await pilot.pause()
        said = [m for _, m, _ in notices(app)]
        assert any("N is a whole number" in m for m in said) and any("need a model" in m for m in said)
        assert not any("Branching episode" in m for m in said) and not branches_dir(home).exists()


def watch_screen(app) -> LiveScreen | None:
    return next((s for s in app.screen_stack if isinstance(s, LiveScreen) and s.agent is not None), None)


async def test_alt_b_branches_a_watched_episode_after_its_end(make_app, home):
    """The gold agent proposes the gold query; the reviewer edits it into a worse one; after the
    submit Alt+B branches at the last turn: the agent's proposal (the gold) beats the edit."""
    app = make_app(env="sql", task="bookshop-01", sandbox="sqlite", watch=AgentChoice(policy="gold", mode="confirm"))
    async with app.run_test(size=(120, 40)) as pilot:
        def waiting(kind):
            screen = watch_screen(app)
            return screen is not None and screen.request is not None and screen.request.kind == kind

        await wait_for(pilot, lambda: waiting("proposal"), 30, "the gold's proposal")
        screen = watch_screen(app)
        assert screen is not None
        await pilot.press("alt+b")                                  # not before the end
        assert not isinstance(app.screen, CommentScreen)
        await pilot.press("ctrl+e")
        screen.pane.set_input(WRONG)
        await pilot.press("f5")
        await wait_for(pilot, lambda: waiting("submit"), 30, "the submit proposal")
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: screen.state == "submitted" and isinstance(app.screen, ScoreScreen), 30,
                       "the end and its score")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, 5, "the watch screen again")
        source = screen.trajectory
        assert [t.kind for t in source.turns] == ["edited"]
        await pilot.press("alt+b")
        await wait_for(pilot, lambda: isinstance(app.screen, CommentScreen), 5, "the N box")
        assert "Branch at turn 1" in str(app.screen.title_text)
        await pilot.press("0", "enter")
        await wait_for(pilot, lambda: any(t == "Branched" for t, _, _ in notices(app)), 60, "the branches")
        check_branched(app, home, source, 1, corrected_wins=False)
