"""Pilot tests of the Python editor's keys: typing or pasting a block keeps its own
indentation (Enter's indentation never doubles it), Backspace removes a level, Ctrl+A
selects all, and what runs compiles. The editor alone, in a small app: no sandbox."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult

from icplay.tui.widgets.python_pane import PythonEditor

from tui_helpers import type_text


class EditorApp(App):
    def __init__(self):
        super().__init__()
        self.ran: list[str] = []

    def compose(self) -> ComposeResult:
        yield PythonEditor(id="editor")

    def on_mount(self) -> None:
        self.query_one(PythonEditor).focus()

    def on_python_editor_run(self, message: PythonEditor.Run) -> None:
        self.ran.append(message.code)


async def type_lines(pilot, lines: list[str]) -> None:
    """Each line typed key by key, then Enter (what a terminal without bracketed paste sends)."""
    for line in lines:
        await type_text(pilot, line)
        await pilot.press("enter")


async def test_a_block_typed_with_its_own_indentation_keeps_it_and_runs():
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        await type_lines(pilot, ["def f(x):", "    y = x + 1", "    if y > 2:", "        y = 0", "    return y"])
        assert editor.text == "def f(x):\n    y = x + 1\n    if y > 2:\n        y = 0\n    return y\n"
        assert app.ran == []
        await pilot.press("enter")            # Enter on the empty last line runs the block
        await pilot.pause()
        assert app.ran == ["def f(x):\n    y = x + 1\n    if y > 2:\n        y = 0\n    return y"]
        compile(app.ran[0], "<editor>", "exec")


async def test_enter_indents_when_the_user_types_no_indentation():
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        await type_lines(pilot, ["def f(x):", "if x:", "return 1", "y = 2"])
        # one level more after ':', one less after return; Tab adds a level on an indented line
        assert editor.text == "def f(x):\n    if x:\n        return 1\n    y = 2\n    "
        await pilot.press("tab")
        assert editor.text.endswith("\n        ")


async def test_a_block_pasted_on_an_indented_line_keeps_its_indentation():
    # (a terminal's paste reaches the app, which forwards it to the focused widget)
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        await type_lines(pilot, ["class A:"])
        assert editor.text == "class A:\n    "
        app.post_message(events.Paste("    def m(self):\n        return 2"))
        await pilot.pause()
        assert editor.text == "class A:\n    def m(self):\n        return 2"
        # a one-word paste on Enter's indentation goes where the cursor is
        await pilot.press("enter")
        app.post_message(events.Paste("x = 1"))
        await pilot.pause()
        assert editor.text.endswith("return 2\n    x = 1")   # (one level less after return)


async def test_backspace_in_the_indentation_removes_a_level():
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        await type_lines(pilot, ["for i in range(2):", "if i:"])
        assert editor.text.endswith("\n        ")
        await pilot.press("backspace")
        assert editor.text.endswith("if i:\n    ")
        await type_text(pilot, "print(i)")
        await pilot.press("backspace")         # outside the indentation: one character
        assert editor.text.endswith("\n    print(i")


async def test_ctrl_a_selects_all_and_typing_replaces_it():
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        await type_lines(pilot, ["def g():", "return 1"])
        await pilot.press("ctrl+a")
        assert editor.selected_text == editor.text == "def g():\n    return 1\n"
        await type_text(pilot, "z")
        assert editor.text == "z"
        await pilot.press("home")              # Home still goes to the line's start
        assert editor.cursor_location == (0, 0)


async def test_run_all_dedents_a_block_copied_from_inside_a_class():
    app = EditorApp()
    async with app.run_test() as pilot:
        editor = app.query_one(PythonEditor)
        editor.load_text("    def m(self):\n        return 1\n")
        await pilot.press("f5")
        await pilot.pause()
        assert app.ran == ["def m(self):\n    return 1"]
