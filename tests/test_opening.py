"""Opening an episode, the one way every front end does it (``icplay.frontend.opening``), and
the settings a driver is built from (``icplay.driver.DriverSettings``)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from icplay.driver import Broker, Driver, DriverSettings, HUMAN_MODE, Limits, human_play
from icplay.languages import make_env
from icplay.frontend.opening import EpisodeHost, Failed, Opened, Progress, open_episode
from icplay.frontend.leases import SandboxPool
from icplay.languages import find
from icplay.lines import describe_reward
from icplay.envs.base import SubmitResult
from icplay.session import Session
from icplay.tasks.registry import load_tasks

TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")


@pytest.fixture
def env():
    env = make_env("sql", sandbox="sqlite")
    yield env
    env.close()


def unreadable(session: Session) -> None:
    path = session.path_for(TASK)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"id": "x", "turns": "not a list"}')


def test_an_unreadable_saved_file_is_set_aside_and_said_once(env, tmp_path):
    session = Session("s", home=tmp_path)
    unreadable(session)
    opening = open_episode(session, env, TASK, {"kind": "human"})
    assert opening.replayed == 0 and opening.resumed is None and not opening.episode.trajectory.turns
    assert len(opening.set_aside) == 1 and "the task starts afresh" in opening.set_aside[0]
    assert session.set_aside == []            # said by this opening, not by the next one


def test_a_resumed_episode_says_so(env, tmp_path):
    session = Session("s", home=tmp_path)
    first = open_episode(session, env, TASK, {"kind": "human"})
    first.episode.act("SELECT 1;")
    first.episode.stop()
    again = open_episode(session, env, TASK, {"kind": "human"})
    assert again.replayed == 1 and again.resumed == "(resumed: 1 saved turn(s) replayed)"
    assert again.set_aside == ()


def test_the_tui_host_shows_what_was_set_aside(env, tmp_path):
    """The screen's host opens with the same function: the set-aside file is a Progress line
    (before, the TUI kept it in the session unsaid)."""
    session = Session("s", home=tmp_path)
    unreadable(session)
    pool = SandboxPool(lambda kind, sandbox, image, progress: env, lambda kind: "sqlite")
    events: list = []
    opened = threading.Event()

    def emit(event) -> None:
        events.append(event)
        if isinstance(event, (Opened, Failed)):
            opened.set()

    host = EpisodeHost(TASK, pool, session, emit)
    host.open({"kind": "human"}, lambda episode: Driver(episode, human_play(Broker(HUMAN_MODE))))
    assert opened.wait(60), events
    host.leave()
    notes = [e.line for e in events if isinstance(e, Progress) and "starts afresh" in e.line]
    assert len(notes) == 1, events
    assert isinstance(events[-1], Opened)


def test_the_driver_takes_one_frozen_settings_object(env):
    from icplay.episode import Episode

    settings = DriverSettings(limits=Limits(max_turns=3), protocol="submit")    # the library's older name
    assert settings.protocol == "agent"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.protocol = "intercode"  # type: ignore[misc]
    with pytest.raises(ValueError, match="on_failure"):
        DriverSettings(on_failure="shrug")
    with pytest.raises(ValueError, match="unknown protocol"):
        DriverSettings(protocol="chess")
    episode = Episode(env, TASK)
    with pytest.raises(TypeError, match="DriverSettings"):
        Driver(episode, object())                         # an old Driver(episode, policy, ...) call
    driver = Driver(episode, dataclasses.replace(settings, on_failure="ask"))
    assert driver.limits.max_turns == 3 and driver.on_failure == "ask" and driver.policy is None


def test_line_mode_asks_the_language_how_to_explain_a_reward():
    bash = {"p1": 0.33, "p2": 0.0, "p3": 0.2, "missing": [["A", "x"]]}
    assert find("bash").explain_lines(bash) == ["  p1 file system 0.33   p2 contents 0.00   p3 answer 0.20",
                                                "  changes you did not make: A x"]
    assert find("sql").explain_lines({"iou": 0.5, "rows": [1]}) == ["  iou 0.5"]
    python = find("python").explain_lines({"passed": 1, "total": 2, "function": "f", "gold_function": "f"})
    assert python[0] == "  tests matching the gold: 1 of 2"
    assert describe_reward(SubmitResult(0.53, bash), "bash").splitlines()[1:] == find("bash").explain_lines(bash)
