"""The live screen's opening of its episode: the policy (an agent's built here, its model's client
warmed), the sandbox leased, reset and saved turns replayed by the screen's ``EpisodeHost``
(icplay.frontend.opening), the driver built; and what the host's events show."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text

from icplay.driver import HUMAN_MODE, Driver, DriverSettings
from icplay.driver.events import Event, Output
from icplay.episode import AgentError, Episode
from icplay.frontend.opening import EpisodeHost, Failed, HostEvent, Opened, Progress, Replaying, Viewing
from icplay.frontend.policies import PolicyError, make_policy
from icplay.tui.live.ends import OVER_FAILED, OVER_SUBMITTED
from icplay.tui.screens.modals import result_from_trajectory
from icplay.tui.shown import safe, shown

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class Opening:
    """Everything that blocks runs on the host's thread (a daemon thread the app waits for
    boundedly at exit); its events and the driver's come back to the UI thread as the screen's
    messages."""

    def __init__(self, screen: LiveScreen, policy: tuple[Any, dict[str, Any]] | None) -> None:
        self.screen = screen
        self.prebuilt = policy               # (policy, description) from icplay watch, else built here
        self.policy_error: str | None = None

    def open(self) -> None:
        """At mount: the host, and the episode opened on its thread."""
        screen = self.screen
        screen.host = EpisodeHost(screen.task_record, screen.playground.pool, screen.session,
                                  emit=self.from_host, before_save=screen.clock.before_save)
        policy = self.policy_info()
        screen.host.open(policy, self.make_driver, retry=screen.retry, set_base=screen.clock.set_base)

    # -- the policy and the driver --------------------------------------------------------------

    def policy_info(self) -> dict[str, Any]:
        """The trajectory's policy block; an agent's policy is built here (once)."""
        screen = self.screen
        if screen.agent is None:
            policy = {"kind": "human", "ui": "tui"}
            policy.update(screen.pane.policy_info(screen.playground.config))
            return policy
        if self.prebuilt is None:
            try:
                self.prebuilt = make_policy(screen.agent, screen.task_record)
            except PolicyError as exc:
                self.policy_error = str(exc)
                return {"kind": "human", "ui": "tui-watch"}
        policy_object, info = self.prebuilt
        self.warm_model(policy_object)
        return {**info, "protocol": screen.agent.protocol, "ui": "tui-watch"}

    def warm_model(self, policy: Any) -> None:
        """Open the model's client (importing the client library, loading the TLS
        certificates: seconds on a loaded machine) in a worker while the sandbox starts, so
        the first proposal does not wait for it after the sandbox."""
        client = getattr(getattr(policy, "model", None), "client", None)
        if not callable(client):
            return

        def warm() -> None:
            try:
                client()
            except AgentError:      # no API key: the first call says so, in the panel
                pass

        self.screen.run_worker(warm, name="icplay-warm-model", group="warm", thread=True, exit_on_error=False)

    def make_driver(self, episode: Episode) -> Driver:
        """(In the host's worker.) Play: human mode, no policy; watch: the agent's policy and
        the screen's broker (without a policy, it could not be built, the human has the turn)."""
        screen = self.screen
        assert screen.host is not None
        policy = None
        protocol = "agent"
        if screen.agent is not None:
            protocol = screen.agent.protocol
            if self.prebuilt is None:
                screen.broker.set_mode(HUMAN_MODE)
            else:
                policy, info = self.prebuilt
                episode.trajectory.adopt_policy({**info, "protocol": screen.agent.protocol, "ui": "tui-watch"})
        return Driver(episode, DriverSettings(policy, protocol, screen.limits, broker=screen.broker,
                                              on_event=(self.from_driver,), on_failure="ask",
                                              around_action=screen.host.around_action))

    def from_host(self, event: HostEvent) -> None:
        """On the host's thread: to the UI thread as a message."""
        self.screen.post_message(self.screen.HostMessage(event))

    def from_driver(self, event: Event) -> None:
        """On the driver's thread: output into the pane's feed, the rest as messages."""
        if isinstance(event, Output):
            self.screen.play.output(event.text)
            return
        self.screen.post_message(self.screen.DriverMessage(event))

    # -- the host's events ----------------------------------------------------------------------

    def progress(self, message: Progress) -> None:
        if self.screen.state == "loading":
            self.screen.play.set_status(shown(message.line.strip()[-200:], style="dim"))

    def replaying(self, message: Replaying) -> None:
        first = message.action.splitlines()[0][:60] if message.action else ""
        self.screen.play.set_status(shown(f"resuming: replaying turn {message.n} of {message.total} · {first}",
                                          style="dim"))

    def opened(self, message: Opened) -> None:
        """The episode is open (saved turns replayed): the human or the agent may move."""
        screen = self.screen
        screen.episode = message.episode
        screen.driver = message.driver
        screen.sandbox_name = message.sandbox
        screen.pane.set_busy(not screen.asks_human())
        turns = screen.episode.trajectory.turns
        screen.turn_list.set_turns(turns)
        screen.pane.env_ready(screen.episode.env)
        if message.replayed:
            screen.pane.show_turns(turns)
            where = screen.language.fresh_state
            said = "turn" if message.replayed == 1 else "turns"
            screen.play.set_status(Text(f"resumed: {message.replayed} saved {said} replayed into {where}",
                                        style="green"))
        else:
            screen.play.set_status(Text("ready", style="dim"))
        screen.clock.release("loading")
        screen.bar.refresh()
        screen.pane.focus_input()
        if screen.agent is not None:
            if self.prebuilt is None:
                screen.panel.show_failure(screen.bar.blind(self.policy_error or "no policy"))
                screen.panel.set_hint("F7 take over and work the task yourself · Ctrl+B back to the task list")
            screen.gate.show_usage()

    def viewing(self, message: Viewing) -> None:
        """The task was submitted before: shown as it ended, read-only."""
        screen = self.screen
        screen.viewed = message.trajectory
        screen.sandbox_name = message.trajectory.sandbox
        screen.result = result_from_trajectory(message.trajectory)
        screen.over = OVER_SUBMITTED
        screen.pane.set_done()
        turns = message.trajectory.turns
        screen.turn_list.set_turns(turns)
        screen.pane.show_turns(turns)
        screen.play.set_status(Text(f"submitted before · reward {screen.result.reward:.2f} · F9 score · "
                                    "F8 retry · Ctrl+N next", style="bold"))
        screen.clock.set_base(message.trajectory.time_worked)
        screen.clock.hold("done")
        screen.clock.release("loading")
        screen.bar.refresh()
        screen.refresh_bindings()

    def failed(self, message: Failed) -> None:
        screen = self.screen
        screen.over = OVER_FAILED
        screen.play.set_status(shown(f"{message.error}\nF8 tries again · Ctrl+B back to the task list",
                                     style="bold red"))
        screen.refresh_bindings()
        screen.notify(safe(message.error), title="The environment failed", severity="error", timeout=10,
                      markup=False)
        screen.bar.refresh()


# each of the host's events to its handler (a registry, by the event's type)
HOST_HANDLERS: dict[type, Callable[[Opening, Any], None]] = {
    Progress: Opening.progress, Replaying: Opening.replaying, Opened: Opening.opened, Viewing: Opening.viewing,
    Failed: Opening.failed,
}
