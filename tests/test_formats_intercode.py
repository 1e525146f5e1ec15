"""InterCode's per-episode log format (one object keyed by task index, each with a
``trajectory`` of ``{action, observation}`` and the final ``reward``) read by ``rescore``,
``report`` and the replay policy, on the bundled SQL set over real SQLite."""

from __future__ import annotations

import json
import subprocess
import sys

from icplay.formats import intercode, load_logs
from icplay.tasks.registry import load_tasks


def cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def keyed_logs(tmp_path):
    """Three episodes written by hand in InterCode's logging shape. Episode 0 ends on the gold
    (recorded 1.0, right); episode 4 recorded 1.0 for a wrong last query (a bad record); episode
    7 recorded 0.0 for a wrong query (right)."""
    tasks = load_tasks("sql")
    logs = {
        "0": {"environment": "ic_sql", "query_idx": 0, "query": tasks[0].query, "gold": tasks[0].gold,
              "reward": 1.0, "trajectory": [{"action": "SELECT 1", "observation": "(1,)"},
                                            {"action": tasks[0].gold, "observation": "..."}]},
        "4": {"environment": "ic_sql", "query_idx": 4, "query": tasks[4].query, "gold": tasks[4].gold,
              "reward": 1.0, "trajectory": [{"action": "SELECT 'not it'", "observation": "('not it',)"}]},
        "7": {"environment": "ic_sql", "query_idx": 7, "query": tasks[7].query, "gold": tasks[7].gold,
              "reward": 0.0, "trajectory": [{"action": "SELECT 2", "observation": "(2,)"},
                                            {"action": "SELECT 3", "observation": "(3,)"}]},
    }
    path = tmp_path / "ic_sql_logs.json"
    path.write_text(json.dumps(logs))
    return path, tasks, logs


def test_keyed_logs_are_read_as_episodes(tmp_path):
    path, tasks, logs = keyed_logs(tmp_path)
    episodes = intercode.read_results(path)
    assert [e.task_index for e in episodes] == [0, 4, 7]
    assert [e.final_reward for e in episodes] == [1.0, 1.0, 0.0]
    assert episodes[0].rewards == [None, 1.0]          # only the final reward is recorded
    assert episodes[0].gold == tasks[0].gold and episodes[0].env == "sql"


def test_rescore_compares_the_final_reward_with_the_reward_after_the_last_action(tmp_path):
    path, tasks, logs = keyed_logs(tmp_path)
    out = tmp_path / "turns.jsonl"
    done = cli("rescore", str(path), "--tasks", "sql", "--sandbox", "sqlite", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "expected turn_history" not in done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 5
    last = {r["episode"]: r for r in lines if r["recorded_reward"] is not None}
    assert set(last) == {"0", "4", "7"}
    for key, record in last.items():
        assert record["turn"] == len(logs[key]["trajectory"]) - 1
        assert record["recorded_reward"] == logs[key]["reward"]
    assert last["0"]["reward"] == 1.0 and last["0"]["agrees"] is True
    assert last["4"]["reward"] < 1.0 and last["4"]["agrees"] is False
    assert last["7"]["agrees"] is True
    assert "turns agreeing within 0.01: 2 / 3" in done.stdout
    assert "episodes whose solved status agrees: 2 / 3" in done.stdout


def test_report_reads_keyed_logs(tmp_path):
    path, tasks, logs = keyed_logs(tmp_path)
    trajs, meta = load_logs(path)
    assert [t.task["id"] for t in trajs] == ["0", "4", "7"]
    assert [t.reward for t in trajs] == [1.0, 1.0, 0.0]
    assert [len(t.turns) for t in trajs] == [2, 1, 2]
    done = cli("report", str(path), "--json")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["runs"][0]
    assert run["episodes"] == 3 and run["solved"] == 2


def test_replay_policy_plays_keyed_logs_on_the_bundled_set(tmp_path):
    path, tasks, logs = keyed_logs(tmp_path)
    out = tmp_path / "run"
    done = cli("run", "sql", "--tasks", "sql", "--policy", "replay", "--replay", str(path), "--sandbox", "sqlite",
               "--out", str(out), "--quiet", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["episodes"] == 3
    for key, log in logs.items():
        task = tasks[int(key)]
        saved = json.loads((out / "sql" / f"{task.id}.json").read_text())
        assert [t["action"] for t in saved["turns"]] == [step["action"] for step in log["trajectory"]]
    solved = json.loads((out / "sql" / f"{tasks[0].id}.json").read_text())
    assert solved["best_reward"] == 1.0


def test_a_log_without_its_task_index_is_one_sentence(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"0": {"environment": "ic_sql", "trajectory": [{"action": "SELECT 1"}]}}))
    done = cli("rescore", str(bad), "--tasks", "sql", "--sandbox", "sqlite")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "query_idx" in done.stderr


def test_trajectory_folders_lists_sessions_and_runs(tmp_path):
    from icplay.formats.native import runs_root, sessions_root, trajectory_folders
    from icplay.session import Session

    session = Session("mine", home=tmp_path)
    assert session.root.parent == sessions_root(tmp_path)
    (runs_root(tmp_path) / "sql-run").mkdir(parents=True)
    session.root.mkdir(parents=True)
    (sessions_root(tmp_path) / ".locks").mkdir()
    assert trajectory_folders(tmp_path) == [session.root, runs_root(tmp_path) / "sql-run"]


def test_replay_of_a_folder_of_per_episode_logs_keeps_their_observations(tmp_path):
    from icplay.agents.replay import ReplayPolicy

    tasks = load_tasks("sql")
    folder = tmp_path / "logs_ic_sql"
    folder.mkdir()
    no_code = "No SQL code was found in your last response."
    (folder / "log_1.json").write_text(json.dumps({
        "environment": "ic_sql", "query_idx": 2, "query": tasks[2].query, "reward": 0.0, "trajectory": [
            {"action": "hello", "observation": no_code}, {"action": "SELECT 1", "observation": "(1,)"},
            {"action": "blocked", "observation": ""}, {"action": "SELECT 2", "observation": "(2,)"}]}))
    policy = ReplayPolicy.from_path(folder, tasks)
    rec = policy.recordings[tasks[2].id]
    assert rec.actions == [None, "SELECT 1"]               # no code: an invalid turn; blocked ends it
    assert rec.observations[0] == no_code and policy.check(tasks[2]) is None
    # an icplay trajectory's task ids are never taken for indexes
    from icplay.agents.replay import Recorded, by_task_id

    assert by_task_id({"2": Recorded(["SELECT 1"])}, tasks) == {"2": Recorded(["SELECT 1"])}
