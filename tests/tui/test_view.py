"""The viewer (`icplay view`) driven with Textual's Pilot over episodes recorded on the real
SQLite env (and bwrap for Bash forks): browse, search, filter, sort, step through turns,
compare, re-execute in the app, fork into the play and watch screens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icplay.session import Session
from icplay.store import load_trajectory
from icplay.frontend.config import Config
from icplay.tui.screens.modals import ScoreScreen
from icplay.tui.screens.view import ViewScreen
from icplay.tui.screens.view_episode import ChooseEpisode, CompareScreen, EpisodeScreen
from icplay.tui.screens.view_fork import ForkScreen
from icplay.tui.widgets.results import ResultsTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from fake_openai_server import FakeOpenAIServer, Script, fenced  # noqa: E402
from test_play_sql import run_sql
from tui_helpers import play_state, run_command, text_of, viewer_apps, viewer_loaded, wait_for, wait_ready
from view_fixtures import BASH_TASK, SQL_TASK, record_bash, record_sql, tamper


@pytest.fixture
def view_app(home):
    yield from viewer_apps(home, sandbox="bwrap")


loaded = viewer_loaded   # the name test_view_calls imports


def rows(screen: ViewScreen) -> list[tuple[str, str, str]]:
    return [(s.task, s.who, s.source) for s in screen.shown]


async def test_browse_search_filter_sort(view_app, home):
    record_sql(home)
    app = view_app()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await loaded(pilot)
        assert rows(screen) == [("bookshop-01", "gpt-4o-mini/react", "watch"), ("bookshop-02", "ann", "ann"),
                                ("bookshop-01", "ann", "ann")]                      # newest first
        assert screen.table.rows[0][1:6] == ("sql/bookshop-01", "sql", "gpt-4o-mini/react", "A1 E1 R1", 2)
        await pilot.press("slash", *"lisbon")                                       # the query text is searched
        assert rows(screen) == [("bookshop-02", "ann", "ann")]
        await pilot.press("enter", "x")                                             # back to the table, clear
        assert len(screen.shown) == 3
        await pilot.press("s")                                                      # solved: yes
        assert [s.solved for s in screen.shown] == [True, True]
        await pilot.press("s")                                                      # solved: no
        assert rows(screen) == [("bookshop-02", "ann", "ann")]
        await pilot.press("s", "a")                                                 # any; author: human
        assert {s.who for s in screen.shown} == {"ann"}
        await pilot.press("a", "a")                                                 # author: mixed (an edit)
        assert rows(screen) == [("bookshop-01", "gpt-4o-mini/react", "watch")]
        await pilot.press("x", "m")                                                 # model: the one there is
        assert screen.filter.model == "gpt-4o-mini" and len(screen.shown) == 1
        await pilot.press("x", "o")                                                 # sort by set/task, descending
        assert screen.sort == "task" and [s.task for s in screen.shown][0] == "bookshop-02"
        await pilot.press("r")
        assert [s.task for s in screen.shown][-1] == "bookshop-02"



async def test_the_strict_verdict_beside_intercode_solved(view_app, home):
    """The table's solved cell shows both marks, ``v`` filters on the strict verdict (an episode
    without one passes neither yes nor no), the stepper says why the strict one says no."""
    from icplay.store import save_trajectory

    paths = record_sql(home)
    hollow = load_trajectory(paths["human"])          # reward 1.0, judged not strictly solved
    for turn in hollow.turns:
        turn.info.pop("strict", None)
    hollow.strict = {"solved": False, "reasons": ["the gold returns no rows on this backend"]}
    save_trajectory(hollow, paths["human"])
    app = view_app()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await loaded(pilot)
        cells = {s.id: row[8] for s, row in zip(screen.shown, screen.table.rows)}
        assert screen.table.columns[8] == "solved"
        assert cells == {"b2b2b2b2b2b2": "✓ ✓", "c3c3c3c3c3c3": "✗ –", "a1a1a1a1a1a1": "✓ ✗"}
        await pilot.press("v")                                                      # strict: yes
        assert [s.id for s in screen.shown] == ["b2b2b2b2b2b2"]
        assert "strict yes" in text_of(screen.query_one("#filters"))
        await pilot.press("v")                                                      # strict: no
        assert [s.id for s in screen.shown] == ["a1a1a1a1a1a1"]                     # c3 has no verdict
        await pilot.press("s")                                                      # and InterCode solved: yes
        assert [s.id for s in screen.shown] == ["a1a1a1a1a1a1"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodeScreen), 10, "the stepper")
        final = text_of(pilot.app.screen.query_one("#final"))
        assert "Solved InterCode ✓  strict ✗" in final and "the gold returns no rows on this backend" in final
        await pilot.press("escape", "v", "s")                                      # strict any, solved no
        assert [s.id for s in screen.shown] == ["c3c3c3c3c3c3"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodeScreen), 10, "the stepper")
        assert "Solved InterCode ✗  strict – (no verdict)" in text_of(pilot.app.screen.query_one("#final"))


async def test_rows_appear_while_the_scan_goes_on(view_app, home, monkeypatch):
    """The scan posts its batches as it reads: the table shows the first episodes while the
    worker is held before its second batch (the real scan, one file a batch), then all."""
    import threading

    import icplay.tui.screens.view as view_module

    record_sql(home)
    real, go_on = view_module.scan_batches, threading.Event()

    def held(*args, **kwargs):
        for n, batch in enumerate(real(*args, **kwargs, every=0)):
            if n == 2:                                   # the first batch is out (one ahead): hold the second
                assert go_on.wait(30), "the test never let the scan go on"
            yield batch

    monkeypatch.setattr(view_module, "scan_batches", held)
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ViewScreen) and app.screen.shown, 20, "the first rows")
        screen = app.screen
        assert screen.reading and len(screen.shown) == 1 and len(screen.table.rows) == 1
        assert "1 of 1 episodes (reading…)" in text_of(screen.query_one("#status"))
        go_on.set()
        await loaded(pilot)
        assert len(screen.table.rows) == 3 and "(reading…)" not in text_of(screen.query_one("#status"))
        assert [s.id for s in screen.shown] == ["b2b2b2b2b2b2", "c3c3c3c3c3c3", "a1a1a1a1a1a1"]   # newest first
        # the cursor stayed on top while newer episodes came in above the first one read
        assert screen.table.cursor_row == 0 and screen.current.id == "b2b2b2b2b2b2"

async def test_the_cursor_stays_on_top_when_the_newest_episode_is_read_last(view_app, home, monkeypatch):
    """Batches oldest first, the newest in the scan's last batch: the cursor ends on it."""
    import icplay.tui.screens.view as view_module

    record_sql(home)
    real = view_module.scan_batches

    def oldest_first(*args, **kwargs):
        summaries = sorted((s for batch in real(*args, **kwargs) for s in batch), key=lambda s: s.date)
        yield from ([s] for s in summaries)

    monkeypatch.setattr(view_module, "scan_batches", oldest_first)
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        assert [s.id for s in screen.shown] == ["b2b2b2b2b2b2", "c3c3c3c3c3c3", "a1a1a1a1a1a1"]
        assert screen.table.cursor_row == 0 and screen.current.id == "b2b2b2b2b2b2"


async def test_stepper_shows_each_turn(view_app, home):
    record_sql(home)
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")                                                  # the agent's episode
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        screen = app.screen
        # counted as the header counts (2 turns taken): the rejected proposal is not a turn
        assert "Turn 1 of 2 · agent · 36 rows · reward -0.19" in text_of(screen.query_one("#turn-head"))
        assert "All titles first" in text_of(screen.query_one("#notes"))
        assert len(screen.query_one("#grid", ResultsTable).rows) == 36
        await pilot.press("right")
        assert "Proposal, not a turn (after turn 1 of 2) · human · rejected" in text_of(screen.query_one("#turn-head"))
        assert "proposed (not run): DROP TABLE books" in text_of(screen.query_one("#action"))
        await pilot.press("n")
        action = text_of(screen.query_one("#action"))
        assert "- SELECT title FROM books WHERE genre = 'poetry'" in action
        assert "+ SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title" in action
        assert "Comment the genre is capitalised" in text_of(screen.query_one("#notes"))
        assert [r[0] for r in screen.query_one("#grid", ResultsTable).rows][0] == "Falling Upward"
        assert text_of(screen.query_one("#curve")).split()[-1] == "▁·█"
        final = text_of(screen.query_one("#final"))
        assert "Final 1.00" in final and SQL_TASK.gold in final
        await pilot.press("right")                                                  # stays on the last turn
        assert screen.index == 2
        await pilot.press("escape")
        assert isinstance(app.screen, ViewScreen)


async def test_compare_aligns_turns(view_app, home):
    record_sql(home)
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("c")                                                      # nothing marked: a hint
        assert isinstance(app.screen, ViewScreen)
        await pilot.press("space", "down", "c")                                     # another task: refused
        assert isinstance(app.screen, ViewScreen)
        await pilot.press("down", "c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "the comparison")
        compare = app.screen
        rows_ = list(compare.query(".compare-row"))
        assert len(rows_) == 3                                                      # the human's three turns
        first_right = text_of(rows_[1].query(".half")[1])
        second_left = text_of(rows_[1].query(".half")[0])
        assert "(rejected) DROP TABLE books" in second_left and "genre = 'Poetry'" in second_left
        assert "WHERE genre = 'Poetry'" in first_right
        assert "= " not in text_of(rows_[0].query(".turn-no")[0]) and "≠" in text_of(rows_[0].query(".turn-no")[0])
        assert "=" in text_of(rows_[1].query(".turn-no")[0]) or "≠" in text_of(rows_[1].query(".turn-no")[0])
        await pilot.press("escape")
        assert screen.marked is not None



async def test_compare_from_the_stepper_with_an_episode_picked_from_a_list(view_app, home):
    record_sql(home)
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("down", "enter")                                          # bookshop-02: alone
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("c")                                                      # nothing to compare with: a hint
        assert isinstance(app.screen, EpisodeScreen)
        await pilot.press("escape", "up", "enter")                                  # the agent's bookshop-01
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        stepper = app.screen
        assert stepper.summary.who == "gpt-4o-mini/react"
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooseEpisode), 10, "the list of episodes")
        choose = app.screen
        assert [(s.task, s.who) for s in choose.others] == [("bookshop-01", "ann")]   # same task only, not itself
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "the comparison")
        compare = app.screen
        assert (compare.left.id, compare.right.id) == ("b2b2b2b2b2b2", "a1a1a1a1a1a1")   # this one on the left
        assert len(list(compare.query(".compare-row"))) == 3
        await pilot.press("escape")
        assert app.screen is stepper
        await pilot.press("c", "escape")                                            # the list: Escape goes back
        await wait_for(pilot, lambda: app.screen is stepper, 10, "the stepper again")

async def test_reexecute_in_the_app_flags_the_tampered_turn(view_app, home):
    paths = record_sql(home)
    tamper(paths["human"], 1, "Falling Upward", "Rising Downward")
    app = view_app(paths=[paths["human"]])
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        screen = app.screen
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.reexecution is not None, 30, "the re-execution")
        assert [c.index for c in screen.reexecution.diverged] == [1]
        assert screen.index == 1                                                    # moved to the first divergence
        check = text_of(screen.query_one("#check"))
        assert "✗ differs — observation" in check
        assert "Rising Downward" in check and "Falling Upward" in check
        await pilot.press("p")
        assert "✓ same" in text_of(screen.query_one("#check"))


@pytest.mark.usefixtures("bwrap_ready")
async def test_fork_from_turn_one_goes_on_in_the_play_screen(view_app, home):
    source = load_trajectory(record_bash(home))
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("k")                                                      # fork after turn 1
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen) and app.screen.agent is None, 10, "the fork")
        await wait_ready(pilot)
        await run_command(pilot, "cat /testbed/fork_note.txt")
        turn = app.screen.episode.trajectory.turns[-1]
        assert turn.observation.strip() == "kept-by-fork"                          # turn 1's file is there
        footer = {b.key: b.description for (_, b, enabled, _) in app.screen.active_bindings.values() if b.show}
        assert footer["ctrl+b"] == "Episodes"                                       # the way back is shown
        await pilot.press("ctrl+b")                                                 # back to the browser
        screen = await loaded(pilot)
        assert len(screen.shown) == 2
        fork = next(s for s in screen.shown if s.forked_from)
        assert fork.forked_from == {"id": source.id, "turn": 1} and screen.table.rows[0][0] == "⑂"
        assert "family:" in text_of(screen.query_one("#preview"))
        await pilot.press("f")
        assert {s.id for s in screen.shown} == {source.id, fork.id}
    saved = Session("forks", home=home).load(BASH_TASK)
    assert [t.action for t in saved.turns] == [source.turns[0].action, "cat /testbed/fork_note.txt"]
    assert saved.policy["kind"] == "human" and "user" not in saved.policy["previous"][0]
    assert saved.turns[0].info["annotator"] == "ann" and saved.annotator is None   # no annotator named here


async def test_fork_goes_on_with_an_agent_in_the_watch_screen(view_app, home, monkeypatch):
    """A human's first turn, then a model (the scripted OpenAI-compatible server, the real
    openai client) goes on in the watch screen."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    paths = record_sql(home)
    source = load_trajectory(paths["human"])
    fake = FakeOpenAIServer(Script([fenced(SQL_TASK.gold)], then="submit")).start()
    try:
        app = view_app(paths=[paths["human"]], sandbox=None, config=Config(history=False, agent={
            "policy": "llm", "model": "fake-model", "base_url": fake.url, "mode": "auto"}))
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
            await pilot.press("w")                                                  # fork after turn 1, agent goes on
            await watched_fork_scored(pilot, app)
        prompt = str(fake.requests[0])
        assert "SELECT title FROM books" in prompt                                  # the model saw the human's turn
    finally:
        fake.stop()
    saved = agent_fork_after_turn_1(home, source)
    assert saved.status == "submitted"


async def test_a_forks_retry_forks_again_at_the_same_turn(view_app, home):
    """F8 (retry) on a submitted fork is the playground's retry made for a fork: the same episode forked again at
    the same turn (its turns replayed), the fork left behind kept as an earlier attempt."""
    paths = record_sql(home)
    source = load_trajectory(paths["human"])
    app = view_app(paths=[paths["human"]], sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        await pilot.press("right", "k")                                             # fork after turn 2
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen) and app.screen.agent is None, 10, "the fork")
        await wait_ready(pilot)
        first = app.screen
        await run_sql(pilot, "SELECT COUNT(*) FROM books")
        first_id = first.episode.trajectory.id
        await pilot.press("ctrl+s", "enter")                                        # submit the fork
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 20, "the score")
        await pilot.press("escape", "f8")                                           # then retry it
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen) and app.screen.agent is None and app.screen is not first, 10,
                       "the second fork")
        await wait_ready(pilot)
        second = app.screen
        assert isinstance(app.screen_stack[-2], EpisodeScreen)                     # in place of the first fork
        assert second.episode.trajectory.id != first_id
        assert [t.action for t in second.episode.trajectory.turns] == [t.action for t in source.turns[:2]]
        await run_sql(pilot, "SELECT 1")
    forks = Session("forks", home=home)
    current = forks.load(SQL_TASK)
    assert current.forked_from == {"id": source.id, "turn": 2}
    assert [t.action for t in current.turns][-1] == "SELECT 1"
    earlier = forks.attempts(SQL_TASK)
    assert [(t.id, t.forked_from, t.turns[-1].action) for t in earlier] == [
        (first_id, {"id": source.id, "turn": 2}, "SELECT COUNT(*) FROM books")]


async def watched_fork_scored(pilot, app) -> None:
    """Until the watched fork's agent has submitted and its score dialog is up. The dialog
    focuses its Next button when mounted: leaving before that would quit the app under a
    dialog still mounting (modals.ScoreScreen.on_mount then finds no button)."""
    await wait_for(pilot, lambda: any(isinstance(s, ForkScreen) and s.agent is not None for s in app.screen_stack), 10,
                   "the watched fork")
    await wait_for(pilot, lambda: play_state(app) == "submitted" and isinstance(app.screen, ScoreScreen)
                   and getattr(app.focused, "id", None) == "next", 30, "the agent's episode and its score")


def agent_fork_after_turn_1(home, source):
    """The saved fork of ``source`` after its first (human) turn, solved by the scripted model."""
    saved = Session("forks", home=home).load(SQL_TASK)
    assert saved.forked_from == {"id": source.id, "turn": 1}
    assert [(t.author, t.action) for t in saved.turns] == [("human", "SELECT title FROM books"),
                                                           ("agent", SQL_TASK.gold)]
    assert saved.reward == 1.0 and saved.policy["model"] == "fake-model"
    return saved


def fork_args(*argv: str):
    """``icplay view ...`` parsed by the real command line, its --fork request built."""
    from icplay.cli import build_parser
    from icplay.commands.view import fork_request

    return fork_request(build_parser().parse_args(["view", *argv]))


async def test_fork_from_the_command_line_with_a_model(view_app, home, monkeypatch):
    """``icplay view FILE --fork 1 --model M --base-url URL --mode auto``: the viewer opens on
    the watched fork; the model (the scripted server, the real openai client) goes on after
    the human's first turn."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    paths = record_sql(home)
    source = load_trajectory(paths["human"])
    fake = FakeOpenAIServer(Script([fenced(SQL_TASK.gold)], then="submit")).start()
    try:
        request = fork_args(str(paths["human"]), "--fork", "1", "--model", "fake-model", "--base-url", fake.url,
                            "--mode", "auto", "--strategy", "tryagain")
        assert request[1:3] == (1, True) and request[3].model == "fake-model"
        app = view_app(paths=[paths["human"]], sandbox=None, fork=request)
        async with app.run_test(size=(120, 40)) as pilot:
            await watched_fork_scored(pilot, app)
        assert "SELECT title FROM books" in str(fake.requests[0])                  # the model saw the human's turn
    finally:
        fake.stop()
    saved = agent_fork_after_turn_1(home, source)
    assert saved.policy["strategy"] == "tryagain"


async def test_fork_from_the_command_line_you_go_on(view_app, home):
    paths = record_sql(home)
    request = fork_args(str(paths["human"]), "--fork", "0")
    assert request[1:] == (0, False, None)
    app = view_app(paths=[paths["human"]], sandbox=None, fork=request)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen) and app.screen.agent is None, 10, "the fork")
        await wait_ready(pilot)
        assert app.screen.episode.trajectory.turns == []
        assert isinstance(app.screen_stack[-2], ViewScreen)                         # Escape/back: the browser


@pytest.mark.parametrize("argv, says", [
    (["--fork", "9"], "cannot fork at turn 9: the episode has 3 turns"),
    (["--model", "m"], "go with --fork K"),
    (["--fork", "1", "--strategy", "react"], "name it with --model or --policy"),
    (["--fork", "1", "--policy", "llm"], "say which model goes on"),
])
def test_fork_command_line_mistakes_are_one_line(home, argv, says):
    import subprocess

    paths = record_sql(home)
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "view", str(paths["human"]), *argv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


async def test_the_date_column_is_whole_at_120_columns_with_a_long_model_name(view_app, home):
    """A long model name and task id narrow their own columns; the date, last, is never cut."""
    import json

    from icplay.tui.widgets.episodes import date_text

    paths = record_sql(home)
    data = json.loads(paths["agent"].read_text())
    data["policy"]["model"] = "an-open-weights-model-with-a-long-name-2025-preview-instruct"
    paths["agent"].write_text(json.dumps(data))
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        await pilot.pause()
        table = screen.table
        assert table.virtual_size.width <= table.scrollable_content_region.width
        lines = [table.render_line(y).text for y in range(4)]
        assert lines[0].rstrip().endswith("date")
        for summary, line in zip(screen.shown, lines[1:]):
            assert line.rstrip().endswith(date_text(summary.date)), line
