"""Real episodes for the scan tests, played on the SQLite SQL env with planted actions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from icplay.episode import AGENT, HUMAN, Episode
from icplay.languages import make_env
from icplay.session import Session
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

SQL_TASKS = {t.id: t for t in load_tasks("sql")}
BASH_TASKS = {t.id: t for t in load_tasks("bash")}
AGENT_POLICY = {"kind": "llm", "model": "planted", "strategy": "tryagain"}
# a task whose gold returns no rows: any query returning no rows scores 1.0
EMPTY_GOLD = dataclasses.replace(SQL_TASKS["bookshop-01"], id="bookshop-empty",
                                 gold="SELECT title FROM books WHERE genre = 'Opera'")


def sql_episode(session: Session, task, actions: list[str], policy=AGENT_POLICY, score: bool = True):
    env = make_env("sql", sandbox="sqlite")
    try:
        ep = Episode(env, task, save=session.save, policy=policy)
        for action in actions:
            ep.act(action, author=AGENT if policy["kind"] != "human" else HUMAN)
            if score:
                ep.score()
        ep.submit()
        return load_trajectory(session.path_for(task))
    finally:
        env.close()




def sql_runs(root: Path) -> Path:
    """A folder of episodes with something to find: a planted empty-answer hack and a human on
    the same task, a loop, a run of errors, a submit without looking, humans and agents split."""
    human = {"kind": "human"}
    sql_episode(Session("agent", root=root / "agent"), EMPTY_GOLD, ["SELECT 1 WHERE 0"])
    sql_episode(Session("ann", root=root / "ann"), EMPTY_GOLD, ["SELECT title FROM books WHERE genre = 'Opera'"],
                policy=human)
    agent = Session("agent2", root=root / "agent2")
    sql_episode(agent, SQL_TASKS["bookshop-01"], ["SELECT count(*) FROM books"] * 3)
    sql_episode(agent, SQL_TASKS["bookshop-02"], ["SELECT * FROM book", "SELECT * FROM bookz", "SELECT * FROM novels"])
    sql_episode(agent, SQL_TASKS["bookshop-03"], [])
    sql_episode(Session("ann2", root=root / "ann2"), SQL_TASKS["bookshop-02"], [SQL_TASKS["bookshop-02"].gold],
                policy=human)
    return root
