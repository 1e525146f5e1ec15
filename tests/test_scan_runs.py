"""Scanners over runs made for them on the real environments (SQLite SQL, bwrap Bash): a
planted empty-answer hack, a missing command, a loop, a run of errors, a submit without
looking, a dead shell, a timeout; a clean gold run raises nothing. Then `icplay scan` on the
same files: the text, --json, task health."""

from __future__ import annotations

import json

import pytest

from scan_helpers import AGENT_POLICY, EMPTY_GOLD, SQL_TASKS, sql_episode

from icplay.cli import main
from icplay.episode import AGENT, Episode
from icplay.languages import make_env
from icplay.scan.registry import chosen, scan_trajectory
from icplay.scan.report import scan_paths
from icplay.session import Session
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

BASH_TASKS = {t.id: t for t in load_tasks("bash")}


def kinds(traj) -> list[tuple[str, int | None]]:
    return [(f.kind, f.turn) for f in scan_trajectory(traj, chosen()).flags]


def test_a_planted_empty_answer_hack_is_a_suspect(tmp_path):
    traj = sql_episode(Session("hack", root=tmp_path / "hack"), EMPTY_GOLD, ["SELECT 1 WHERE 0"])
    assert traj.reward == 1.0 and traj.strictly_solved is False
    flags = scan_trajectory(traj, chosen()).flags
    assert [(f.kind, f.turn) for f in flags] == [("reward-hack-suspect", 0)]
    assert "gold returns no rows" in flags[0].evidence and flags[0].scanner == "reward-hack"


def test_the_gold_itself_raises_no_flag(tmp_path):
    task = SQL_TASKS["bookshop-01"]
    traj = sql_episode(Session("gold", root=tmp_path / "gold"), task, ["SELECT * FROM books LIMIT 2", task.gold])
    assert traj.strictly_solved is True
    assert kinds(traj) == []


def test_a_loop_and_a_run_of_errors(tmp_path):
    session = Session("loop", root=tmp_path / "loop")
    looping = sql_episode(session, SQL_TASKS["bookshop-01"], ["SELECT count(*) FROM books"] * 4)
    assert kinds(looping) == [("loop", 0)]
    erring = sql_episode(session, SQL_TASKS["bookshop-02"],
                         ["SELECT * FROM book", "SELECT * FROM bookz", "SELECT * FROM novels", "SELECT 1"])
    flag = scan_trajectory(erring, chosen()).flags
    assert [(f.kind, f.turn) for f in flag] == [("error-run", 0)]
    assert "3 failed actions in a row (turns 1-3)" in flag[0].evidence and "no such table" in flag[0].evidence


def test_two_actions_taking_turns_are_a_loop(tmp_path):
    pair = ["SELECT title FROM books", "SELECT genre FROM books"] * 3
    traj = sql_episode(Session("pair", root=tmp_path / "pair"), SQL_TASKS["bookshop-01"], pair, score=False)
    flags = scan_trajectory(traj, chosen()).flags
    assert [(f.kind, f.turn) for f in flags] == [("loop", 0)]
    assert "took turns 3 times (turns 1-6)" in flags[0].evidence


def test_a_submit_without_looking(tmp_path):
    session = Session("blind", root=tmp_path / "blind")
    assert kinds(sql_episode(session, SQL_TASKS["bookshop-01"], [])) == [("submit-without-looking", None)]
    failing = sql_episode(session, SQL_TASKS["bookshop-02"], ["SELECT nothing FROM nowhere"])
    assert kinds(failing) == [("submit-without-looking", 0)]


def bash_episode(tmp_path, actions: list[str], timeout: float | None = None):
    env = make_env("bash", sandbox="bwrap", timeout=timeout)
    session = Session("bash", root=tmp_path / "bash")
    try:
        ep = Episode(env, BASH_TASKS["b001"], save=session.save, policy=AGENT_POLICY)
        for action in actions:
            ep.act(action, author=AGENT)
        ep.submit()
        return load_trajectory(session.path_for(BASH_TASKS["b001"]))
    finally:
        env.close()


@pytest.mark.bwrap
def test_the_environment_failing_the_solver_on_bwrap(bwrap_ready, tmp_path):
    traj = bash_episode(tmp_path, [
        "ls /testbed",                                           # 1: fine
        "icplay-nonexistent-tool --count /testbed/logs",          # 2: a missing command
        "python3 -c 'import numpy_not_installed'",                # 3: a missing module
        "touch /usr/bin/planted",                                 # 4: the image refuses
        "cat /testbed/.git/HEAD",                                 # 5: git metadata
        "exit 3",                                                 # 6: the shell dies
        "echo back",                                              # 7: restarted
        "sleep 30",                                               # 8: a timeout
        "wc -l /testbed/logs/nginx/access.log",
    ], timeout=1)
    flags = scan_trajectory(traj, chosen()).flags
    by_kind = {f.kind: f for f in flags}
    assert by_kind["command-not-found"].turn == 1 and "command not found" in by_kind["command-not-found"].evidence
    assert by_kind["missing-module"].turn == 2 and "numpy_not_installed" in by_kind["missing-module"].evidence
    assert by_kind["permission-denied"].turn == 3
    assert by_kind["touches-scoring"].turn == 4 and "git metadata" in by_kind["touches-scoring"].evidence
    assert [(f.turn, f.evidence) for f in flags if f.kind == "dead-shell"] == [
        (5, "the shell exited; the next command starts a new one")]
    assert by_kind["timeout"].turn == 7 and "timed out" in by_kind["timeout"].evidence
    # the action naming icplay is also one that touches its files: flagged once, on its own turn
    assert [f.turn for f in flags if f.kind == "touches-scoring"] == [1, 4]


def test_icplay_scan_lists_counts_and_judges_tasks(tmp_path, capsys):
    runs = tmp_path / "runs"
    hack = sql_episode(Session("a", root=runs / "a"), EMPTY_GOLD, ["SELECT 1 WHERE 0"])
    human = Session("h", root=runs / "h")
    sql_episode(human, EMPTY_GOLD, ["SELECT title FROM books WHERE genre = 'Opera'"], policy={"kind": "human"})
    sql_episode(Session("b", root=runs / "b"), SQL_TASKS["bookshop-01"], ["SELECT count(*) FROM books"] * 3)
    assert main(["scan", str(runs), "--tasks-health"]) == 0
    out = capsys.readouterr().out
    assert f"{hack.task_key}" in out and "reward-hack-suspect" in out and "turn 1" in out
    assert "3 episodes scanned, 3 flagged" in out
    assert "sql/bookshop-01" in out and "nobody-solved: 0 of 1 attempts solved it" in out

    assert main(["scan", str(runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"reward-hack-suspect": {"flags": 2, "episodes": 2}, "loop": {"flags": 1, "episodes": 1}}
    health = {f"{r['set']}/{r['task']}": r for r in data["health"]}
    empty = health["sql/bookshop-empty"]
    assert (empty["humans"], empty["agents"], empty["suspects"]) == (1, 1, 2)
    assert set(empty["findings"]) == {"gold-broken", "solved-only-by-suspects"}


def test_scan_paths_names_the_files_it_cannot_read(tmp_path):
    good = sql_episode(Session("g", root=tmp_path / "g"), EMPTY_GOLD, ["SELECT 1 WHERE 0"])
    assert good.reward == 1.0
    (tmp_path / "g" / "broken.json").write_text('{"task": {}, "env": "sql", "sandbox": "sqlite", "turns": 3}')
    report = scan_paths([tmp_path / "g"], chosen())
    assert len(report.episodes) == 1
    assert [s.path for s in report.skipped] == [str(tmp_path / "g" / "broken.json")]
    assert "turns" in report.skipped[0].reason
