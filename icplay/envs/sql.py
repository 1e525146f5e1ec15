"""InterCode-SQL: reset / step / submit over a database backend, scored as InterCode scores.

- ``reset(task)`` starts the episode on a pristine copy of the task's database (the
  backend's job) and runs the gold query right away, while the copy is still pristine;
  its rows are kept for scoring. (InterCode ran the gold on the agent's database at
  submit time, so agent DDL could change the gold's answer; icplay does not.)
- ``step(sql)`` runs one statement; the observation is InterCode's string of the rows
  list (``[(1, 'a'), ...]``), ``None`` for a statement without a result set, or
  ``Error executing query: ...``. ``StepResult.info`` carries ``columns``, ``rows`` and
  ``truncated`` so a REPL or the TUI can draw a table.
- ``submit()`` scores the last observation against the gold rows with
  :func:`icplay.envs.sql_reward.sql_reward`; anything but a result set scores 0.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.envs.base import HAS_SCHEMA, StepResult, SubmitResult
from icplay.envs.sql_reward import non_result_reward, sql_reward
from icplay.sql.base import QueryResult, SqlBackend, Table
from icplay.tasks.model import Task


def score_rows(last: QueryResult | None, gold: QueryResult) -> SubmitResult:
    """InterCode's reward of an agent's last result against the gold result, explained.

    A gold query that fails counts as returning no rows (InterCode's behaviour), and the
    breakdown says so.
    """
    gold_rows = gold.rows if gold.is_result else []
    breakdown: dict[str, Any] = {}
    if gold.error is not None:
        breakdown["gold_error"] = gold.error
    if last is None or not last.is_result:
        if last is None:
            breakdown["agent_result"] = "no statement was run"
        elif last.error is not None:
            breakdown["agent_result"] = "error"
        else:
            breakdown["agent_result"] = "no result set"
        scored = non_result_reward(0, len(gold_rows))
    else:
        breakdown["agent_result"] = "rows"
        scored = sql_reward(last.rows, gold_rows)
        if last.truncated:
            breakdown["agent_truncated"] = True
    details = scored.to_dict()
    breakdown.update(details)
    breakdown["rows_matched"] = details.get("shared", 0)
    return SubmitResult(float(scored.reward), breakdown, gold.intercode_observation if gold.is_result else str(gold_rows))


class SqlEnv:
    """One SQL episode at a time over a backend (``make_sql_backend``)."""

    name = "sql"
    capabilities = frozenset({HAS_SCHEMA})

    def __init__(self, backend: SqlBackend):
        self.backend = backend
        self.sandbox_kind = backend.kind
        self.task: Task | None = None
        self.last: QueryResult | None = None
        self.gold: QueryResult | None = None

    def reset(self, task: Task) -> str:
        """Pristine database for ``task``, gold rows computed, the query returned."""
        self.task = task
        self.last = None
        self.backend.reset(task.db, task.extra.get("databases"))
        self.gold = self.backend.gold(task.gold)
        return task.query

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        """Run one SQL statement; errors are observations, never exceptions."""
        result = self.backend.execute(action)
        self.last = result
        observation = result.intercode_observation
        if on_output is not None:
            on_output(observation)
        info = result.info()
        info["notes"] = result.notes_list()
        info["database"] = getattr(self.backend, "database", None)
        return StepResult(observation=observation, exit_code=0 if result.ok else 1,
                          duration=result.duration, info=info)

    def score(self) -> SubmitResult:
        """The reward the last observation would get now (InterCode's per-turn reward)."""
        if self.gold is None:
            raise RuntimeError("no episode: call reset(task) first")
        return score_rows(self.last, self.gold)

    def submit(self, arg: str | None = None) -> SubmitResult:
        """End the episode: score the last observation against the gold rows."""
        return self.score()

    def schema(self) -> list[Table]:
        """Tables and their columns of the current database, for the schema browser."""
        return self.backend.schema()

    def interrupt(self) -> None:
        self.backend.interrupt()

    def close(self) -> None:
        self.backend.close()


def make_sql_env(sandbox: str, image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **options) -> SqlEnv:
    """An SQL env on a SQLite or MariaDB backend (the language spec's ``env``)."""
    from icplay.sql import make_sql_backend

    return SqlEnv(make_sql_backend(sandbox, progress=progress, image=image, timeout=timeout, **options))
