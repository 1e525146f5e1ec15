"""``icplay view``: the episode browser.

``ViewApp`` is the playground app (its sandbox pool, sessions, config) opened on the
browser instead of the task picker, so that forking an episode opens the very play and
watch screens the playground uses. ``ViewScreen`` lists every saved episode as a row of
``icplay.formats.summary`` (read on a worker thread, cached by file), with a search, field
filters and a sort; Enter steps through an episode's turns (``view_episode``), Space marks
one and ``c`` compares it with the highlighted one, ``f`` narrows the table to an
episode's fork family. ``s`` filters on solved as InterCode counts it, ``v`` on the strict
verdict (an episode without one passes neither "yes" nor "no"), ``g`` on the scanners' flags
(``icplay.scan``: flagged at all, then each kind raised).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static

from icplay.formats.native import Skipped, skipped_note
from icplay.formats.summary import ANY_FLAG, EpisodeSummary, Filter, SORT_KEYS, family, scan_batches, select
from icplay.session import Session
from icplay.tui.app import PlayApp
from icplay.tui.keys import KEYS, unknown_ids
from icplay.tui.shown import safe
from icplay.tui.screens.modals import HelpRows, HelpScreen, binding_help
from icplay.tui.widgets.episodes import COLUMNS, EpisodeTable, date_text, summary_row
from icplay.tui.widgets.footer import KeysFooter
from icplay.tui.widgets.panels import StatusBar
from icplay.tui.screens.view_fork import start_fork
from icplay.tui.screens.live import LiveScreen
from icplay.tui.screens.view_episode import CompareScreen, EpisodeScreen

SORTS = tuple(SORT_KEYS)
AUTHORS = ("", "human", "agent", "mixed")


class ViewApp(PlayApp):
    """The playground opened on the episode browser (see the module docstring)."""

    CSS_PATH = str(Path(__file__).resolve().parent.parent / "app.tcss")   # the playground's own stylesheet

    def __init__(self, *, paths: list[str | Path] | None = None, fork_session: str = "forks", fork=None, **kwargs):
        """``fork``: (source trajectory, k, agent goes on, AgentChoice or None) to open at once
        (``icplay view FILE --fork K``), over the browser."""
        super().__init__(**kwargs)
        self.fork_at_start = fork
        self.view_paths = [Path(p) for p in paths] if paths else None
        self.fork_session_name = fork_session
        self._fork_session: Session | None = None

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()              # not the playground's task picker
        if self.config.keys:
            bad = unknown_ids(self.config.keys)
            self.set_keymap({k: v for k, v in self.config.keys.items() if k not in bad})
        self.say_annotator()
        self.push_screen(ViewScreen(self.view_paths))
        if self.fork_at_start is not None:
            source, k, agent, choice = self.fork_at_start
            start_fork(self.screen, source, k, agent, choice)

    @property
    def fork_session(self) -> Session:
        """Where forks are saved (a session of their own: the baseline's files stay as they are)."""
        if self._fork_session is None:
            self._fork_session = Session(self.fork_session_name, home=self.home, annotator=self.annotator)
        return self._fork_session

    async def refork(self, source, k: int, agent: bool, choice=None) -> None:
        """A fork's retry: leave the fork on screen (awaited: its runner saves it and lets the
        file go, and the store keeps it as an earlier attempt), then fork ``source`` at turn
        ``k`` again from the screen below."""
        await self.pop_screen()
        start_fork(self.screen, source, k, agent, choice)

    def action_help(self) -> None:
        """F1: the viewer's keys; over a fork's play or watch screen, the playground's."""
        if isinstance(self.screen, HelpScreen):
            return
        if any(isinstance(screen, LiveScreen) for screen in self.screen_stack):
            super().action_help()
            return
        self.push_screen(HelpScreen(viewer_help(), title="icplay view — keys", note=""))

    def show_picker(self) -> None:
        """A play screen's "back" returns to the browser (there is no task picker here)."""
        while len(self.screen_stack) > 2 and not isinstance(self.screen, ViewScreen):
            self.pop_screen()
        if isinstance(self.screen, ViewScreen):
            self.screen.reload()


def viewer_help() -> HelpRows:
    """The viewer's keys, screen by screen (each screen's own bindings)."""
    app_keys = [(key.keys, key.help) for key in KEYS if key.scope == "app"]
    return [("Everywhere", app_keys),
            ("Episode browser", binding_help(EpisodeTable.BINDINGS[-2:] + ViewScreen.BINDINGS)),
            ("One episode, turn by turn", binding_help(EpisodeScreen.BINDINGS)),
            ("Two episodes compared", binding_help(CompareScreen.BINDINGS))]


def _cycle(values: tuple | list, current):
    values = list(values)
    return values[(values.index(current) + 1) % len(values)] if current in values else values[0]


def family_line(fam: list, current: str) -> str:
    """An episode's family on one line: each member's id and what it forks (◀ marks ``current``)."""
    return "  ".join(
        (f"{m.id}" + (f" (fork of {m.forked_from['id']} at turn {m.forked_from['turn']})" if m.forked_from
                      else " (original)") + (" ◀" if m.id == current else "")) for m in fam)


def filter_text(parts: list[tuple[str, str]]) -> Text:
    """The filters line: each filter's name dimmed and its value (bold when it filters)."""
    text = Text()
    for key, value in parts:
        text.append(f"{key} ", style="dim")
        text.append(safe(value), style="bold" if value != "any" else "")
        text.append("  ")
    return text


class ViewScreen(Screen):
    AUTO_FOCUS = "#episodes"
    DEFAULT_CSS = """
    ViewScreen #search { height: 3; border: round $secondary; }
    ViewScreen #search:focus { border: round $accent; }
    ViewScreen #filters { height: 1; padding: 0 1; }
    ViewScreen #episodes { height: 1fr; border: round $secondary; }
    ViewScreen #episodes:focus { border: round $accent; }
    ViewScreen #preview { height: auto; max-height: 6; border: round $primary; padding: 0 1; }
    """

    BINDINGS = [
        Binding("slash", "search", "Search", tooltip="Search the task, its query, who, the set, the session"),
        Binding("s", "cycle('solved')", "Solved", tooltip="Filter on solved as InterCode counts it (yes, no, all)"),
        Binding("v", "cycle('strict')", "Strict", tooltip="Filter on the strict verdict (yes, no, all)"),
        Binding("e", "cycle('env')", "Env", tooltip="Filter on the language (each in turn, then all)"),
        Binding("t", "cycle('set')", "Set", tooltip="Filter on the task set"),
        Binding("a", "cycle('author')", "Author", tooltip="Filter on who acted: human, agent, mixed"),
        Binding("m", "cycle('model')", "Model", tooltip="Filter on the model"),
        Binding("g", "cycle('flag')", "Flag", show=False,
                tooltip="Filter on the scanners' flags: flagged at all, then each kind raised (icplay scan)"),
        Binding("o", "sort", "Sort", tooltip="Sort by the next column"),
        Binding("r", "reverse", "Reverse", show=False, tooltip="Reverse the sort"),
        Binding("c", "compare", "Compare",
                tooltip="Compare the episode marked with Space with the highlighted one (same task)"),
        Binding("f", "family", "Family", tooltip="Narrow the table to the episode's forks and its source"),
        Binding("x", "clear", "Clear filters", show=False, tooltip="Clear the search and the filters"),
        Binding("f5", "reload", "Reload", show=False, tooltip="Read the episodes again"),
    ]

    class Batch(Message):
        """Episodes read by the scan worker: posted as they come (``first``: the scan's first
        batch, which replaces what the table showed; ``done``: its last)."""

        def __init__(self, generation: int, summaries: list[EpisodeSummary], first: bool, done: bool) -> None:
            super().__init__()
            self.generation, self.summaries, self.first, self.done = generation, summaries, first, done

    class Failed(Message):
        def __init__(self, generation: int, error: str) -> None:
            super().__init__()
            self.generation, self.error = generation, error

    def __init__(self, paths: list[Path] | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.all: list[EpisodeSummary] = []
        self.shown: list[EpisodeSummary] = []
        self.filter = Filter()
        self.sort = "date"
        self.descending = True
        self.marked: str | None = None          # ref of the episode marked for comparison
        self.family_of: str | None = None       # episode id whose family the table is narrowed to
        self.reading = True
        self._rows: dict[str, tuple] = {}
        self._generation = 0                    # the current scan's number: an older scan's batches are dropped

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield Input(placeholder="search task, query, who, set, session…  (/ to search, Enter or ↓ to the table)",
                    id="search")
        yield Static(id="filters")
        yield EpisodeTable(id="episodes")
        yield Static(id="preview")
        yield KeysFooter(compact=True)

    @property
    def table(self) -> EpisodeTable:
        return self.query_one(EpisodeTable)

    def on_mount(self) -> None:
        self.query_one(StatusBar).show("icplay view", ["loading…"])
        self.reload()
        self.table.focus()

    # -- loading (on a worker thread: thousands of files) ------------------------------------------

    def reload(self) -> None:
        """Scan again on a worker thread; rows appear batch by batch while it reads (a first
        scan parses every file: thousands take seconds), the table is complete when
        ``reading`` turns False (not Textual's ``loading``, which would cover the screen
        with a spinner and, uncovered, leave its later layouts undone)."""
        self.reading = True
        self._generation += 1
        generation, paths, home = self._generation, self.paths, cast(ViewApp, self.app).home

        def work() -> None:
            first = True
            skipped: list[Skipped] = []
            try:
                batches = scan_batches(paths, home=home, skipped=skipped)
                batch = next(batches)
                for following in batches:          # one ahead: the last batch says it is the last
                    if generation != self._generation:
                        return                     # a newer scan took over
                    self.post_message(self.Batch(generation, batch, first, done=False))
                    batch, first = following, False
                self.post_message(self.Batch(generation, batch, first, done=True))
                if skipped:     # named once, when the scan is done; the others are shown
                    self.app.call_from_thread(self.notify, skipped_note(skipped), title="Files skipped",
                                              severity="warning", timeout=30)
            except Exception as exc:     # shown, not raised: the browser stays usable
                self.post_message(self.Failed(generation, f"{type(exc).__name__}: {exc}"))

        self.run_worker(work, thread=True, group="scan")

    def on_view_screen_batch(self, message: Batch) -> None:
        if message.generation != self._generation:
            return
        if message.first:
            self.all = []
            self._rows.clear()
        self.all.extend(message.summaries)
        self.all.sort(key=lambda s: s.date, reverse=True)
        if message.done:
            self.reading = False
        self.apply(batch=True)

    def on_view_screen_failed(self, message: Failed) -> None:
        if message.generation != self._generation:
            return
        self.reading = False
        self.notify(safe(message.error), title="Cannot read the episodes", severity="error", markup=False)
        self.show_filters()
        self.show_preview()

    def action_reload(self) -> None:
        self.reload()

    # -- filtering -------------------------------------------------------------------------------

    def selected_rows(self) -> list[EpisodeSummary]:
        """The episodes the filter, sort and family narrowing leave (named apart from Textual's
        ``visible`` property, which a method of that name would hide from every child widget)."""
        rows = select(self.all, self.filter, self.sort, self.descending)
        if self.family_of:
            members = {s.id for s in family(self.all, self.family_of)}
            rows = [s for s in rows if s.id in members]
        return rows

    def apply(self, batch: bool = False) -> None:
        """Show the selected rows; the row under the cursor stays under it, except the top row
        when a scan's ``batch`` arrives: newer episodes of a later batch go above it, and the
        top is theirs."""
        on_top = batch and self.table.cursor_row == 0
        keep = self.current.ref if self.shown and self.current is not None and not on_top else None
        self.shown = self.selected_rows()
        rows = []
        for s in self.shown:
            row = self._rows.get(s.ref)
            if row is None or (row[0].startswith("●") != (s.ref == self.marked)):
                row = self._rows[s.ref] = summary_row(s, s.ref == self.marked)
            rows.append(row)
        table = self.table
        table.set_results(COLUMNS, rows)
        if keep is not None:
            index = next((i for i, s in enumerate(self.shown) if s.ref == keep), None)
            if index:
                table._move_to(index)
        self.show_filters()
        self.show_preview()

    @property
    def current(self) -> EpisodeSummary | None:
        if not self.shown:
            return None
        return self.shown[min(self.table.cursor_row, len(self.shown) - 1)]

    def show_filters(self) -> None:
        f = self.filter
        yes_no = {None: "any", True: "yes", False: "no"}
        parts = [("solved", yes_no[f.solved]), ("strict", yes_no[f.strict]), ("env", f.env or "any"),
                 ("set", f.set or "any"), ("author", f.author or "any"), ("model", f.model or "any")]
        if f.flag:        # shown once set (g): the line keeps its width otherwise
            parts.append(("flag", "flagged" if f.flag == ANY_FLAG else f.flag))
        text = filter_text(parts)
        text.append("sort ", style="dim")
        text.append(f"{self.sort} {'↓' if self.descending else '↑'}", style="bold")
        if self.family_of:
            text.append("  family of ", style="dim")
            text.append(safe(self.family_of), style="bold magenta")
        self.query_one("#filters", Static).update(text)
        shown = f"{len(self.shown):,} of {len(self.all):,} episodes" + (" (reading…)" if self.reading else "")
        marked = "1 marked (c compares)" if self.marked else "Space marks one to compare"
        self.query_one(StatusBar).show("icplay view", [shown, marked])

    def show_preview(self) -> None:
        s = self.current
        preview = self.query_one("#preview", Static)
        if s is None:
            preview.update(Text("no episode matches" if self.all else
                                ("reading the episodes…" if self.reading else "no saved episodes here"), style="dim"))
            return
        text = Text()
        text.append(safe(f"{s.set}/{s.task}"), style="bold")
        text.append(safe(f" · {s.status} · {s.source} · episode {s.id}") + "\n", style="dim")
        text.append(safe(s.query.strip().splitlines()[0][:300]) if s.query.strip() else "", style="")
        fam = family(self.all, s.id) if (s.forked_from or any(
            x.forked_from and x.forked_from.get("id") == s.id for x in self.all)) else []
        if fam:
            text.append("\nfamily: ", style="magenta")
            text.append(safe(family_line(fam, s.id)))
        preview.update(text)

    def on_episode_table_moved(self, message: EpisodeTable.Moved) -> None:
        self.show_preview()

    def on_input_changed(self, message: Input.Changed) -> None:
        if message.input.id == "search":
            self.filter.text = message.value
            self.apply()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self.table.focus()

    def on_key(self, event) -> None:
        if event.key in ("down", "escape") and self.focused is self.query_one("#search"):
            event.stop()
            self.table.focus()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_cycle(self, what: str) -> None:
        f = self.filter
        if what in ("solved", "strict"):
            setattr(f, what, _cycle((None, True, False), getattr(f, what)))
        elif what == "author":
            f.author = _cycle(AUTHORS, f.author)
        elif what == "flag":
            f.flag = _cycle(("", ANY_FLAG, *sorted({k for s in self.all for k in s.flags})), f.flag)
        else:
            field = {"env": "env", "set": "set", "model": "model"}[what]
            values = ("",) + tuple(sorted({getattr(s, field) for s in self.all if getattr(s, field)}))
            setattr(f, what, _cycle(values, getattr(f, what)))
        self.apply()

    def action_sort(self) -> None:
        self.sort = _cycle(SORTS, self.sort)
        self.apply()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.apply()

    def action_clear(self) -> None:
        self.filter = Filter()
        self.family_of = None
        self.query_one("#search", Input).value = ""
        self.apply()

    def action_family(self) -> None:
        s = self.current
        if self.family_of:
            self.family_of = None
        elif s is not None:
            self.family_of = s.id
        self.apply()

    # -- opening, marking, comparing -----------------------------------------------------------------

    def on_episode_table_open(self, message: EpisodeTable.Open) -> None:
        if 0 <= message.index < len(self.shown):
            summary = self.shown[message.index]
            same_task = [s for s in self.all if (s.set, s.task) == (summary.set, summary.task)]
            self.app.push_screen(EpisodeScreen(summary, family(self.all, summary.id), same_task=same_task))

    def on_episode_table_mark(self, message: EpisodeTable.Mark) -> None:
        if 0 <= message.index < len(self.shown):
            ref = self.shown[message.index].ref
            self.marked = None if self.marked == ref else ref
            self.apply()

    def action_compare(self) -> None:
        current = self.current
        marked = next((s for s in self.all if s.ref == self.marked), None)
        if current is None or marked is None:
            self.notify("Mark one episode with Space, move to another of the same task, then press c.",
                        severity="warning")
            return
        if marked.ref == current.ref:
            self.notify("Move to a second episode to compare with the marked one.", severity="warning")
            return
        if (marked.set, marked.task) != (current.set, current.task):
            self.notify(safe(f"Compare two episodes of the same task: the marked one is {marked.set}/{marked.task}, "
                             f"this one {current.set}/{current.task}."), severity="warning", markup=False)
            return
        self.app.push_screen(CompareScreen(marked, current))


__all__ = ["ViewApp", "ViewScreen", "date_text"]
