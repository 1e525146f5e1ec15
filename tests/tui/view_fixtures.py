"""Saved episodes for the viewer's tests, recorded on the real SQLite env (and bwrap for
Bash), then given fixed ids and times so that snapshots do not move, and strict verdicts
pinned (whatever verdict the env gives, or none), so that the screens show each kind:
bookshop-01's two episodes judged solved, bookshop-02's left without a verdict."""

from __future__ import annotations

import json
from pathlib import Path

from icplay.envs.base import strict_verdict
from icplay.languages import make_env
from icplay.episode import AGENT, AGENT_EDITED, Episode, Proposal
from icplay.session import Session
from icplay.store import load_trajectory, save_trajectory
from icplay.tasks.registry import load_tasks

SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
SQL_TASK2 = next(t for t in load_tasks("sql") if t.id == "bookshop-02")
BASH_TASK = next(t for t in load_tasks("bash") if t.id == "b001")
T0 = 1_780_000_000.0


def fix(path: Path, episode_id: str, at: float, judged: bool = True) -> None:
    """Fixed id and times (what a snapshot shows), and strict verdicts that follow the rewards
    (``judged``) or none."""
    traj = load_trajectory(path)
    traj.id, traj.started_at, traj.updated_at = episode_id, at, at + 120
    for turn in traj.turns:
        turn.started_at, turn.duration = at, 0.01
        turn.info.pop("strict", None)
        if judged and turn.reward is not None:
            turn.info["strict"] = strict_verdict(turn.reward)
    traj.strict = strict_verdict(traj.reward) if judged and traj.reward is not None else None
    if traj.time_worked:
        traj.time_worked = 95.0
    save_trajectory(traj, path)


def record_sql(home: Path) -> dict[str, Path]:
    """A human's episode and an agent's (with an edit and a rejection) of bookshop-01, and a
    human's of bookshop-02."""
    env = make_env("sql", sandbox="sqlite")
    out = {}
    try:
        human = Session("ann", home=home)
        ep = Episode(env, SQL_TASK, save=human.save, policy={"kind": "human", "ui": "tui"}, annotator="ann")
        ep.trajectory.time_worked = 1.0
        ep.act("SELECT title FROM books")
        ep.act("SELECT title FROM books WHERE genre = 'Poetry'")
        ep.act(SQL_TASK.gold)
        ep.submit()
        out["human"] = human.path_for(SQL_TASK)
        fix(out["human"], "a1a1a1a1a1a1", T0)

        ep = Episode(env, SQL_TASK2, save=human.save, policy={"kind": "human", "ui": "tui"}, annotator="ann")
        ep.act("SELECT COUNT(*) FROM customers")
        ep.submit()
        out["human2"] = human.path_for(SQL_TASK2)
        fix(out["human2"], "c3c3c3c3c3c3", T0 + 60, judged=False)

        agent = Session("watch", home=home)
        ep = Episode(env, SQL_TASK, save=agent.save,
                     policy={"kind": "llm", "model": "gpt-4o-mini", "strategy": "react", "protocol": "intercode"})
        ep.act("SELECT title FROM books ORDER BY title DESC", author=AGENT, proposed="SELECT title FROM books ORDER BY title DESC",
               thought="All titles first, to see the data.")
        ep.score()
        ep.reject(Proposal("DROP TABLE books", thought="Start over."), "never drop the table")
        ep.act("SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title", author=AGENT_EDITED,
               proposed="SELECT title FROM books WHERE genre = 'poetry'", thought="Filter by genre.",
               comment="the genre is capitalised")
        ep.score()
        ep.submit()
        out["agent"] = agent.path_for(SQL_TASK)
        fix(out["agent"], "b2b2b2b2b2b2", T0 + 3600)
    finally:
        env.close()
    return out


def record_bash(home: Path) -> Path:
    """A human's Bash episode whose first turn writes a file."""
    env = make_env("bash", sandbox="bwrap")
    try:
        session = Session("ann", home=home)
        ep = Episode(env, BASH_TASK, save=session.save, policy={"kind": "human", "ui": "tui"}, annotator="ann")
        ep.act("echo kept-by-fork > /testbed/fork_note.txt")
        ep.act("rm /testbed/fork_note.txt")
        ep.act("wc -l /testbed/logs/nginx/access.log")
        ep.submit()
        path = session.path_for(BASH_TASK)
    finally:
        env.close()
    fix(path, "d4d4d4d4d4d4", T0 + 7200)
    return path


def tamper(path: Path, turn: int, old: str, new: str) -> None:
    data = json.loads(path.read_text())
    data["turns"][turn]["observation"] = data["turns"][turn]["observation"].replace(old, new)
    path.write_text(json.dumps(data))
