"""What a solver, a model or a saved file writes is shown as text (issue 28): never read as
Textual markup (``x[/y]`` was a MarkupError that ended the app; a link or a ``@click``
action would act), and bidirectional controls shown as escapes, in the TUI and in --plain.

Each test drives real surfaces with hostile text (Pilot over real bwrap and SQLite, the
viewer over real saved files) and checks that the text shows literally, the app still runs
and a click on it does nothing.
"""

from __future__ import annotations

import contextlib
import json
import shlex

import pytest

from icplay.frontend.display import display
from icplay.store import load_trajectory, save_trajectory
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.modals import TaskScreen

from tui_helpers import play_screen, play_state, text_of, turn_count, viewer_apps, viewer_loaded, wait_for, wait_ready

MARKUP = ["x[/y]", "[link=https://e.vil]click[/link]", "[@click=app.quit]x[/]", "[bold]b"]
RLO = "\u202e"          # RIGHT-TO-LEFT OVERRIDE: "abc\u202efdp.exe" reads as "abcexe.pdf"


def border_title(widget) -> str:
    return widget._border_title.plain if widget._border_title is not None else ""


async def run_action(pilot, command: str, timeout: float = 30.0) -> None:
    """Put ``command`` in the play screen's input and run it (typing keys cannot spell every
    character), until its turn is recorded."""
    before = turn_count(pilot.app)
    play_screen(pilot.app).pane.set_input(command)
    await pilot.press("enter")
    await wait_for(pilot, lambda: turn_count(pilot.app) > before and play_state(pilot.app) == "ready", timeout,
                   f"the turn of {command!r}")


@contextlib.asynccontextmanager
async def bash_playground(make_app):
    """The play screen of Bash task b001 on bwrap, ready: (pilot, screen)."""
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_ready(pilot)
        yield pilot, play_screen(app)


@pytest.mark.usefixtures("bwrap_ready")
async def test_a_folder_named_like_markup_is_a_folder_on_the_prompt(make_app):
    async with bash_playground(make_app) as (pilot, screen):
        app = pilot.app
        for name in MARKUP:
            await run_action(pilot, f"mkdir -p /tmp/{shlex.quote(name)} && cd /tmp/{shlex.quote(name)}")
            cwd = screen.trajectory.turns[-1].info["cwd"]
            assert name.split("/")[0] in cwd
            assert text_of(screen.query_one("#prompt")).strip() == f"{cwd}$"
            await pilot.click("#prompt")                     # a click on "[@click=app.quit]" quits nothing
            assert app.is_running and isinstance(app.screen, LiveScreen)
        # the action's echo, the turn list and the output keep the brackets too
        await run_action(pilot, "echo '[@click=app.quit]x[/]' 'x[/y]'")
        assert "[@click=app.quit]x[/] x[/y]" in screen.query_one("#output").plain_lines()
        listed = str(screen.turn_list.get_option_at_index(screen.turn_list.option_count - 1).prompt)
        assert "echo '[@click=app.qui" in listed          # cut to the sidebar's width


@pytest.mark.usefixtures("bwrap_ready")
async def test_bidirectional_controls_in_output_names_and_actions_show_as_escapes(make_app):
    async with bash_playground(make_app) as (pilot, screen):
        await run_action(pilot, f"mkdir -p /tmp/d{RLO}cod && cd /tmp/d{RLO}cod && touch abc{RLO}fdp.exe && ls")
        out = screen.query_one("#output").plain_lines()
        assert "abc\\u202efdp.exe" in out and not any(RLO in line for line in out)
        assert text_of(screen.query_one("#prompt")).strip() == "/tmp/d\\u202ecod$"
        listed = str(screen.turn_list.get_option_at_index(0).prompt)
        assert "d\\u202ecod" in listed and RLO not in listed
        await run_action(pilot, "printf 'a\\x1b]8;;https://e.vil\\x07link\\x1b]8;;\\x07 \\xc2\\x9b2J b\\n'")
        line = screen.query_one("#output").plain_lines()[-1]
        assert line == "alink \\x9b2J b"               # no hyperlink, a C1 CSI shown as an escape


def hostile_sql_set(tmp_path):
    """A task set whose query and description are markup, over a database whose table,
    column and values are too (what a solver can also make with CREATE TABLE)."""
    from icplay.tasks.registry import TaskSet
    from icplay.tui.app import Catalog

    folder = tmp_path / "hostile-set"
    (folder / "databases").mkdir(parents=True)
    (folder / "databases" / "h.sql").write_text(
        'CREATE TABLE "x[/y]" ("[@click=app.quit]x[/]" TEXT);\n'
        'INSERT INTO "x[/y]" VALUES (\'[link=https://e.vil]click[/link]\'), (\'[bold]b\');\n')
    (folder / "tasks.json").write_text(json.dumps([
        {"id": "h1", "db": "h", "hardness": "easy", "query": " ".join(MARKUP) + f" abc{RLO}fdp",
         "gold": 'SELECT * FROM "x[/y]"'}]))
    task_set = TaskSet("hostile", "sql", folder / "tasks.json", "[@click=app.quit]x[/] set",
                       databases=folder / "databases")
    return Catalog.from_sets([task_set])


async def test_sql_names_values_and_task_fields_show_as_text(make_app, tmp_path, sql_ready):
    from icplay.tui.screens.picker import PickerScreen
    from icplay.tui.widgets.results import ResultsTable

    app = make_app(env="sql", catalog=hostile_sql_set(tmp_path), sandbox=None)
    async with app.run_test(size=(140, 40)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        table = app.screen.query_one("#tasks")
        await wait_for(pilot, lambda: table.row_count == 1, 10, "the tasks")
        assert border_title(table) == "Tasks · [@click=app.quit]x[/] set"
        assert [str(c) for c in table.get_row_at(0)[:2]] == ["h1", "easy"]
        assert "x[/y] [link=https://e.vil]click[/link]" in str(table.get_row_at(0)[4])
        preview = text_of(app.screen.query_one("#preview"))
        assert "x[/y] [link=https://e.vil]click[/link] [@click=app.quit]x[/] [bold]b abc\\u202efdp" in preview
        await pilot.click("#preview")
        await pilot.press("enter")
        await wait_ready(pilot)
        screen = play_screen(app)
        assert border_title(screen.query_one("#query")) == "Task hostile/h1 · easy"
        assert "[link=https://e.vil]click[/link]" in text_of(screen.query_one("#query"))
        tree = screen.query_one("#schema")
        await wait_for(pilot, lambda: len(tree.root.children) == 1, 10, "the schema")
        node = tree.root.children[0]
        assert str(node.label) == "x[/y]"
        node.expand()
        await pilot.pause()
        assert str(node.children[0].label).startswith("[@click=app.quit]x[/]")
        editor = screen.query_one("#editor")
        editor.load_text('SELECT * FROM "x[/y]";')
        await pilot.press("f5")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20, "the rows")
        results = screen.query_one(ResultsTable)
        assert results.columns == ["[@click=app.quit]x[/]"]
        assert [r[0] for r in results.rows] == ["[link=https://e.vil]click[/link]", "[bold]b"]
        assert "[link=https://e.vil]click[/link]" in "".join(s.text for s in results.render_line(1))
        editor.load_text('SELECT * FROM "[@click=app.quit]x[/]";')      # an error that quotes it
        await pilot.press("f5")
        await wait_for(pilot, lambda: turn_count(app) == 2 and play_state(app) == "ready", 20, "the error")
        assert "no such table: [@click=app.quit]x[/]" in text_of(screen.query_one("#result-info"))
        await pilot.click("#result-info")
        await pilot.click("#query")        # a click on the task opens it whole (TaskScreen): as text too
        await wait_for(pilot, lambda: isinstance(app.screen, TaskScreen), 10, "the whole task")
        assert "[link=https://e.vil]click[/link]" in text_of(app.screen.query_one("#task-body Static"))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen), 10, "the play screen")
        assert app.is_running


async def test_a_notification_quoting_a_file_is_text(make_app, tmp_path, sql_ready):
    """A task set whose file is broken: the notification names the file, brackets and all."""
    from textual.widgets._toast import Toast

    from icplay.tasks.registry import TaskSet
    from icplay.tui.app import Catalog

    folder = tmp_path / "x[" / "y][@click=app.quit]q[link=https:"
    folder.mkdir(parents=True)
    (folder / "tasks.json").write_text("{not json")
    catalog = Catalog.from_sets([TaskSet("broken", "sql", folder / "tasks.json", "broken")])
    app = make_app(env="sql", catalog=catalog, sandbox=None)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app._notifications, 10, "the notification")
        for notification in list(app._notifications):
            toast = Toast(notification)
            await app.screen.mount(toast)          # as the toast rack shows it
            assert "x[/y][@click=app.quit]q[link=https:" in toast.render().plain
            await pilot.click(toast)
        assert app.is_running


def tamper_hostile(path):
    """A saved episode whose fields (who, model, query, actions, outputs, comments, thoughts,
    breakdown, gold) carry markup and a right-to-left override, as a file from elsewhere may."""
    traj = load_trajectory(path)
    hostile = " ".join(MARKUP) + f" {RLO}"
    traj.annotator = "[@click=app.quit]ann[/]"
    traj.policy = {**traj.policy, "model": "[link=https://e.vil]m[/link]"}
    traj.task = {**traj.task, "query": hostile, "gold": "SELECT 'x[/y]'", "hardness": "[bold]"}
    for turn in traj.turns:
        turn.observation = hostile
        turn.comment = "[@click=app.quit]c[/]"
        turn.thought = "x[/y] thought"
        turn.reasoning = "[bold]r"
        turn.info.pop("columns", None)
        turn.info.pop("rows", None)
        turn.info["error"] = "x[/y]"
    traj.breakdown = {"[@click=app.quit]k[/]": "x[/y]"}
    save_trajectory(traj, path)


@pytest.fixture
def view_app(home):
    yield from viewer_apps(home, sandbox="bwrap")


async def test_the_viewer_shows_a_saved_files_fields_as_text(view_app, home, sql_ready):
    from view_fixtures import record_sql

    from icplay.tui.screens.view_episode import CompareScreen, EpisodeScreen

    paths = record_sql(home)
    tamper_hostile(paths["human"])
    tamper_hostile(paths["agent"])
    app = view_app()
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await viewer_loaded(pilot)
        rows = [screen.table.render_line(i) for i in range(1, 4)]
        assert any("[@click=app.quit]ann[/]" in "".join(s.text for s in line) for line in rows)
        human = next(i for i, s in enumerate(screen.shown) if s.who == "[@click=app.quit]ann[/]")
        screen.table._move_to(human)
        await pilot.pause()
        preview = text_of(screen.query_one("#preview"))
        assert "[link=https://e.vil]click[/link]" in preview and RLO not in preview and "\\u202e" in preview
        await pilot.press("space")                           # marked, for the comparison
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the episode")
        episode = app.screen
        await pilot.pause()
        assert "[@click=app.quit]x[/]" in text_of(episode.query_one("#query"))
        assert "[@click=app.quit]c[/]" in text_of(episode.query_one("#notes"))
        assert "no such" not in text_of(episode.query_one("#sql-note"))
        assert "x[/y]" in text_of(episode.query_one("#sql-note"))
        final = text_of(episode.query_one("#final"))
        assert "[@click=app.quit]k[/]: x[/y]" in final and "SELECT 'x[/y]'" in final
        for _ in episode.trajectory.turns:
            await pilot.press("right")
        await pilot.click("#notes")
        assert app.is_running and isinstance(app.screen, EpisodeScreen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EpisodeScreen), 10, "the list")
        agent = next(i for i, s in enumerate(app.screen.shown) if s.kind != "human" and s.task == "bookshop-01")
        app.screen.table._move_to(agent)
        await pilot.pause()
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "the comparison")
        await pilot.pause()
        assert "[@click=app.quit]ann[/]" in "".join(text_of(w) for w in app.screen.query(".half"))
        assert app.is_running


def test_display_shows_every_bidirectional_control_as_an_escape():
    controls = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    shown = display("a" + controls + "b\x1b[31m\x9b\n\t")
    assert shown == ("a\\u061c\\u200e\\u200f\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069b"
                     "^[[31m\\x9b\n\t")
    assert display("a\x1b[31mb\u202e", keep_escape=True) == "a\x1b[31mb\\u202e"
    assert display("plain text, é, 中文, emoji 🙂") == "plain text, é, 中文, emoji 🙂"


async def test_the_agent_panel_shows_a_models_text_as_text(make_app, shop_catalog, monkeypatch, sql_ready):
    """A model's name, thought and action (the fake OpenAI server, the real client) with markup
    and a right-to-left override: the panel, its title and the turn show them as text."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "agents"))
    from fake_openai_server import FakeOpenAIServer, Script, fenced

    from icplay.frontend.config import AgentChoice

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    thought = f"x[/y] [@click=app.quit]think[/] [link=https://e.vil]here[/link] abc{RLO}fdp"
    server = FakeOpenAIServer(Script([thought + "\n" + fenced("SELECT '[bold]b' AS \"x[/y]\"")], then="submit"),
                              streaming=True).start()
    try:
        choice = AgentChoice(policy="llm", model="[link=https://e.vil]m[/link]", base_url=server.url, mode="confirm")
        app = make_app(env="sql", catalog=shop_catalog(), task="s1", watch=choice, sandbox=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.request is not None
                           and app.screen.request.open, 30, "the proposal")
            panel = app.screen.panel
            await pilot.pause()
            assert border_title(panel) == "Agent · [link=https://e.vil]m[/link]"
            body = text_of(panel.query_one("#agent-body"))
            assert "x[/y] [@click=app.quit]think[/] [link=https://e.vil]here[/link] abc\\u202efdp" in body
            assert "SELECT '[bold]b' AS \"x[/y]\"" in body and RLO not in body
            await pilot.click("#agent-body")
            await pilot.press("ctrl+y")                                        # approve
            await wait_for(pilot, lambda: turn_count(app) == 1, 20, "the turn")
            from icplay.tui.widgets.results import ResultsTable

            await wait_for(pilot, lambda: app.screen.query_one(ResultsTable).columns == ["x[/y]"], 10, "the rows")
            assert app.is_running and isinstance(app.screen, LiveScreen)
    finally:
        server.stop()


def plain(argv: list[str], script: str, home) -> str:
    import os
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv, "--plain"], cwd=Path(__file__).parents[3],
                          env={**os.environ, "ICPLAY_HOME": str(home)}, input=script, text=True, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_plain_shows_bidirectional_controls_as_escapes_sql(tmp_path):
    out = plain(["play", "sql"], "SELECT 'abc' || char(8238) || 'fdp.exe' AS name, char(8295) || 'x' AS \"x[/y]\";\n"
                                 ":quit\n", tmp_path)
    assert "abc\\u202efdp.exe" in out and "\\u2067x" in out
    assert RLO not in out and "\u2067" not in out


@pytest.mark.usefixtures("bwrap_ready")
def test_plain_shows_bidirectional_controls_as_escapes_bash(tmp_path):
    out = plain(["play", "bash", "--sandbox", "bwrap"],
                "touch /tmp/abc$'\\u202e'fdp.exe; ls /tmp; printf 'q\\xe2\\x80\\x8fz\\n'\n:quit\n", tmp_path)
    assert "abc\\u202efdp.exe" in out and "q\\u200fz" in out
    assert RLO not in out and "\u200f" not in out


async def test_the_turn_and_submit_dialogs_show_a_turns_text_as_text():
    """The turn dialog (thought, proposal, action, comment, observation with an OSC 8 link) and
    the submit confirmation (the task and what it scores) of a hostile turn."""
    from textual.app import App

    from icplay.episode import Turn
    from icplay.tui.screens.modals import ConfirmScreen, TurnScreen, submit_question

    turn = Turn(index=0, author="agent-edited-by-human", action="echo 'x[/y]'", proposed="echo '[bold]b'",
                observation=f"\x1b]8;;https://e.vil\x07[@click=app.quit]out[/]\x1b]8;;\x07 abc{RLO}fdp\n",
                thought="[link=https://e.vil]t[/link]", comment="[@click=app.quit]c[/]", exit_code=0)
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(TurnScreen(turn))
        await pilot.pause()
        said = "\n".join(text_of(w) for w in app.screen.query("Static"))
        for text in ("echo 'x[/y]'", "echo '[bold]b'", "[link=https://e.vil]t[/link]", "[@click=app.quit]c[/]",
                     "[@click=app.quit]out[/] abc\\u202efdp"):
            assert text in said, text
        assert RLO not in said and "e.vil\x07" not in said
        for static in app.screen.query("Static"):
            await pilot.click(static)
        assert app.is_running
        app.pop_screen()
        await app.push_screen(ConfirmScreen(submit_question("x[/y]/[@click=app.quit]t[/]", "bash", [turn])))
        await pilot.pause()
        assert "Submit x[/y]/[@click=app.quit]t[/] for scoring" in text_of(app.screen.query_one("#question"))
        await pilot.click("#question")
        assert app.is_running
