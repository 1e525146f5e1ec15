"""Every key binding of the playground, with a stable id.

The ids are what a user remaps in ``config.toml`` (``[keys]`` table, applied with
``App.set_keymap``); the help screen, the command palette and docs/tui.md are all made
from this one list, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    id: str
    keys: str
    action: str
    description: str
    help: str
    scope: str                  # app | picker | play | fork | watch | bash | sql | python | modal
    show: bool = True
    priority: bool = False
    palette: bool = True        # offered in the command palette

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.show, priority=self.priority,
                       id=self.id, tooltip=self.help)


KEYS: list[Key] = [
    # everywhere
    Key("app.help", "f1", "help", "Help", "Show the keys and how the playground works", "app"),
    Key("app.theme", "ctrl+t", "toggle_theme", "Theme", "Switch between the light and the dark theme", "app",
        show=False),
    Key("app.task", "alt+t", "show_task", "Task", "Show the whole task text (a small panel may show only its start)",
        "app", show=False, priority=True),   # before an editor, which would type the "t" a terminal sends with it
    Key("app.quit", "ctrl+q", "quit", "Quit", "Quit (the task's turns and time are saved; it resumes next time)",
        "app", priority=True),
    # task picker
    Key("picker.open", "enter", "open_task", "Open", "Open the highlighted task", "picker"),
    Key("picker.sets", "f2", "focus_sets", "Sets", "Move to the list of task sets", "picker"),
    Key("picker.tasks", "f3", "focus_tasks", "Tasks", "Move to the list of tasks", "picker"),
    Key("picker.next", "ctrl+n", "next_task", "Next unsolved", "Open the next task not submitted yet", "picker"),
    Key("picker.watch", "ctrl+w", "watch_task", "Agent tries",
        "Let an agent try the highlighted task (model and strategy from config.toml [agent], or the last use)",
        "picker"),
    # working on a task
    Key("play.submit", "ctrl+s", "submit", "Submit", "Submit the task for scoring (asks to confirm)", "play"),
    Key("play.interrupt", "ctrl+c", "interrupt", "Interrupt", "Stop the running command or query", "play",
        priority=True),
    Key("play.pause", "f4", "pause", "Pause", "Pause the clock of time worked (hides the task)", "play"),
    Key("play.turns", "f3", "focus_turns", "Turns", "Move to the trajectory sidebar; Enter shows a turn", "play"),
    Key("play.input", "f2", "focus_input", "Input", "Move back to the command or query input", "play", show=False),
    Key("play.score", "f9", "show_score", "Score", "Show the score again (after submitting)", "play"),
    Key("play.gold", "ctrl+g", "reveal_gold", "Gold", "Reveal the gold solution and its output (after submitting)",
        "play"),
    Key("play.next", "ctrl+n", "next_task", "Next", "Go to the next task not submitted yet (after submitting)",
        "play"),
    Key("play.retry", "f8", "retry", "Retry", "Start this task again from a fresh sandbox (after submitting)",
        "play"),
    Key("play.picker", "ctrl+b", "back_to_picker", "Tasks", "Back to the task list (work is saved)", "play",
        show=False),
    # a fork opened from the viewer (icplay view): the play keys above, and the way back shown
    Key("fork.back", "ctrl+b", "back_to_picker", "Episodes", "Back to the episode list (the fork stays saved)",
        "fork"),
    # watching an agent (the watch screen; the play keys above work there too)
    Key("watch.approve", "ctrl+y", "approve", "Approve",
        "Run the agent's proposal as it is (after a failure or an unparsable reply: ask the model again)",
        "watch", priority=True),
    Key("watch.edit", "ctrl+e", "edit", "Edit",
        "Edit the proposal in the command line (or the SQL editor); what runs is recorded as edited",
        "watch", priority=True),
    Key("watch.reject", "ctrl+x", "reject", "Reject",
        "Reject the proposal with a comment; the comment reaches the model in its next prompt",
        "watch", priority=True),
    Key("watch.take_over", "f7", "take_over", "Take over",
        "Human mode: you type the actions (the model is not asked; a call under way is cancelled)", "watch", priority=True),
    Key("watch.hand_back", "f7", "hand_back", "Hand back",
        "Give the episode back to the agent; its prompt shows your turns as yours", "watch", priority=True),
    Key("watch.reasoning", "alt+r", "toggle_reasoning", "Reasoning",
        "Show the model's whole reasoning, or fold it to one line", "watch", show=False, priority=True),
    Key("watch.mode", "f10", "cycle_mode", "Mode", "Switch mode: auto → confirm → human (at any moment)",
        "watch", priority=True),
    Key("watch.auto", "alt+1", "set_mode('auto')", "Auto", "Auto mode: proposals run as they come", "watch",
        show=False, priority=True),
    Key("watch.confirm", "alt+2", "set_mode('confirm')", "Confirm",
        "Confirm mode: each proposal waits for approve, edit or reject", "watch", show=False, priority=True),
    Key("watch.human", "alt+3", "set_mode('human')", "Human", "Human mode: you type the actions", "watch",
        show=False, priority=True),
    Key("watch.pause", "alt+p", "pause_agent", "Pause after step",
        "Auto mode: finish the step under way, then wait", "watch", show=False, priority=True),
    Key("watch.step", "alt+n", "step_one", "Step one", "Auto mode: let exactly one more step through", "watch",
        show=False, priority=True),
    Key("watch.resume", "alt+g", "resume_agent", "Go on", "Auto mode: go on after a pause", "watch", show=False, priority=True),
    Key("watch.label", "alt+l", "label_turn", "Label turn",
        "Label the last turn good, bad or neutral, with a note (when the agent waits, or after the end; "
        "for icplay export steps)", "watch", show=False, priority=True),
    Key("watch.branch", "alt+b", "branch_episode", "Branch",
        "After the end: branch the episode at the highlighted (else the last) turn — recorded, correction, "
        "proposal and N samples of the agent's model, each in a fresh sandbox, scored (icplay branch)",
        "watch", show=False, priority=True),
    Key("watch.stop", "f12", "stop", "Stop",
        "Stop the episode: a model call under way is cancelled (no turn), a command is interrupted; "
        "saved as stopped, it can be reopened later", "watch", priority=True),
    # the Bash command line
    # (Enter and Ctrl+J are handled by the command line itself, in the order the keys came:
    # a priority binding would run before the characters typed just ahead of it.)
    Key("bash.run", "enter", "run", "Run", "Run the command (a line ending in \\ continues instead)", "bash",
        show=False, palette=False),
    Key("bash.newline", "ctrl+j,alt+enter,shift+enter", "newline", "New line",
        "Insert a line break in the command", "bash", show=False, palette=False),
    Key("bash.search", "ctrl+r", "search_history", "History", "Search the command history", "bash"),
    # the SQL editor
    Key("sql.run", "f5,ctrl+enter,ctrl+j", "run", "Run", "Run the statement under the cursor, or the selection",
        "sql"),
    Key("sql.schema", "f6", "toggle_schema", "Schema", "Show or hide the schema browser", "sql",
        priority=True),
    Key("sql.results", "ctrl+o", "focus_results", "Results",
        "Move to the results table (Escape moves on to the schema browser)", "sql", show=False, priority=True),
    Key("sql.select_all", "ctrl+a", "select_all", "Select all", "Select all the SQL (Home goes to the line start)",
        "sql", show=False),
    Key("sql.earlier", "ctrl+up", "history(-1)", "Earlier query",
        "Put the query run before in the editor: this episode's, then earlier sessions' (a study may turn it off)",
        "sql", show=False),
    Key("sql.later", "ctrl+down", "history(1)", "Later query", "Go back down the queries run, to what you typed",
        "sql", show=False),
    Key("sql.search", "ctrl+r", "search_history", "History",
        "Search the queries run before, this episode's and earlier sessions' (a study may turn it off)", "sql"),
    # (Alt keys are priority: a terminal sends the letter with them, which the editor would type)
    Key("sql.copy", "alt+c", "copy_result('csv')", "Copy result", "Copy the result grid to the clipboard as CSV",
        "sql", show=False,
        priority=True),
    Key("sql.copy_markdown", "alt+m", "copy_result('markdown')", "Copy as Markdown",
        "Copy the result grid to the clipboard as a Markdown table", "sql", show=False,
        priority=True),
    Key("sql.save", "alt+s", "save_result", "Save result",
        "Save the result grid to a file: CSV, or a Markdown table for a name ending in .md", "sql", show=False,
        priority=True),
    # the Python editor (Enter is handled by the editor itself, as for the Bash command line)
    Key("python.enter", "enter", "enter", "Enter", "Run a complete statement; in a block, a new line (an empty "
        "line runs the block)", "python", show=False, palette=False),
    Key("python.run", "f5,ctrl+enter,ctrl+j", "run", "Run all", "Run everything in the editor", "python"),
    Key("python.select_all", "ctrl+a", "select_all", "Select all", "Select all the code (Home goes to the line "
        "start)", "python", show=False),
]

BY_ID = {k.id: k for k in KEYS}


def bindings(scope: str) -> list[BindingType]:
    """A scope's keys as a BINDINGS list (typed as Textual's BINDINGS are)."""
    return [k.binding() for k in KEYS if k.scope == scope]


def keys_for(scope: str) -> list[Key]:
    return [k for k in KEYS if k.scope == scope]


def active_keys(app, key_id: str) -> set[str]:
    """The keys bound to ``key_id`` now (the user's keymap, else the default)."""
    keymap = getattr(app, "_keymap", None) or {}
    keys = keymap.get(key_id) or BY_ID[key_id].keys
    return {k.strip() for k in keys.split(",") if k.strip()}


def unknown_ids(keymap: dict[str, str]) -> list[str]:
    return sorted(set(keymap) - set(BY_ID))


def key_label(key: str) -> str:
    """A key as a hint says it: "f5" -> "F5", "ctrl+enter" -> "Ctrl+Enter"."""
    return "+".join(part.capitalize() for part in key.split("+"))


def run_key_label(app, scope: str) -> str:
    """The key that runs what is typed in a language's input (``LanguageSpec.keys_scope``), as
    a hint says it: Enter on the Bash command line, F5 in the SQL and Python editors (there
    Enter inserts a line). The user's keymap counts; the first key listed is the one named."""
    key = next((k for k in KEYS if k.scope == scope and k.action == "run"), None)
    if key is None:
        return "Enter"
    keymap = getattr(app, "_keymap", None) or {}
    keys = [k.strip() for k in (keymap.get(key.id) or key.keys).split(",") if k.strip()]
    return key_label(keys[0]) if keys else "Enter"
