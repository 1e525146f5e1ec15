"""Pilot tests of the SQL playground on real SQLite (no Docker, no mocks)."""

from __future__ import annotations

import time

import pytest

from icplay.store import load_trajectory
from icplay.frontend.config import Config
from icplay.tui.screens.modals import ConfirmScreen, ScoreScreen
from icplay.tui.screens.picker import PickerScreen

from tui_helpers import play_screen, play_state, text_of, turn_count, type_text, wait_for, wait_ready

pytestmark = pytest.mark.usefixtures("sql_ready")

LONDON = "SELECT name FROM customers WHERE city = 'London' ORDER BY name"
ROWS_100K = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000) "
             "SELECT x AS id, x * 7 % 1000 AS score, 'customer ' || x AS name FROM n")


async def run_sql(pilot, sql: str, key: str = "f5", timeout: float = 30) -> None:
    editor = play_screen(pilot.app).query_one("#editor")
    editor.load_text(sql)
    editor.move_cursor(editor.document.end)
    before = turn_count(pilot.app)
    await pilot.press(key)
    await wait_for(pilot, lambda: turn_count(pilot.app) > before and play_state(pilot.app) == "ready", timeout,
                   f"the turn of {sql!r}")


def info_text(app) -> str:
    return text_of(play_screen(app).query_one("#result-info"))


async def test_pick_query_error_submit_reveal(make_app, shop_catalog, home):
    app = make_app(env="sql", catalog=shop_catalog(), sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("enter")
        await wait_ready(pilot)
        screen = play_screen(app)
        assert screen.task_record.key == "shop/s1"
        tree = screen.query_one("#schema")
        await wait_for(pilot, lambda: len(tree.root.children) == 2, 10, "the schema")
        assert sorted(str(n.label) for n in tree.root.children) == ["customers", "orders"]

        await type_text(pilot, "SELEC name FROM customers")             # typed in the editor
        await pilot.press("f5")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        assert "Error executing query" in info_text(app)
        assert screen.query_one("#result-info").has_class("error")
        assert screen.turn_list.option_count == 1

        # Two statements: the one under the cursor runs (the cursor is in the second).
        editor = screen.query_one("#editor")
        editor.load_text(f"SELECT 1;\n{LONDON};\n")
        editor.move_cursor((1, 5))
        await pilot.press("ctrl+j")
        await wait_for(pilot, lambda: turn_count(app) == 2 and play_state(app) == "ready", 20)
        turn = screen.episode.trajectory.turns[-1]
        assert turn.action == LONDON and turn.observation == "[('Ada',), ('Cy',)]"
        results = screen.query_one("#results")
        assert results.columns == ["name"] and [tuple(r) for r in results.rows] == [("Ada",), ("Cy",)]
        assert info_text(app).startswith("2 rows")

        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 20, "the score")
        score = app.screen
        assert score.result.reward == 1.0
        breakdown = text_of(score.query_one("#breakdown"))
        assert "rows matched" in breakdown and "2 (yours 2, gold 2)" in breakdown and "IoU" in breakdown
        await pilot.press("g")
        await pilot.pause()
        assert "WHERE city = 'London'" in text_of(score.query_one("#gold-action"))
        assert "('Ada',), ('Cy',)" in text_of(score.query_one("#gold-output"))
        await pilot.press("t")                                            # back to the task list
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen), 5)
        table = app.screen.query_one("#tasks")
        assert "✓ 1.00" in str(table.get_row_at(0)[2])

    saved = load_trajectory(home / "trajectories" / "default" / "shop" / "s1.json")
    assert saved.status == "submitted" and saved.reward == 1.0 and len(saved.turns) == 2
    assert saved.turns[0].exit_code == 1 and saved.turns[1].info["columns"] == ["name"]
    # no OS account, no annotator (none was named), and the gold reveal recorded on this attempt
    assert saved.policy == {"kind": "human", "ui": "tui", "schema_browser": True, "query_history": True}
    assert saved.annotator is None
    assert saved.attempt == 1 and saved.gold_seen_at is not None


async def test_resume_replays_statements_into_a_pristine_database(make_app, shop_catalog):
    catalog = shop_catalog()
    app = make_app(env="sql", catalog=catalog, task="s2", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "CREATE TABLE notes (x TEXT)")
        await run_sql(pilot, "INSERT INTO notes VALUES ('kept')")
        await pilot.press("ctrl+q")
    app.close_envs()

    app2 = make_app(env="sql", catalog=catalog, task="s2", sandbox=None)
    async with app2.run_test() as pilot:
        await wait_ready(pilot)
        screen = play_screen(app2)
        assert screen.turn_list.option_count == 2
        assert "resumed: 2 saved turns replayed" in info_text(app2)
        await run_sql(pilot, "SELECT x FROM notes")
        assert screen.episode.trajectory.turns[-1].observation == "[('kept',)]"


async def test_100k_rows_stay_usable(make_app, shop_catalog):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, ROWS_100K, timeout=60)
        screen = play_screen(app)
        results = screen.query_one("#results")
        assert len(results.rows) == 100_000 and results.columns == ["id", "score", "name"]
        assert info_text(app).startswith("100,000 rows")
        await pilot.press("ctrl+o")                   # to the results
        assert app.focused is results
        await pilot.press("end")
        assert results.cursor_row == 99_999
        await pilot.press("pageup", "up")
        assert results.cursor_row < 99_999
        await pilot.press("f2")                       # back to the editor, which still takes keys
        await type_text(pilot, " -- ok")
        assert screen.query_one("#editor").text.endswith(" -- ok")


async def test_interrupt_a_runaway_query(make_app, shop_catalog):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        editor = play_screen(app).query_one("#editor")
        editor.load_text("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n")
        await pilot.press("f5")
        await wait_for(pilot, lambda: play_state(app) == "running", 5)
        started = time.monotonic()
        await pilot.pause(0.3)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: play_state(app) == "ready" and turn_count(app) == 1, 8)
        assert time.monotonic() - started < 5
        turn = play_screen(app).episode.trajectory.turns[-1]
        assert turn.info["interrupted"] is True


async def test_strict_mode_hides_the_schema(make_app, shop_catalog, home):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None,
                   config=Config(history=False, strict=True))
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        screen = play_screen(app)
        assert not screen.query_one("#schema").display
        await pilot.press("f6")                          # refused in strict mode
        assert not screen.query_one("#schema").display
        assert screen.episode.trajectory.policy["schema_browser"] is False


async def test_schema_toggles(make_app, shop_catalog):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        schema = play_screen(app).query_one("#schema")
        assert schema.display
        await pilot.press("f6")
        assert not schema.display
        await pilot.press("f6")
        assert schema.display


async def test_a_schema_that_cannot_be_read_is_said_and_play_goes_on(make_app, shop_catalog, monkeypatch):
    from icplay.envs.sql import SqlEnv
    from icplay.sql.base import SqlBackendError

    def broken(self):
        raise SqlBackendError("the database went away")

    monkeypatch.setattr(SqlEnv, "schema", broken)
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: any(n.title == "No schema" for n in app._notifications), 10, "the schema's error")
        said = [n.message for n in app._notifications if n.title == "No schema"]
        assert said == ["SqlBackendError: the database went away"]
        await run_sql(pilot, LONDON)
        assert turn_count(app) == 1 and "error" not in info_text(app).lower()


async def test_bundled_sql_set_from_the_picker(make_app, home):
    """`icplay play sql`: the picker over the bundled set, the first task solved with its gold."""
    from icplay.tasks.registry import find_set

    from ci_rules import unavailable

    if not find_set("sql").available:
        unavailable("the bundled SQL task set is not installed")
    first = find_set("sql").load()[0]
    app = make_app(env="sql", sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, PickerScreen) and app.screen.current_set == "sql"
        await pilot.press("enter")
        await wait_ready(pilot)
        assert play_screen(app).task_record.key == first.key
        await run_sql(pilot, first.gold + ";")
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 20, "the score")
        assert app.screen.result.reward == 1.0


async def test_keys_typed_ahead_of_f5_all_reach_the_statement(make_app, shop_catalog):
    from tui_helpers import post_keys

    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        post_keys(app, "SELECT name, city FROM customers ORDER BY id", then="f5")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        assert play_screen(app).episode.trajectory.turns[0].action == "SELECT name, city FROM customers ORDER BY id"


async def test_the_selection_runs_when_there_is_one(make_app, shop_catalog):
    from textual.widgets.text_area import Selection

    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        editor = play_screen(app).query_one("#editor")
        editor.load_text("SELECT name FROM customers WHERE id < 3 ORDER BY id;")
        editor.selection = Selection((0, 0), (0, 26))          # "SELECT name FROM customers"
        await pilot.press("f5")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        assert play_screen(app).episode.trajectory.turns[0].action == "SELECT name FROM customers"


# -- the SQL editor's history, select-all, and the result grid copied or saved ----------------------

def sql_app(make_app, shop_catalog, **kwargs):
    return make_app(**{"env": "sql", "catalog": shop_catalog(), "task": "s1", "sandbox": None, **kwargs})


async def test_queries_run_before_are_recalled_and_searched(make_app, shop_catalog, home):
    """Ctrl+Up/Down walk this episode's queries, then an earlier session's (the history file);
    Ctrl+R searches them; the episode records that the human had the history."""
    first = sql_app(make_app, shop_catalog, config=Config(history=True))
    async with first.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT city FROM customers")               # an earlier session's query
    app = sql_app(make_app, shop_catalog, config=Config(history=True), task="s2")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT name FROM customers")
        await run_sql(pilot, "SELECT 1")
        editor = play_screen(app).query_one("#editor")
        editor.load_text("SELECT draft")
        await pilot.press("ctrl+up")
        assert editor.text == "SELECT 1"
        await pilot.press("ctrl+up", "ctrl+up")
        assert editor.text == "SELECT city FROM customers"                # from the earlier session
        await pilot.press("ctrl+down", "ctrl+down", "ctrl+down")
        assert editor.text == "SELECT draft"                             # back to what was typed
        await pilot.press("ctrl+r")
        from icplay.tui.screens.modals import HistoryScreen
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen), 5, "the history search")
        await type_text(pilot, "city")
        await pilot.press("enter")
        await wait_for(pilot, lambda: editor.text == "SELECT city FROM customers", 5, "the query found")
        assert play_screen(app).trajectory.policy["query_history"] is True


async def test_a_study_without_query_history_recalls_nothing_and_says_so(make_app, shop_catalog):
    from icplay.study.model import StudyRules
    from icplay.study.rules import PlayRules

    app = sql_app(make_app, shop_catalog)
    app.rules = PlayRules(StudyRules(query_history=False), "s", "study.toml")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT 1")
        editor = play_screen(app).query_one("#editor")
        editor.load_text("SELECT 2")
        await pilot.press("ctrl+up")
        assert editor.text == "SELECT 2"
        assert any("query_history = false" in n.message for n in app._notifications)
        policy = play_screen(app).trajectory.policy
        assert (policy["query_history"], policy["schema_browser"]) == (False, True)


async def test_ctrl_a_selects_all_the_sql(make_app, shop_catalog):
    app = sql_app(make_app, shop_catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        editor = play_screen(app).query_one("#editor")
        editor.load_text("SELECT 1;\nSELECT 2;")
        await pilot.press("ctrl+a")
        assert editor.selected_text == "SELECT 1;\nSELECT 2;"


async def test_the_result_grid_is_copied_and_saved(make_app, shop_catalog, tmp_path):
    app = sql_app(make_app, shop_catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.press("alt+c")                                       # no grid yet: said, nothing copied
        assert any("No result grid" in n.message for n in app._notifications) and not app.clipboard
        await run_sql(pilot, "SELECT name, city FROM customers WHERE city = 'London' ORDER BY name")
        await pilot.press("alt+c")
        assert app.clipboard == "name,city\nAda,London\nCy,London\n"
        await pilot.press("ctrl+o", "alt+m")                             # from the results table too
        assert app.clipboard.splitlines()[:3] == ["| name | city |", "|---|---|", "| Ada | London |"]
        from icplay.tui.screens.modals import SaveScreen
        for name, first in ((tmp_path / "out" / "london.md", "| name | city |"), (tmp_path / "london.csv", "name,city")):
            await pilot.press("alt+s")
            await wait_for(pilot, lambda: isinstance(app.screen, SaveScreen), 5, "the save dialog")
            app.screen.query_one("#save-name").value = str(name)
            await pilot.press("enter")
            await wait_for(pilot, name.exists, 5, f"{name}")
            assert name.read_text().splitlines()[0] == first
        blocked = tmp_path / "london.csv" / "x.csv"                       # a file where a folder should be
        await pilot.press("alt+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SaveScreen), 5, "the save dialog")
        app.screen.query_one("#save-name").value = str(blocked)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(n.title == "Not saved" for n in app._notifications), 5, "the refusal")


async def test_alt_keys_as_a_terminal_sends_them_act_and_type_nothing(make_app, shop_catalog):
    """A terminal sends Alt+C with its letter: the key copies the grid, the editor types no "c"
    (and Alt+T shows the task rather than typing "t")."""
    from textual import events

    from icplay.tui.screens.modals import TaskScreen

    app = sql_app(make_app, shop_catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT name FROM customers WHERE city = 'Paris'")
        editor = play_screen(app).query_one("#editor")
        before = editor.text
        app.post_message(events.Key("alt+c", "c"))
        await wait_for(pilot, lambda: app.clipboard == "name\nBob\n", 5, "the copy")
        app.post_message(events.Key("alt+t", "t"))
        await wait_for(pilot, lambda: isinstance(app.screen, TaskScreen), 5, "the task dialog")
        assert editor.text == before

