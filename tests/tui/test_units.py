"""The playground's pure parts: clock, config, keys, SQL statement finder, output feed,
history, sessions. No app runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from icplay.episode import Trajectory, Turn
from icplay.session import IN_PROGRESS, NEW, SOLVED, SUBMITTED, Session, format_duration
from icplay.tasks.model import Task
from icplay.frontend.clock import WorkClock
from icplay.frontend.config import ConfigError, load_config
from icplay.tui.keys import BY_ID, KEYS, unknown_ids
from icplay.tui.sqltext import offset_of, statement_at, statement_spans
from icplay.tui.widgets.command import History
from icplay.tui.widgets.output import OutputFeed, clean_line, strip_ansi

ROOT = Path(__file__).resolve().parents[2]


def test_clock_counts_only_without_holds():
    now = [100.0]
    clock = WorkClock(base=5, now=lambda: now[0])
    now[0] += 10
    assert clock.elapsed() == 15
    clock.hold("paused")
    now[0] += 50
    clock.hold("modal")
    clock.release("paused")          # still held by the dialog
    now[0] += 50
    assert clock.elapsed() == 15 and not clock.running
    clock.release("modal")
    now[0] += 1
    assert clock.elapsed() == 16
    clock.set_base(100)
    now[0] += 2
    assert clock.elapsed() == 102


def test_config_file_and_errors(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('theme = "textual-light"\nstrict = true\n[keys]\n"play.submit" = "f10, ctrl+s"\n'
                    '[sql]\nschema_browser = false\n')
    config = load_config(path, environ={})
    assert config.theme == "textual-light" and config.strict and not config.show_schema
    assert config.keys == {"play.submit": "f10,ctrl+s"}
    assert load_config(tmp_path / "missing.toml", environ={"ICPLAY_THEME": "nord"}).theme == "nord"
    path.write_text("strict = 'yes'\n")
    with pytest.raises(ConfigError, match="setting 'strict' must be a bool"):
        load_config(path, environ={})
    path.write_text("[keys\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path, environ={})


def test_keys_have_unique_ids_and_are_documented():
    assert len(BY_ID) == len(KEYS)
    assert unknown_ids({"play.submit": "f10", "nope": "x"}) == ["nope"]
    doc = (ROOT / "docs" / "tui.md").read_text()
    for key in KEYS:
        assert f"`{key.id}`" in doc, f"docs/tui.md does not list {key.id}"


@pytest.mark.parametrize("text, cursor, expected", [
    ("SELECT 1; SELECT 2;", 3, "SELECT 1"),
    ("SELECT 1; SELECT 2;", 12, "SELECT 2"),
    ("SELECT 1;\n\nSELECT 2", 10, "SELECT 2"),
    ("SELECT ';' AS x; SELECT 3", 5, "SELECT ';' AS x"),
    ("-- a; comment\nSELECT 4;", 20, "-- a; comment\nSELECT 4"),
    ("SELECT 5;   ", 11, "SELECT 5"),
    ("", 0, ""),
    ("SELECT 6\n\nSELECT 7;", 16, "SELECT 7"),               # the first lost its ';': a blank line parts them
    ("SELECT 6\n  \nSELECT 7", 2, "SELECT 6"),
    ("SELECT 'a\n\nb' AS x", 3, "SELECT 'a\n\nb' AS x"),     # a blank line inside a string is not a break
    ("SELECT 8\nFROM t\n", 17, "SELECT 8\nFROM t"),
])
def test_statement_under_cursor(text, cursor, expected):
    assert statement_at(text, cursor) == expected


def test_statement_spans_and_offsets():
    assert len(statement_spans("a; b; ;c")) == 3
    assert offset_of("ab\ncd", 1, 1) == 4


def test_output_feed_batches_on_line_breaks_and_drops_the_middle_of_floods():
    feed = OutputFeed(max_pending=100)
    feed.feed("one\ntw")
    assert feed.take(1000) == ("one\n", 0)
    feed.feed("o\n")
    assert feed.take(1000) == ("two\n", 0)
    feed.feed("partial")
    assert feed.take(1000) == ("", 0)
    assert feed.take(1000, final=True) == ("partial", 0)
    for i in range(100):
        feed.feed(f"line {i}\n")
    text, skipped = feed.take(1000)
    assert skipped > 0 and text.endswith("line 99\n") and len(text) <= 100


def test_terminal_line_cleaning():
    assert strip_ansi("\x1b[1;34mapp\x1b[0m") == "app"
    assert clean_line("10%\r50%\r100%") == "100%"
    assert clean_line("a\tb") == "a       b"


def test_history_persists_multiline_commands(tmp_path):
    history = History(tmp_path / "h")
    history.add("echo a")
    history.add("echo a")              # consecutive duplicates kept once
    history.add("for i in 1 2; do\n  echo $i\ndone")
    again = History(tmp_path / "h")
    assert again.items == ["echo a", "for i in 1 2; do\n  echo $i\ndone"]
    assert again.search("ECHO") == ["for i in 1 2; do\n  echo $i\ndone", "echo a"]


def _task(i: int) -> Task:
    return Task(id=f"t{i}", set="demo", env="bash", query=f"q{i}", gold="true")


def _trajectory(task: Task, status: str, reward: float | None, worked: float) -> Trajectory:
    traj = Trajectory(task=task.to_dict(), env="bash", sandbox="bwrap",
                      turns=[Turn(index=0, author="human", action="ls", observation="")])
    traj.status, traj.reward, traj.best_reward, traj.time_worked = status, reward, reward, worked
    return traj


def test_session_progress_and_archive(tmp_path):
    session = Session("alice", home=tmp_path)
    tasks = [_task(i) for i in range(5)]
    session.save(_trajectory(tasks[0], "submitted", 1.0, 60))
    session.save(_trajectory(tasks[1], "submitted", 0.34, 30))
    session.save(_trajectory(tasks[2], "running", None, 12))
    progress = session.progress(tasks)
    assert (progress.solved, progress.attempted, progress.in_progress, progress.remaining) == (1, 1, 1, 3)
    assert progress.time_worked == 102
    assert [progress.by_task[t.key].state for t in tasks] == [SOLVED, SUBMITTED, IN_PROGRESS, NEW, NEW]
    assert session.path_for(tasks[0]) == tmp_path / "trajectories" / "alice" / "demo" / "t0.json"
    moved = session.archive(tasks[1])
    assert moved == tmp_path / "attempts" / "alice" / "demo" / "t1.1.json"
    assert session.load(tasks[1]) is None and [a.reward for a in session.attempts(tasks[1])] == [0.34]
    assert format_duration(3725) == "1:02:05" and format_duration(65) == "01:05"


def test_session_saves_database_values_json_lacks(tmp_path):
    import datetime
    import decimal

    session = Session("s", home=tmp_path)
    task = _task(9)
    traj = _trajectory(task, "running", None, 1)
    traj.turns[0].info = {"rows": [(decimal.Decimal("99.90"), datetime.date(2024, 1, 2), b"\x00a")]}
    session.save(traj)
    assert session.load(task).turns[0].info["rows"] == [["99.90", "2024-01-02", "\x00a"]]


def test_run_app_reports_user_errors_before_taking_the_screen(tmp_path, monkeypatch):
    from argparse import Namespace

    from icplay.tasks.model import TaskFileError
    from icplay.tui.launch import run_app

    monkeypatch.setenv("ICPLAY_HOME", str(tmp_path))
    args = Namespace(env="bash", tasks="bash", task="no-such-task", sandbox="bwrap", session=None, image=None)
    with pytest.raises(TaskFileError, match="no task with id 'no-such-task'"):
        run_app(args)
    with pytest.raises(TaskFileError, match="no such task set or file"):
        run_app(Namespace(env="bash", tasks="nope", task=None, sandbox=None, session=None, image=None))
    (tmp_path / "config.toml").write_text("[keys]\n\"play.submit\" = 3\n")
    with pytest.raises(TaskFileError, match="config.toml.*keys.play.submit"):
        run_app(Namespace(env=None, tasks=None, task=None, sandbox=None, session=None, image=None))


def test_the_sidebar_names_each_turns_author_and_its_reward():
    from icplay.tui.widgets.panels import TurnList, taken_numbers

    turns = [Turn(0, "agent", "ls", "a\n", exit_code=0, reward=0.0),
             Turn(1, "agent-edited-by-human", "ls -la", "", exit_code=0, proposed="ls -l", reward=0.5),
             Turn(2, "human", "", "", proposed="rm -rf /", comment="no", info={"rejected": True}),
             Turn(3, "human", "pwd", "/\n", exit_code=0)]
    lines = [TurnList().render_turn(t, n).plain for t, n in zip(turns, taken_numbers(turns))]
    assert lines[0].split()[:3] == ["1", "agent", "ls"] and "r=0.00" in lines[0]
    assert lines[1].split()[:2] == ["2", "edited"] and "r=0.50" in lines[1]
    # a rejected proposal is no turn taken (Turn.counts): no number, and the next turn is the 3rd
    assert lines[2].split()[:3] == ["–", "rejected", "rm"] and "not run" in lines[2]
    assert lines[3].split()[:2] == ["3", "you"]


def test_a_streamed_reply_splits_into_thought_and_the_action_so_far():
    from icplay.tui.widgets.agent import split_reply

    assert split_reply("Thought: look at the logs") == ("Thought: look at the logs", None)
    assert split_reply("I list them.\n```bash\nls /tes") == ("I list them.", "ls /tes")
    assert split_reply("I list them.\n```bash\nls /testbed\n```\nmore") == ("I list them.", "ls /testbed")
    assert split_reply("Thought: count\nAction: wc -l f") == ("Thought: count", "wc -l f")


def _icplay_textual_classes():
    import importlib
    import inspect
    import pkgutil

    import icplay.tui
    from textual.dom import DOMNode

    for module_info in pkgutil.walk_packages(icplay.tui.__path__, "icplay.tui."):
        module = importlib.import_module(module_info.name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                yield cls


# Textual reactives icplay sets on purpose (all others it might set would be by accident, as a
# screen's own ``loading`` flag once covered the viewer with Textual's spinner and stopped its layouts).
REACTIVES_SET_ON_PURPOSE = {"theme", "virtual_size", "highlighted", "show_root"}


def textual_names_hidden(cls) -> list[str]:
    """Names ``cls`` takes from a Textual base class by accident: a property or method
    redefined as something else (a method ``visible`` on a screen makes every child's
    ``visible`` a bound method), or one assigned on ``self`` (``self.watch = ...`` hides the
    method Textual watches reactives with; ``self.loading = ...`` sets Textual's reactive)."""
    import ast
    import inspect
    import textwrap
    from textual.reactive import Reactive

    def textual_member(name):
        for base in cls.__mro__[1:]:
            if base.__module__.startswith("textual") and name in vars(base):
                return vars(base)[name]
        return None

    hidden = []
    for name, value in vars(cls).items():
        member = textual_member(name)
        if isinstance(member, property) and not isinstance(value, property):
            hidden.append(name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    assigned = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Store)}
    for name in sorted(assigned):
        member = textual_member(name)
        if inspect.isfunction(member) or isinstance(member, property) and member.fset is None or (
                isinstance(member, Reactive) and name not in REACTIVES_SET_ON_PURPOSE):
            hidden.append(name)
    return [f"{cls.__module__}.{cls.__qualname__}.{name}" for name in hidden]


def test_no_widget_hides_a_textual_name():
    hidden = [name for cls in _icplay_textual_classes() for name in textual_names_hidden(cls)]
    assert hidden == []


def test_a_hidden_textual_name_is_caught():
    from textual.screen import Screen

    class Shadowing(Screen):
        def __init__(self):
            super().__init__()
            self.loading = True
            self.watch = None

        def visible(self):
            return []

    assert sorted(textual_names_hidden(Shadowing)) == [f"{__name__}.{Shadowing.__qualname__}.{name}"
                                                      for name in ("loading", "visible", "watch")]
