"""Human play and the library front ends on the one driver, on a real SQLite env: a human's
failed command is an event and the human moves again, a screen that leaves saves the
episode as it stands, an interrupt that comes before its command has started still stops
it, and the caller-as-policy loop keeps the library front ends' contract."""

from __future__ import annotations

import queue
import threading

import pytest

from icplay.driver import ACTION, HUMAN_MODE, Broker, Decision, Driver, DriverSettings, Failure, Limits, RequestOpened
from icplay.driver.external import CallerLoop
from icplay.episode import Episode

from icplay.languages import make_env

from test_driver import FOREVER, TASK


@pytest.fixture
def env():
    """The real SQLite env, as test_driver's."""
    env = make_env("sql", sandbox="sqlite")
    yield env
    env.close()


class Human:
    """A human-only driver on its own thread; its requests and events in queues."""

    def __init__(self, env, **kw):
        self.saved: list[str] = []
        self.episode = Episode(env, TASK, save=lambda t: self.saved.append(t.status), policy={"kind": "human"})
        self.events: list = []
        self.requests: queue.Queue = queue.Queue()
        self.driver = Driver(self.episode, DriverSettings(limits=Limits(max_turns=None), broker=Broker(HUMAN_MODE),
                                                          on_event=(self._on_event,), on_failure="ask", **kw))
        self.thread = self.driver.start()

    def _on_event(self, event) -> None:
        self.events.append(event)
        if isinstance(event, RequestOpened):
            self.requests.put(event.request)

    def move(self, decision: Decision):
        request = self.requests.get(timeout=20)
        assert request.kind == ACTION
        assert self.driver.broker.answer(request.id, decision)
        return request

    def end(self):
        assert self.thread.wait(20)
        return self.driver.trajectory


def test_a_failed_human_command_is_an_error_event_and_the_human_moves_again(env, monkeypatch):
    step = env.step

    def failing(action, *args, **kwargs):
        if action == "boom":
            raise RuntimeError("the sandbox went away")
        return step(action, *args, **kwargs)

    monkeypatch.setattr(env, "step", failing)
    human = Human(env)
    human.move(Decision.run("boom"))
    human.move(Decision.run(TASK.gold))             # asked again: the episode goes on
    human.move(Decision.submit())
    traj = human.end()
    errors = [e for e in human.events if isinstance(e, Failure)]
    assert [e.during for e in errors] == ["run"] and "the sandbox went away" in errors[0].message
    assert errors[0].fatal is False
    assert traj.status == "submitted" and traj.reward == 1.0 and [t.action for t in traj.turns] == [TASK.gold]
    assert "ended_by" not in traj.policy            # a human's play records no policy end


def test_leaving_saves_the_episode_as_it_stands_and_stop_saves_it_stopped(env):
    human = Human(env)
    human.move(Decision.run("SELECT 1"))
    human.requests.get(timeout=20)                  # waiting for the next move
    human.driver.leave()
    traj = human.end()
    assert traj.status == "running" and traj.error is None and len(traj.turns) == 1
    assert human.saved[-1] == "running"

    other = Human(env)
    other.requests.get(timeout=20)
    other.driver.stop("the screen was left")
    assert other.end().status == "stopped" and other.driver.trajectory.error == "the screen was left"


def test_an_interrupt_for_a_command_that_has_not_started_stops_it_as_it_starts(env):
    human = Human(env)
    request = human.requests.get(timeout=20)
    human.driver.interrupt(5)                       # not the next turn's index: ignored
    human.driver.interrupt(0)                       # the key came before the command reached the driver
    assert human.driver.broker.answer(request.id, Decision.run(FOREVER))
    human.move(Decision.run("SELECT 1"))            # the next command is not interrupted
    human.move(Decision.submit())
    traj = human.end()
    assert traj.turns[0].info.get("interrupted") is True and not traj.turns[0].info.get("timed_out")
    assert not traj.turns[1].info.get("interrupted") and traj.turns[1].exit_code == 0


def test_an_interrupt_while_the_command_is_held_back_repeats_until_it_ends(env):
    held = threading.Lock()
    started = threading.Event()

    class Hold:
        """Around each command (as the TUI's ``EpisodeHost.hold``): it waits for the lock."""

        def __enter__(self) -> None:
            started.set()
            held.acquire()

        def __exit__(self, *exc: object) -> None:
            held.release()

    held.acquire()
    human = Human(env, around_action=Hold)
    human.move(Decision.run(FOREVER))
    assert started.wait(20)
    human.driver.interrupt()                        # the env drops it (nothing runs yet): it is repeated
    held.release()
    human.move(Decision.submit())
    assert human.end().turns[0].info.get("interrupted") is True


def test_the_caller_loop_steps_the_driver_once_per_action(env):
    loop = CallerLoop("sql", env_factory=lambda: env, protocol="submit")    # "submit": the older name of agent
    assert loop.protocol == "agent" and loop.done
    assert loop.reset(TASK) == TASK.query
    blank = loop.step("  ")                          # a blank action runs as a turn (the gym's contract)
    assert blank.terminated is False and loop.trajectory.turns[0].action == "  "
    out = loop.step(TASK.gold)
    assert out.reward == 0.0 and not out.terminated and out.info["turn"] == 1
    end = loop.step("submit")
    assert end.terminated and end.reward == 1.0 and end.info["submitted"] and loop.done
    with pytest.raises(RuntimeError, match="has ended"):
        loop.step("SELECT 1")

    scored = CallerLoop("sql", env_factory=lambda: env, protocol="intercode")
    scored.reset(TASK)
    first = scored.step("SELECT 1")
    assert first.reward < 1.0 and "breakdown" not in first.info and not first.terminated   # kept for after
    solved = scored.step(TASK.gold)
    assert solved.reward == 1.0 and solved.terminated and scored.trajectory.status == "submitted"
    with pytest.raises(ValueError, match="unknown protocol"):
        CallerLoop("sql", env_factory=lambda: env, protocol="gym")
