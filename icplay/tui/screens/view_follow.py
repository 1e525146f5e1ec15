"""``icplay view --follow``: a supervisor's read-only view of an episode as it is played.

The viewer's episode screen over one trajectory file, read again whenever the file changes
(the session saves it after every turn, by an atomic replace, so a read sees one whole
version). It shows the newest turn as it arrives unless the supervisor stepped back to an
earlier one. Nothing here acts: the keys are stepping and quitting only (the episode
screen's re-execute, fork and compare are not bound, and their actions refuse), and the
file is only ever read — the annotator's or agent's process owns it.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.binding import Binding
from textual.widgets import Static

from icplay.formats.summary import summarize
from icplay.store import TrajectoryFileError, load_trajectory
from icplay.tui.shown import shown
from icplay.tui.screens.view import ViewApp
from icplay.tui.screens.view_episode import EpisodeScreen, final_text
from icplay.tui.widgets.panels import QueryPanel, StatusBar, TurnList
from icplay.tui.screens.modals import HelpScreen, binding_help

POLL_SECONDS = 0.5


class FollowScreen(EpisodeScreen, inherit_bindings=False):
    """One episode file, followed as it grows, read-only (see the module docstring)."""

    BINDINGS = [
        Binding("q,escape", "app.quit", "Quit"),
        Binding("right,n", "step(1)", "Next turn"),
        Binding("left,p", "step(-1)", "Prev turn"),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Newest"),
    ]

    def __init__(self, path: Path) -> None:
        self.path = path
        trajectory = load_trajectory(path)
        self._seen = self._stamp()
        super().__init__(summarize(trajectory, str(path), source=path.parent.name), trajectory=trajectory)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def on_mount(self) -> None:
        super().on_mount()
        self.action_edge(1)
        self.set_interval(POLL_SECONDS, self.poll)

    def show_turn(self) -> None:
        super().show_turn()
        traj = self.trajectory
        self.query_one(StatusBar).show(f"icplay view --follow · {traj.task_key}",
                                       [f"{traj.status}", f"{traj.turns_taken} turns",
                                        f"by {traj.annotator or traj.policy.get('model') or traj.policy.get('kind', '?')}",
                                        "read-only"], keep=3)

    def poll(self) -> None:
        """Read the file again if it changed; a version that cannot be read is left for the next."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return
        try:
            trajectory = load_trajectory(self.path)
        except TrajectoryFileError:
            return
        self._seen = stamp
        at_newest = self.index >= len(self.trajectory.turns) - 1
        self.trajectory = trajectory
        self.summary = summarize(trajectory, str(self.path), source=self.path.parent.name)
        self.query_one(TurnList).set_turns(trajectory.turns)
        self.query_one("#final", Static).update(final_text(trajectory))
        self.query_one(QueryPanel).update(shown(trajectory.task.get("query") or ""))
        if at_newest:
            self.index = max(0, len(trajectory.turns) - 1)
        self.show_turn()

    # What the episode screen does that would act: refused here, whatever a keymap binds.
    def action_reexecute(self) -> None:
        self.notify("Read-only: following an episode runs nothing.", severity="warning")

    def action_fork(self, agent: bool) -> None:
        self.action_reexecute()

    def action_compare(self) -> None:
        self.action_reexecute()

    def action_back(self) -> None:
        self.app.exit()


class FollowApp(ViewApp):
    """The viewer opened on one followed episode (no browser under it: quitting leaves; no
    command palette, whose commands would reach the playground's)."""

    ENABLE_COMMAND_PALETTE = False

    def __init__(self, path: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.follow_path = path

    def on_mount(self, event) -> None:
        event.prevent_default()
        self.push_screen(FollowScreen(self.follow_path))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen([("Following an episode, read-only", binding_help(FollowScreen.BINDINGS))],
                                        title="icplay view --follow — keys", note=""))
