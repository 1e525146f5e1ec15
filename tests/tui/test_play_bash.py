"""Pilot tests of the Bash playground on real bubblewrap sandboxes (no mocks)."""

from __future__ import annotations

import json
import time

import pytest

from icplay.session import Session
from icplay.store import load_trajectory
from icplay.frontend.config import Config
from icplay.tui.screens.modals import ConfirmScreen, HelpScreen, HistoryScreen, PauseScreen, ScoreScreen, TurnScreen
from icplay.tui.screens.picker import PickerScreen
from icplay.tui.screens.live import LiveScreen

from tui_helpers import FakeClock, text_of, play_screen, play_state, run_command, turn_count, type_text, wait_for, wait_ready

pytestmark = pytest.mark.usefixtures("bwrap_ready")

GOLD_B001 = "wc -l /testbed/logs/nginx/access.log"


def output_text(app) -> str:
    return "\n".join(play_screen(app).query_one("#output").plain_lines())


async def test_pick_run_submit_reveal_next(make_app, home):
    app = make_app(env="bash", tasks="bash")
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("enter")                       # the first task, b001
        await wait_ready(pilot)
        screen = play_screen(app)
        assert screen.task_record.id == "b001"
        await run_command(pilot, "cd /testbed/logs")
        assert text_of(screen.query_one("#prompt")).startswith("/testbed/logs")
        await run_command(pilot, GOLD_B001)
        assert "250 /testbed/logs/nginx/access.log" in output_text(app)
        assert screen.turn_list.option_count == 2

        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")
        # the dialog composed, not only pushed: its widgets are queried next
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.query("#breakdown"), 30,
                       "the score")
        score = app.screen
        assert score.result.reward == 1.0
        assert "Reward 1.00" in text_of(score.query_one("#reward"))
        breakdown = text_of(score.query_one("#breakdown"))
        assert "p3" in breakdown

        await pilot.press("g")                            # reveal the gold
        await pilot.pause()
        assert GOLD_B001 in text_of(score.query_one("#gold-action"))
        assert "250" in text_of(score.query_one("#gold-output"))
        assert "250" in text_of(score.query_one("#your-output"))

        await pilot.press("n")                            # next task
        await wait_ready(pilot)
        assert play_screen(app).task_record.id == "b002"

    saved = load_trajectory(home / "trajectories" / "default" / "bash" / "b001.json")
    assert saved.status == "submitted" and saved.reward == 1.0
    assert [t.action for t in saved.turns] == ["cd /testbed/logs", GOLD_B001]
    assert all(t.author == "human" and t.duration > 0 and t.started_at > 0 for t in saved.turns)
    assert saved.policy["kind"] == "human"
    assert saved.breakdown["p1"] == 0.33 and saved.gold_output.startswith("250")
    assert saved.time_worked > 0


async def test_interrupt_sleep(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await type_text(pilot, "sleep 30")
        await pilot.press("enter")
        await wait_for(pilot, lambda: play_state(app) == "running", 5, "the command to start")
        started = time.monotonic()
        await pilot.pause(0.3)
        await pilot.press("ctrl+c")
        await wait_ready(pilot)
        assert time.monotonic() - started < 8, "Ctrl+C did not stop sleep 30"
        turn = play_screen(app).episode.trajectory.turns[-1]
        assert turn.action == "sleep 30" and turn.info["interrupted"] is True
        assert "interrupted" in output_text(app)
        await run_command(pilot, "echo still-alive")                 # the shell survived
        assert "still-alive" in output_text(app)


async def test_ctrl_c_without_a_command_does_not_interrupt(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await pilot.press("ctrl+c")          # nothing runs: falls through (copy), no error
        assert play_state(app) == "ready" and turn_count(app) == 0


async def test_resume_after_quitting_mid_task(make_app, home):
    clock = FakeClock()
    app = make_app(env="bash", tasks="bash", task="b001", clock=clock)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo resumed > /testbed/note.txt")
        await run_command(pilot, "cd /testbed/logs")
        clock.now += 65
        await pilot.press("ctrl+q")
    app.close_envs()

    saved = Session("default", home).load(app.catalog.find("b001"))
    assert saved.status == "running" and len(saved.turns) == 2
    assert saved.time_worked == pytest.approx(65, abs=0.01)

    clock2 = FakeClock(5000)
    app2 = make_app(env="bash", tasks="bash", task="b001", clock=clock2)
    async with app2.run_test() as pilot:
        await wait_ready(pilot)
        screen = play_screen(app2)
        assert screen.turn_list.option_count == 2
        assert "resumed: 2 saved turns replayed" in text_of(screen.query_one("#run-status"))
        assert text_of(screen.query_one("#prompt")).startswith("/testbed/logs")   # cd was replayed
        await run_command(pilot, "cat /testbed/note.txt; pwd")
        assert "resumed\n/testbed/logs" in output_text(app2)
        assert screen.clock.elapsed() == pytest.approx(65, abs=0.01)
        clock2.now += 10
        assert screen.clock.elapsed() == pytest.approx(75, abs=0.01)


async def test_history_up_and_search(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo one")
        await run_command(pilot, "echo two")
        command = play_screen(app).query_one("#command")
        await pilot.press("up")
        assert command.text == "echo two"
        await pilot.press("up")
        assert command.text == "echo one"
        await pilot.press("down", "down")
        assert command.text == ""
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, HistoryScreen)
        await type_text(pilot, "one")
        await pilot.press("enter")
        assert command.text == "echo one"


async def test_enter_before_the_sandbox_is_ready_keeps_the_command(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await type_text(pilot, "echo early")
        await pilot.press("enter")
        # Decided by what became of the command, not by the state after the press: the
        # sandbox may get ready between the two (the command then stays unsent)
        command = play_screen(app).query_one("#command")
        if command.text:                                   # pressed while the sandbox started
            assert command.text == "echo early"            # kept as typed, no line break added
            await wait_ready(pilot)
            await pilot.press("enter")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        assert play_screen(app).episode.trajectory.turns[0].action == "echo early"


async def test_multiline_command_is_one_turn(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await type_text(pilot, "echo a \\")
        await pilot.press("enter")                  # a trailing backslash continues
        await type_text(pilot, "b")
        await pilot.press("ctrl+j")                 # Ctrl+J inserts a line break
        await type_text(pilot, "echo c")
        await pilot.press("enter")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        turn = play_screen(app).episode.trajectory.turns[0]
        assert turn.action == "echo a \\\nb\necho c"
        assert turn.observation == "a b\nc\n"


async def test_flood_is_capped_and_the_ui_keeps_going(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "seq 1 2000000", timeout=60)
        turn = play_screen(app).episode.trajectory.turns[-1]
        assert turn.info["truncated_bytes"] > 0
        output = play_screen(app).query_one("#output")
        assert output.line_count <= output.max_lines * 1.1
        text = output_text(app)
        assert "truncated" in text                          # the sandbox's note is shown
        await run_command(pilot, "echo after-the-flood")
        assert "after-the-flood" in output_text(app)


async def test_turn_details_are_read_only(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "printf 'line1\\nline2\\n'; false")
        await pilot.press("f3")
        await pilot.press("enter")
        assert isinstance(app.screen, TurnScreen)
        body = "\n".join(text_of(w) for w in app.screen.query(".code"))
        assert "line1\nline2" in body and "printf" in body
        assert "exit 1" in text_of(app.screen.query_one(".title"))
        await pilot.press("escape")
        assert isinstance(app.screen, LiveScreen) and app.screen.agent is None


async def test_pause_stops_the_clock(make_app):
    clock = FakeClock()
    app = make_app(env="bash", tasks="bash", task="b001", clock=clock)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        screen = play_screen(app)
        clock.now += 10
        await pilot.press("f4")
        assert isinstance(app.screen, PauseScreen)
        clock.now += 100                                    # paused: does not count
        await pilot.press("enter")
        assert isinstance(app.screen, LiveScreen) and app.screen.agent is None
        clock.now += 5
        assert screen.clock.elapsed() == pytest.approx(15)
        await pilot.press("f1")                             # any dialog stops the clock too
        assert isinstance(app.screen, HelpScreen)
        clock.now += 50
        await pilot.press("escape")
        assert screen.clock.elapsed() == pytest.approx(15)


async def test_keys_can_be_remapped(make_app):
    app = make_app(env="bash", tasks="bash", task="b001",
                   config=Config(history=False, keys={"play.submit": "f10", "play.pause": "ctrl+o"}))
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await pilot.press("ctrl+s")                         # no longer submit
        assert isinstance(app.screen, LiveScreen) and app.screen.agent is None
        await pilot.press("f10")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.press("ctrl+o")
        assert isinstance(app.screen, PauseScreen)


async def test_palette_help_and_themes(make_app):
    from icplay.tui.keys import KEYS

    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for key in KEYS:
            if key.scope in ("app", "play", "bash") and key.palette:
                assert any(t.startswith(key.description) for t in titles), key.id
        await pilot.press("f1")
        help_text = text_of(app.screen.query_one("VerticalScroll Static"))
        for key in KEYS:
            assert key.id in help_text
        await pilot.press("escape")
        dark = app.current_theme.dark
        await pilot.press("ctrl+t")
        assert app.current_theme.dark is not dark
        await pilot.press("ctrl+t")
        assert app.current_theme.dark is dark


async def test_task_file_given_by_path(make_app, tmp_path, home):
    tasks = tmp_path / "mine.json"
    tasks.write_text(json.dumps([{"id": "hello", "query": "Create /testbed/hello.txt holding 'hi'.",
                                  "gold": "echo hi > /testbed/hello.txt"},
                                 {"id": "bye", "query": "Create /testbed/bye.txt holding 'bye'.",
                                  "gold": "echo bye > /testbed/bye.txt"}]))
    app = make_app(env="bash", tasks=str(tasks), task="hello")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo hi > /testbed/hello.txt")
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        assert app.screen.result.reward == 1.0
        await pilot.press("escape")
        await pilot.press("enter")                            # the task is over: nothing runs
        assert turn_count(app) == 1
        await pilot.press("ctrl+n")                           # next: "bye", done wrong on purpose
        await wait_ready(pilot)
        assert play_screen(app).task_record.id == "bye"
        await run_command(pilot, "echo bye > /testbed/by.txt")
        await pilot.press("ctrl+s", "enter")
        # (pushed is not composed: the breakdown is there once the dialog's body is mounted)
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.query("#breakdown"), 30,
                       "the score")
        assert app.screen.result.reward < 1.0
        breakdown = text_of(app.screen.query_one("#breakdown"))
        assert "missing changes" in breakdown and "?? testbed/bye.txt" in breakdown
        assert "extra changes" in breakdown and "?? testbed/by.txt" in breakdown
    saved = load_trajectory(home / "trajectories" / "default" / "mine" / "hello.json")
    assert saved.reward == 1.0 and saved.breakdown["p1"] == 0.33


async def test_quitting_mid_command_keeps_the_interrupted_turn(make_app, home):
    app = make_app(env="bash", tasks="bash", task="b002")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo before")
        await type_text(pilot, "sleep 30")
        await pilot.press("enter")
        await wait_for(pilot, lambda: play_state(app) == "running", 5)
        await pilot.pause(0.3)
        started = time.monotonic()
        await pilot.press("ctrl+q")
    app.close_envs()                                     # waits for the step to finish and save
    assert time.monotonic() - started < 8
    saved = load_trajectory(home / "trajectories" / "default" / "bash" / "b002.json")
    assert [t.action for t in saved.turns] == ["echo before", "sleep 30"]
    assert saved.turns[1].info["interrupted"] is True and saved.status == "running"


async def test_keys_typed_ahead_of_enter_all_reach_the_command(make_app):
    from tui_helpers import post_keys

    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        post_keys(app, "echo typed-ahead-of-enter", then="enter")
        await wait_for(pilot, lambda: turn_count(app) == 1 and play_state(app) == "ready", 20)
        assert play_screen(app).episode.trajectory.turns[0].action == "echo typed-ahead-of-enter"


async def test_a_submitted_task_opens_read_only_and_retry_keeps_the_attempt(make_app, home):
    from icplay.session import Session

    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, GOLD_B001)
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        await pilot.press("escape")
    app.close_envs()

    app2 = make_app(env="bash", tasks="bash", task="b001")
    async with app2.run_test() as pilot:
        await wait_ready(pilot)
        screen = play_screen(app2)
        assert screen.state == "submitted" and screen.episode is None      # viewed, no sandbox started
        assert screen.turn_list.option_count == 1 and "250" in output_text(app2)
        await type_text(pilot, "ls")
        await pilot.press("enter")                                        # the command line is closed
        assert turn_count(app2) == 1 and play_state(app2) == "submitted"
        await pilot.press("f9")
        assert isinstance(app2.screen, ScoreScreen) and app2.screen.result.reward == 1.0
        await pilot.press("r")                                            # retry
        await wait_ready(pilot)
        screen = play_screen(app2)
        assert screen.state == "ready" and screen.turn_list.option_count == 0
    session = Session("default", home)
    task = app2.catalog.find("b001")
    assert [a.reward for a in session.attempts(task)] == [1.0]
    assert session.load(task).status == "running"


async def test_timeout_is_shown_and_the_shell_survives(make_app):
    from icplay.languages import make_env

    def short_timeout(kind, sandbox, image, progress=None):
        return make_env(kind, sandbox="bwrap", timeout=1.0)

    app = make_app(env="bash", tasks="bash", task="b001", env_factory=short_timeout)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo start; sleep 5")
        turn = play_screen(app).episode.trajectory.turns[-1]
        assert turn.info["timed_out"] is True and turn.observation.startswith("start\n")
        text = output_text(app)
        assert "start" in text and "timed out" in text
        assert "timed out" in text_of(play_screen(app).query_one("#run-status"))
        await run_command(pilot, "echo alive")
        assert "alive" in output_text(app)


async def test_an_environment_that_cannot_start_is_explained(make_app, tmp_path):
    tasks = tmp_path / "imaged.json"
    tasks.write_text(json.dumps([{"id": "x", "query": "q", "gold": "true", "image": "someone/else:1"}]))
    app = make_app(env="bash", tasks=str(tasks), task="x")
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: play_state(app) == "failed", 20, "the failure")
        status = text_of(play_screen(app).query_one("#run-status"))
        assert "runs only on Docker" in status and "F8 tries again" in status
        await pilot.press("f8")                                   # tries again: same answer
        await wait_for(pilot, lambda: play_state(app) == "failed", 20, "the failure")
        await pilot.press("ctrl+b")
        assert isinstance(app.screen, PickerScreen)


async def test_ctrl_c_before_the_command_has_started_still_interrupts(make_app):
    app = make_app(env="bash", tasks="bash", task="b001")
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        with play_screen(app).host.hold():     # hold the step back: Ctrl+C comes before it starts
            await type_text(pilot, "sleep 30")
            await pilot.press("enter")
            assert play_state(app) == "running"
            await pilot.press("ctrl+c")
        started = time.monotonic()
        await wait_for(pilot, lambda: play_state(app) == "ready" and turn_count(app) == 1, 8)
        assert time.monotonic() - started < 5, "the interrupt was lost (the sandbox timeout stopped it)"
        assert play_screen(app).episode.trajectory.turns[0].info["interrupted"] is True


async def test_the_score_says_when_a_full_reward_is_not_strictly_solved(make_app, home):
    """Junk appended to the file b057 asks to change gets InterCode's 1.0 (only that the file
    changed counts there); the score says it is not strictly solved, and why."""
    app = make_app(env="bash", tasks="bash", task="b057")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_command(pilot, "echo junk >> /testbed/config/hosts")
        await pilot.press("ctrl+s", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen), 30, "the score")
        score = app.screen
        assert score.result.reward == 1.0 and score.result.strict["solved"] is False
        assert "Solved  · not strictly solved" in text_of(score.query_one("#reward"))
        assert "config/hosts: its content differs from the gold copy's" in text_of(score.query_one("#strict-reasons"))
