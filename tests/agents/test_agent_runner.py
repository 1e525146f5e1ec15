"""The batch runner: parallel episodes, one env per worker, trajectories on disk, resume, stopping."""

import io
import json
import threading

import pytest
from agent_helpers import TableEnv, make_task

from icplay.agents.llm import AgentError
from icplay.agents.protocols import Budget, Limits
from icplay.agents.replay import GoldPolicy
from icplay.envs.base import strict_verdict
from icplay.episode import Proposal
from icplay.executors.local import Progress, RunConfigError, Runner, check_run_folder
from icplay.store import TrajectoryStore, load_trajectory

ANSWERS = {f"SELECT {i}": str(i) for i in range(20)}


def tasks(n=12):
    hard = ["easy", "medium", "hard"]
    return [make_task(i, query=f"question {i}", gold=f"SELECT {i}", hardness=hard[i % 3]) for i in range(n)]


class Solver:
    """Solves even tasks on turn 2 (after a wrong try), never the odd ones; counts calls."""

    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def propose(self, task, trajectory, cancel=None, notify=None):
        with self.lock:
            self.calls += 1
        n = len(trajectory.turns)
        usage = {"prompt_tokens": 90, "completion_tokens": 10, "cost": 0.001, "calls": 1}
        if int(task.id) % 2 == 0:
            return Proposal("SELECT 99" if n == 0 else task.gold, info={"usage": usage})
        return Proposal("SELECT 98", info={"usage": usage})


def runner(tmp_path, policy, jobs=1, envs=None, **kw):
    envs = envs if envs is not None else []

    def factory():
        env = TableEnv(ANSWERS, delay=0.01)
        envs.append(env)
        return env

    kw.setdefault("limits", Limits(max_turns=3))
    return Runner(kw.pop("tasks", tasks()), factory, policy, {"kind": "test"}, TrajectoryStore(tmp_path),
                  jobs=jobs, **kw)


def test_parallel_episodes_one_env_per_worker_and_one_file_per_episode(tmp_path):
    envs = []
    result = runner(tmp_path, Solver(), jobs=4, envs=envs).run()
    assert len(result.trajectories) == 12 and result.played == 12 and not result.stopped
    assert [t.task["id"] for t in result.trajectories] == [str(i) for i in range(12)]   # task order
    assert 1 <= len(envs) <= 4 and all(e.closed for e in envs)
    files = sorted(p.name for p in (tmp_path / "toy").iterdir())
    assert files == sorted(f"{i}.json" for i in range(12))
    s = result.summary()
    assert (s.episodes, s.solved) == (12, 6)
    assert s.by_turn == [0.0, 0.5, 0.5] and s.mean_turns == pytest.approx((6 * 2 + 6 * 3) / 12)
    assert s.prompt_tokens == 90 * 30 and s.cost == pytest.approx(0.03)


def test_a_rerun_skips_finished_episodes(tmp_path):
    first = runner(tmp_path, Solver(), budget=Budget(max_tokens=1000)).run()
    assert first.stopped and "token limit" in first.stopped
    done = len(first.trajectories)
    assert 0 < done < 12
    statuses = [load_trajectory(p).status for p in (tmp_path / "toy").glob("*.json")]
    assert statuses.count("stopped") == 1 and statuses.count("submitted") == done
    solver = Solver()
    second = runner(tmp_path, solver, jobs=3).run()
    assert second.resumed == done and second.played == 12 - done and not second.stopped
    assert len(second.trajectories) == 12 and second.summary().solved == 6
    third_solver = Solver()
    third = runner(tmp_path, third_solver).run()
    assert third.resumed == 12 and third_solver.calls == 0


def test_a_fatal_model_error_stops_the_run_in_one_sentence(tmp_path):
    class NoKey:
        def propose(self, task, trajectory, cancel=None, notify=None):
            raise AgentError("the model server at x rejected the API key (401)")

    result = runner(tmp_path, NoKey(), jobs=2).run()
    assert result.stopped == "the model server at x rejected the API key (401)"
    assert result.trajectories == []
    assert {load_trajectory(p).status for p in (tmp_path / "toy").glob("*.json")} == {"stopped"}


def test_episode_errors_are_recorded_and_a_broken_env_stops_early(tmp_path):
    class Flaky:
        def propose(self, task, trajectory, cancel=None, notify=None):
            if task.id == "3":
                raise AgentError("refused (400)", fatal=False)
            return Proposal(task.gold if not trajectory.turns else None)

    result = runner(tmp_path, Flaky()).run()
    assert len(result.errors) == 1 and result.errors[0].startswith("toy/3: AgentError: refused")
    s = result.summary()
    assert s.errors == 1 and s.episodes == 11 and s.solved == 11

    def broken():
        raise RuntimeError("no sandbox")

    r = Runner(tasks(), broken, GoldPolicy(), {"kind": "gold"}, TrajectoryStore(tmp_path / "b"), jobs=2)
    result = r.run()
    assert result.stopped == "RuntimeError: no sandbox" and result.trajectories == []


def test_progress_prints_a_line_per_episode_when_not_a_terminal(tmp_path):
    out = io.StringIO()
    runner(tmp_path, Solver(), progress=Progress(12, out, live=False), tasks=tasks(3)).run()
    lines = out.getvalue().splitlines()
    # the toy env gives no strict verdict: shown as unknown, never as solved or not
    assert lines == ["[1/12] toy/0: solved at turn 2 (strict –)", "[2/12] toy/1: reward 0.0 (strict –)",
                     "[3/12] toy/2: solved at turn 2 (strict –)"]


class StrictTableEnv(TableEnv):
    """The toy env with a strict verdict that refuses task 2's full reward."""

    def submit(self, arg=None):
        result = super().submit(arg)
        result.strict = strict_verdict(result.reward, ["the gold returns no rows"] if self.task.id == "2" else [])
        return result


def test_progress_shows_the_strict_verdict_beside_solved(tmp_path):
    out = io.StringIO()
    progress = Progress(12, out, live=False)
    r = Runner(tasks(3), lambda: StrictTableEnv(ANSWERS), Solver(), {"kind": "test"}, TrajectoryStore(tmp_path),
               limits=Limits(max_turns=3), progress=progress)
    result = r.run()
    assert out.getvalue().splitlines() == ["[1/12] toy/0: solved at turn 2 (strict ✓)",
                                           "[2/12] toy/1: reward 0.0 (strict ✗)",
                                           "[3/12] toy/2: solved at turn 2 (strict ✗)"]
    assert "3/12 · solved 2 (66.7%) · strict 1 · running 0" in progress.line()
    summary = result.summary()
    assert (summary.solved, summary.strict_solved, summary.strict_judged) == (2, 1, 3)


def test_live_progress_line():
    p = Progress(10, io.StringIO(), live=True)
    p.started_episode()
    p.add_usage(1234, 0.5)
    assert "0/10 · solved 0 · strict – · running 1 · 1,234 tokens · $0.5000" in p.line()


def test_the_run_folder_refuses_another_run(tmp_path):
    ident = {"env": "sql", "tasks": "sql", "policy": {"kind": "llm", "model": "a", "strategy": "tryagain",
                                                      "base_url": "http://x"}, "protocol": "intercode",
             "max_turns": 10}
    check_run_folder(tmp_path, ident)
    check_run_folder(tmp_path, {**ident, "policy": {**ident["policy"], "base_url": "http://y"}})   # endpoint may change
    with pytest.raises(RunConfigError, match=r"holds another run \(policy"):
        check_run_folder(tmp_path, {**ident, "policy": {**ident["policy"], "model": "b"}})
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "1.json").write_text("{}")
    check_run_folder(tmp_path, {**ident, "protocol": "agent"}, fresh=True)
    assert not (tmp_path / "toy" / "1.json").exists()
    assert json.loads((tmp_path / "run.json").read_text())["protocol"] == "agent"


def test_an_episode_that_fails_before_its_first_turn_is_recorded(tmp_path):
    class BadReset(TableEnv):
        def reset(self, task):
            if task.id == "1":
                raise RuntimeError("container vanished")
            return super().reset(task)

    r = Runner(tasks(3), lambda: BadReset(ANSWERS), GoldPolicy(), {"kind": "gold"}, TrajectoryStore(tmp_path))
    result = r.run()
    assert [t.status for t in result.trajectories] == ["submitted", "error", "submitted"]
    assert result.errors == ["toy/1: RuntimeError: container vanished"]
    assert load_trajectory(tmp_path / "toy" / "1.json").status == "error"


def test_values_json_cannot_hold_are_saved_as_text(tmp_path):
    from decimal import Decimal

    from icplay.envs.base import StepResult

    class DecimalEnv(TableEnv):
        def step(self, action, on_output=None):
            result = super().step(action)
            return StepResult(result.observation, 0, 0.0, {"rows": [(Decimal("1.50"),)]})

    r = Runner(tasks(1), lambda: DecimalEnv(ANSWERS), GoldPolicy(), {"kind": "gold"}, TrajectoryStore(tmp_path))
    result = r.run()
    assert result.trajectories[0].solved and not result.errors
    assert load_trajectory(tmp_path / "toy" / "0.json").turns[0].info["rows"] == [["1.50"]]


def test_stopping_the_run_cancels_model_calls_under_way(tmp_path, fake_server):
    from fake_openai_server import Reply, Script, fenced

    from icplay.agents.llm import ChatModel, LLMPolicy

    hold = threading.Event()
    server = fake_server(Script([Reply(fenced("SELECT 1"), hold=hold)]))
    policy = LLMPolicy(ChatModel("m", base_url=server.url, api_key="k"), "tryagain", "agent")
    run = runner(tmp_path, policy, jobs=2, tasks=tasks(2))
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault("result", run.run()), daemon=True)
    thread.start()
    assert server.wait_requests(2)             # both episodes wait on the model
    run.stop("interrupted")
    thread.join(timeout=20)
    assert not thread.is_alive()               # returned without the model's answer
    hold.set()
    result = done["result"]
    assert result.stopped == "interrupted" and result.trajectories == []
    saved = [load_trajectory(p) for p in tmp_path.rglob("*.json")]
    assert len(saved) == 2 and all(t.status == "stopped" and t.turns == [] for t in saved)


HOLD_CLAIM = """
import sys, time
from icplay.store import TrajectoryStore
TrajectoryStore(sys.argv[1]).claim("toy", "3")
print("claimed", flush=True)
time.sleep(60)
"""


def test_a_task_another_process_is_running_is_skipped_not_clobbered(tmp_path):
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", HOLD_CLAIM, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        stream = io.StringIO()
        from icplay.executors.local import Progress

        result = runner(tmp_path, Solver(), tasks=tasks(6), progress=Progress(6, stream=stream, live=False)).run()
        assert sorted(t.task["id"] for t in result.trajectories) == ["0", "1", "2", "4", "5"]
        assert not (tmp_path / "toy" / "3.json").exists()
        assert "skipped toy/3" in stream.getvalue() and "another icplay process" in stream.getvalue()
    finally:
        holder.kill()
        holder.wait()
    again = runner(tmp_path, Solver(), tasks=tasks(6)).run()     # the holder is gone: a rerun does it
    assert again.resumed == 5 and [t.task["id"] for t in again.trajectories] == [str(i) for i in range(6)]
