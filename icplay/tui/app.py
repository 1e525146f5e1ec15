"""The icplay playground: a Textual app where a human solves Bash and SQL tasks.

``PlayApp`` owns what outlives one screen: the sandbox pool (each play screen leases its
own env from it and gives it back when left; envs are kept for the next screen and
closed when the app ends), the baseline session, the command history and the config. Screens: the task picker and the play
screen (icplay.tui.screens), plus dialogs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from textual import events
from textual.app import App, SystemCommand
from textual.screen import Screen

from icplay.envs import Env
from icplay.episode import Trajectory
from icplay.languages import find as find_language
from icplay.languages import get, make_env
from icplay.paths import home_dir
from icplay.session import DEFAULT_SESSION, SOLVED, SUBMITTED, Session, format_duration
from icplay.study.queue import Queue
from icplay.study.rules import FREE, PlayRules
from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.registry import TaskSet, find_set, task_sets
from icplay.frontend.config import (DARK_THEME, LIGHT_THEME, AgentChoice, Config, agent_choice,
                                    remember_agent)
from icplay.tui.keys import KEYS, bindings, unknown_ids
from icplay.tui.screens.modals import HelpScreen, QueueDoneScreen, TaskScreen
from icplay.tui.screens.picker import PickerScreen
from icplay.frontend.leases import EnvFactory, SandboxPool
from icplay.tui.screens.live import LiveScreen
from icplay.tui.shown import safe, shown
from icplay.tui.widgets.command import History
from icplay.tui.widgets.panels import QueryPanel
from icplay.store import StoreError
from icplay.study.model import StudyFileError
from icplay.study.queue import resolve


@dataclass
class SetEntry:
    name: str
    env: str
    description: str
    available: bool
    needs_image: bool
    task_set: TaskSet


class Catalog:
    """The task sets the picker offers, loaded on demand and cached."""

    def __init__(self, env: str | None = None, tasks: str | None = None):
        if tasks:
            chosen = [find_set(tasks, env)]
        else:
            chosen = [s for s in task_sets() if env is None or s.env == env]
            chosen = [s for s in chosen if find_language(s.env) is not None]   # the languages icplay can run
        self._sets = {s.name: s for s in chosen}
        self._tasks: dict[str, list[Task]] = {}

    @classmethod
    def from_sets(cls, sets: list[TaskSet]) -> "Catalog":
        """A catalog of exactly these sets (e.g. a set with its own databases folder)."""
        catalog = cls.__new__(cls)
        catalog._sets = {s.name: s for s in sets}
        catalog._tasks = {}
        return catalog

    def default_set(self, env: str | None, tasks: str | None, from_catalog: bool = False) -> str | None:
        """The set a ``--task`` id is looked up in: ``--tasks``, else the bundled set of
        ``env`` (as ``icplay play --plain`` does), else None (every set)."""
        names = [s.name for s in self.sets()]
        if (tasks or from_catalog) and names:
            return names[0]
        if env in names:
            return env
        return None

    def sets(self) -> list[SetEntry]:
        return [SetEntry(s.name, s.env, s.description, s.available, s.needs_image, s) for s in self._sets.values()]

    def tasks(self, name: str) -> list[Task]:
        if name not in self._tasks:
            self._tasks[name] = self._sets[name].load()
        return self._tasks[name]

    def find(self, task_id: str, set_name: str | None = None) -> Task:
        names = [set_name] if set_name else [s.name for s in self._sets.values() if s.available]
        for name in names:
            for task in self.tasks(name):
                if task.id == str(task_id):
                    return task
        where = set_name or ", ".join(names) or "the bundled sets"
        raise TaskFileError(where, f"no task with id {task_id!r}")


def default_env_factory(kind: str, sandbox: str | None, image: str | None,
                        progress: Callable[[str], None] | None = None) -> Env:
    return make_env(kind, sandbox=sandbox, image=image if get(kind).uses_image else None, progress=progress)


# the input widget of each pane's key scope (``LanguageSpec.keys_scope``)
INPUT_WIDGETS = {"bash": "#command", "sql": "#editor", "python": "#editor"}


# the app's notice when no annotator is set: short enough for a 40-column toast, and not markup
# (``[human]`` is config.toml's table, which markup would swallow)
ANNOTATOR_TOAST = "Episodes record none. Name yourself: --annotator NAME, $ICPLAY_ANNOTATOR or config.toml [human]."


class PlayApp(App):
    """The playground. See docs/tui.md for the keys, the layout and the files it writes."""

    CSS_PATH = "app.tcss"
    TITLE = "icplay"
    BINDINGS = bindings("app")
    # the layout's classes on every screen (app.tcss): below 60 columns or 20 rows panels go or
    # shrink so that what is left stays usable, down to 40x12
    HORIZONTAL_BREAKPOINTS = [(0, "-tiny"), (60, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (20, "-tall")]

    def __init__(self, *, env: str | None = None, tasks: str | None = None, task: str | None = None,
                 sandbox: str | None = None, session: str | None = None, image: str | None = None,
                 config: Config | None = None, home: str | Path | None = None,
                 clock: Callable[[], float] | None = None, frozen: bool = False,
                 env_factory: EnvFactory | None = None, catalog: Catalog | None = None,
                 out: str | Path | None = None, watch: "AgentChoice | None" = None,
                 watch_session: str | None = None, watch_policy: tuple | None = None, watch_limits=None,
                 annotator: str | None = None, annotator_note: bool = False, study: "Queue | None" = None):
        """``annotator``: who plays (recorded in every episode and human turn); with
        ``annotator_note`` the app says at start when there is none. ``study``: the annotator's
        queue of a study (``icplay play --study``): its tasks open in her order, under its
        rules (``self.rules``, asked by the screens); with ``watch`` too (``icplay watch
        --study``) the agent works each of them on the watch screen, saved in her queue."""
        super().__init__()
        self.config = config or Config()
        self.home = Path(home) if home is not None else home_dir()
        self.env_name = env
        self.sandbox = sandbox
        self.image = image
        self.frozen = frozen
        self.clock = clock or time.monotonic
        self.annotator = annotator
        self.annotator_note = annotator_note and annotator is None
        self.queue = study
        self.rules = PlayRules.of(study.study) if study is not None else FREE
        self.session = (study.session() if study is not None
                        else Session(session or DEFAULT_SESSION, home=self.home, root=out, annotator=annotator))
        self.catalog = catalog or Catalog(env, tasks)
        self.start_task_id = task
        self.only_task: str | None = None    # icplay watch --task ID: that task only, no next one
        self.done_message: str | None = None   # a study's queue is done: said on screen, and at exit
        self.watch_agent = watch             # icplay watch: the task opens on the watch screen (not `watch`: Textual's method)
        self.watch_policy = watch_policy     # (policy, its description) built by icplay watch, or None
        self.watch_limits = watch_limits
        self._watch_session_name = watch_session or session or "watch"
        self._watch_session: Session | None = None
        self._out = out
        self.start_set = self.catalog.default_set(env, tasks, from_catalog=catalog is not None)
        self.env_factory = env_factory or default_env_factory
        self.pool = SandboxPool(self.env_factory, self.sandbox_for, image)
        self._histories: dict[str, History] = {}
        if self.config.theme in self.available_themes:
            self.theme = self.config.theme

    # -- lifecycle -----------------------------------------------------------------------

    def on_mount(self, event: events.Mount) -> None:
        if self.config.keys:
            bad = unknown_ids(self.config.keys)
            if bad:
                self.notify(safe(f"config.toml names unknown key ids: {', '.join(bad)}"), severity="warning",
                            timeout=8, markup=False)
            self.set_keymap({k: v for k, v in self.config.keys.items() if k not in bad})
        self.say_annotator()
        if self.queue is not None:
            self.open_from_queue(self.start_task_id)
        elif self.start_task_id is not None:
            task = self.catalog.find(self.start_task_id, self.start_set)
            if self.watch_agent is not None:
                self.push_screen(self._watch_screen(task, self.watch_agent))
            else:
                self.push_screen(LiveScreen(task))
        else:
            self.push_screen(PickerScreen(self.start_set))

    def say_annotator(self) -> None:
        if self.annotator_note:
            self.notify(ANNOTATOR_TOAST, title="No annotator set", severity="warning", timeout=8, markup=False)

    def sessions(self) -> list[Session]:
        """The sessions this app has opened (the baseline's, the watched agents', the forks')."""
        return [self.session, *(s for s in (self._watch_session, getattr(self, "_fork_session", None)) if s)]

    def record_gold_seen(self, trajectory: Trajectory) -> None:
        """The score dialog showed this attempt's gold: recorded on its file (``gold_seen_at``),
        so later attempts of the task are marked as after it."""
        for session in self.sessions():
            try:
                if session.mark_gold_seen(trajectory):
                    return
            except StoreError as exc:       # a full disk: said, the dialog stays usable
                self.notify(safe(f"The gold reveal could not be recorded: {exc}"), severity="error", timeout=10,
                            markup=False)
                return

    def sandbox_for(self, kind: str) -> str | None:
        spec = find_language(kind)
        if self.sandbox and spec is not None and self.sandbox in spec.sandbox_names():
            return self.sandbox
        return None

    def close_envs(self, wait: float = 15.0) -> None:
        """After the app has exited: let a running step finish (it saves its turn), then close."""
        self.pool.close(wait)

    @property
    def watch_session(self) -> Session:
        """Where watched (agent) episodes are saved: apart from the human's own baseline; in a
        study, the annotator's queue (she supervised them)."""
        if self.queue is not None:
            return self.session
        if self._watch_session is None:
            self._watch_session = Session(self._watch_session_name, home=self.home, root=self._out,
                                          annotator=self.annotator)
        return self._watch_session

    def _watch_screen(self, task: Task, agent: "AgentChoice", retry: bool = False):
        policy = self.watch_policy if agent is self.watch_agent else None
        return LiveScreen(task, agent, retry=retry, limits=self.watch_limits, policy=policy)

    def open_watch(self, task: Task, agent: "AgentChoice | None" = None, retry: bool = False) -> None:
        """Let an agent try ``task`` (the picker's key): the given choice, else the last use,
        else config.toml's [agent]. A stopped watched episode is reopened (turns replayed)."""
        agent = agent or self.watch_agent or agent_choice(self.config, self.home)
        if self.queue is not None:
            if retry and not self._study_retry(task):
                return
        else:
            remember_agent(agent, self.home)
        screen = self._watch_screen(task, agent, retry=retry)
        if isinstance(self.screen, LiveScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def history_for(self, kind: str) -> History:
        if kind not in self._histories:
            path = self.home / "history" / kind if self.config.history else None
            self._histories[kind] = History(path)
        return self._histories[kind]

    # -- navigation ------------------------------------------------------------------------

    def open_task(self, task: Task, retry: bool = False) -> None:
        """Open a task: resumed if it has unsubmitted turns, shown read-only if it was
        submitted (unless ``retry``: then it starts over and the old attempt is kept)."""
        if retry and self.queue is not None and not self._study_retry(task):
            return
        if isinstance(self.screen, LiveScreen):
            self.switch_screen(LiveScreen(task, retry=retry))
        else:
            self.push_screen(LiveScreen(task, retry=retry))

    # -- a study's queue ----------------------------------------------------------------------
    def open_from_queue(self, ref: str | None = None) -> None:
        """The queue's task ``ref`` (a ref or an id), else its next task not done; when every
        task is done the app says so on screen (QueueDoneScreen) and, when quit, at exit."""
        assert self.queue is not None
        queue = self.queue.refresh()
        entry = queue.entry(ref) if ref is not None else queue.next_entry()
        if entry is None:
            self.done_message = (f"{queue.annotator}'s queue is done: {queue.done} of {len(queue.entries)} tasks, "
                                 f"{format_duration(queue.time_worked)} worked")
            if isinstance(self.screen, LiveScreen):
                self.switch_screen(QueueDoneScreen(self.done_message))
            else:
                self.push_screen(QueueDoneScreen(self.done_message))
            return
        try:
            task = resolve(entry.ref, str(queue.study.path), queue.study.task_files)
        except StudyFileError as exc:
            self.notify(safe(exc), severity="error", timeout=10, markup=False)
            return
        latest = entry.latest
        retry = latest is not None and self.rules.timed_out(latest)
        if retry and not self._study_retry(task):      # ended by the time limit: never resumed
            if ref is not None:
                self.open_from_queue()                  # said why; her next task instead
            return
        # a submitted task asked for by name is shown as it ended
        screen = (LiveScreen(task, retry=retry) if self.watch_agent is None
                  else self._watch_screen(task, self.watch_agent, retry=retry))
        if isinstance(self.screen, LiveScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def _study_retry(self, task: Task) -> bool:
        """May ``task`` be tried again under the study's rules (``Queue.start_again``)? Said when not."""
        assert self.queue is not None
        refusal = self.queue.start_again(task)
        if refusal is not None:
            self.notify(safe(refusal), title="No retry", severity="warning", timeout=8, markup=False)
        return refusal is None

    def open_next(self, after: Task, session: Session | None = None,
                  opener: Callable[[Task], None] | None = None) -> None:
        """The next task of the set not submitted in ``session`` (the baseline's by default),
        opened with ``opener`` (the play screen by default; the watch screen passes its own).
        In a study: the queue's next task."""
        if self.queue is not None:
            self.open_from_queue()
            return
        if self.only_task is not None:
            self.notify(f"Started with --task {self.only_task}: that task only. Ctrl+B lists the others, "
                        "Ctrl+Q quits.", title="No next task", timeout=8, markup=False)
            return
        tasks = self.catalog.tasks(after.set) if after.set in {s.name for s in self.catalog.sets()} else [after]
        progress = (session or self.session).progress(tasks)
        keys = [t.key for t in tasks]
        start = keys.index(after.key) + 1 if after.key in keys else 0
        for task in tasks[start:] + tasks[:start]:
            if task.key != after.key and progress.by_task[task.key].state not in (SOLVED, SUBMITTED):
                (opener or self.open_task)(task)
                return
        self.notify("Every other task of this set is submitted.", title="All done")
        self.show_picker()

    def show_picker(self) -> None:
        if self.queue is not None:          # a study's queue chooses the tasks, not a list
            self.notify("In a study your queue chooses the next task: Ctrl+N opens it.", timeout=6)
            return
        for screen in reversed(self.screen_stack):
            if isinstance(screen, PickerScreen):
                while self.screen is not screen:
                    self.pop_screen()
                return
        set_name = self.screen.task_record.set if isinstance(self.screen, LiveScreen) else None
        self.switch_screen(PickerScreen(set_name if set_name in {s.name for s in self.catalog.sets()} else None))

    # -- actions -----------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Quit; after a study's queue is done, the terminal is told so too."""
        self.exit(message=shown(self.done_message) if self.done_message else None)

    def action_show_task(self) -> None:
        """The whole task of the screen's task panel, in a modal that scrolls."""
        panels = self.screen.query(QueryPanel)
        if panels and not isinstance(self.screen, TaskScreen):
            panel = panels.first()
            self.push_screen(TaskScreen(str(panel.border_title or "Task"), panel.text))

    def on_query_panel_show_whole(self, message: QueryPanel.ShowWhole) -> None:
        message.stop()
        self.action_show_task()

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT_THEME if self.current_theme.dark else DARK_THEME

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette: every playground action (with its key), then Textual's own."""
        keymap = getattr(self, "_keymap", {}) or {}
        scopes = {"app"}
        if isinstance(screen, PickerScreen):
            scopes.add("picker")
        if isinstance(screen, LiveScreen):
            scopes |= {"play", screen.language.keys_scope}
            if screen.agent is not None:
                scopes.add("watch")
        for key in KEYS:
            if key.scope not in scopes or not key.palette:
                continue
            keys = keymap.get(key.id, key.keys).split(",")[0]
            yield SystemCommand(f"{key.description}  ({keys})", key.help, partial(self._palette, key.scope, key.action))
        yield from super().get_system_commands(screen)

    async def _palette(self, scope: str, action: str) -> None:
        screen = self.screen
        if scope == "app":
            await self.run_action(action)
        elif scope in INPUT_WIDGETS:
            widget = screen.query_one(INPUT_WIDGETS[scope])
            await widget.run_action(action)
        else:
            await screen.run_action(action)
