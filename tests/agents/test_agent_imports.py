"""The agents, the runner and the report import without textual (DESIGN.md's rule)."""

import subprocess
import sys


def test_no_textual_outside_the_tui():
    code = ("import sys, icplay.executors.local, icplay.report, icplay.agents.llm, icplay.agents.replay, "
            "icplay.agents.protocols, icplay.commands.run, icplay.commands.report; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_sqlite_episode_starts_without_its_gold_or_sqlglot():
    """Issue 29: nothing ahead of a run's first model request that can wait: the gold of a SQLite
    episode runs when first needed (on a pristine copy of the database the episode began on),
    and sqlglot (0.2 s of imports) loads with it, not with the backend (a cached database; the
    first conversion of a dump needs it)."""
    code = ("import sys; from icplay.languages import make_env; from icplay.tasks.registry import load_tasks\n"
            "task = load_tasks('sql')[0]; env = make_env('sql', sandbox='sqlite')\n"
            "env.reset(task); print('sqlglot' in sys.modules, env._gold is None)\n"
            "env.step('DROP TABLE IF EXISTS ' + env.schema()[0].name); env.step('USE ' + (task.db or 'x'))\n"
            "print(env.gold.rows == env.backend.gold(task.gold).rows, 'sqlglot' in sys.modules); env.close()")
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)  # converts the dump once
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "True", "True"], done.stdout
