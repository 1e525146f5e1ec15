"""InterCode-SQL: reset / step / submit over a database backend, scored as InterCode scores.

- ``reset(task)`` starts the episode on a pristine copy of the task's database (the
  backend's job) and has the gold query's rows for scoring from a pristine copy: run at
  once, or, where the backend runs golds on a fresh copy of the database the episode began
  on (SQLite), when first needed, so a run's first model request never waits for golds. (InterCode ran the gold on the agent's database at
  submit time, so agent DDL could change the gold's answer; icplay does not.)
- ``step(sql)`` runs one statement; the observation is InterCode's string of the rows
  list (``[(1, 'a'), ...]``), ``None`` for a statement without a result set, or
  ``Error executing query: ...``. ``StepResult.info`` carries ``columns``, ``rows`` and
  ``truncated`` so a REPL or the TUI can draw a table.
- ``submit()`` scores the last observation against the gold rows with
  :func:`icplay.envs.sql_reward.sql_reward`; anything but a result set scores 0. The
  strict verdict beside it is never "solved" on a task whose gold returns no rows or
  fails on the backend (a constant empty query would match it), nor for an answer cut at
  the row cap.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.envs.base import HAS_SCHEMA, StepResult, SubmitResult, strict_verdict
from icplay.envs.sql_reward import non_result_reward, sql_reward_keys
from icplay.sql import make_sql_backend
from icplay.sql.base import QueryResult, SqlBackend, Table
from icplay.tasks.model import Task


def gold_not_discriminative(gold: QueryResult, backend: str = "this backend") -> str | None:
    """Why a gold result cannot tell a solution from a guess, or None if it can.

    A gold that fails or returns no rows is matched by any query returning no rows
    (InterCode scores a failing gold as no rows), so a constant empty query earns 1.0:
    such a task is never strictly solved."""
    if gold.error is not None:
        return (f"the task's gold fails on {backend} ({gold.error}), so any query returning no rows "
                "scores 1.0; the task cannot be strictly solved")
    if not gold.is_result:
        return (f"the task's gold returns no result set on {backend}, so any query returning no rows "
                "scores 1.0; the task cannot be strictly solved")
    if not gold.rows:
        return (f"the task's gold returns no rows on {backend}, so any query returning no rows scores 1.0; "
                "the task cannot be strictly solved")
    return None


def score_rows(last: QueryResult | None, gold: QueryResult, backend: str = "this backend") -> SubmitResult:
    """InterCode's reward of an agent's last result against the gold result, explained,
    with the strict verdict beside it.

    A gold query that fails counts as returning no rows (InterCode's behaviour), and the
    breakdown says so.
    """
    gold_keys = gold.keys() if gold.is_result else []
    breakdown: dict[str, Any] = {}
    reasons: list[str] = []
    if gold.error is not None:
        breakdown["gold_error"] = gold.error
    not_discriminative = gold_not_discriminative(gold, backend)
    if not_discriminative:
        breakdown["gold_discriminative"] = False
        reasons.append(not_discriminative)
    if last is None or not last.is_result:
        if last is None:
            breakdown["agent_result"] = "no statement was run"
        elif last.error is not None:
            breakdown["agent_result"] = "error"
        else:
            breakdown["agent_result"] = "no result set"
        scored = non_result_reward(0, len(gold_keys))
    else:
        breakdown["agent_result"] = "rows"
        scored = sql_reward_keys(last.keys(), gold_keys)
        if last.truncated:
            breakdown["agent_truncated"] = True
            reasons.append("the answer was cut at the row cap, so its rows beyond the cap were never compared")
    details = scored.to_dict()
    breakdown.update(details)
    breakdown["rows_matched"] = details.get("shared", 0)
    gold_output = gold.intercode_observation if gold.is_result else "[]"
    return SubmitResult(float(scored.reward), breakdown, gold_output, strict=strict_verdict(scored.reward, reasons))


class SqlEnv:
    """One SQL episode at a time over a backend (``make_sql_backend``)."""

    name = "sql"
    capabilities = frozenset({HAS_SCHEMA})

    def __init__(self, backend: SqlBackend):
        self.backend = backend
        self.sandbox_kind = backend.kind
        self.task: Task | None = None
        self.last: QueryResult | None = None
        self._gold: QueryResult | None = None
        self._gold_later: Callable[[], QueryResult] | None = None

    def reset(self, task: Task) -> str:
        """Pristine database for ``task``, its gold rows due (see the module docstring), the query returned."""
        self.task = task
        self.last = None
        self._gold = self._gold_later = None
        self.backend.reset(task.db, task.extra.get("databases"))
        deferred = getattr(self.backend, "deferred_gold", None)
        if deferred is not None:
            self._gold_later = deferred(task.gold)
        else:
            self._gold = self.backend.gold(task.gold)
        return task.query

    @property
    def gold(self) -> QueryResult | None:
        """The gold query's result on the episode's pristine database (None before a reset)."""
        if self._gold is None and self._gold_later is not None:
            self._gold, self._gold_later = self._gold_later(), None
        return self._gold

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
        gold = self.gold
        if gold is None:
            raise RuntimeError("no episode: call reset(task) first")
        return score_rows(self.last, gold, self.backend.kind)

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


def check_golds(tasks: list[Task], backend: SqlBackend,
                progress: Callable[[int, int], None] | None = None) -> list[tuple[Task, str]]:
    """Each task whose gold is not discriminative on ``backend`` (returns no rows or
    fails), with the reason: their episodes are never strictly solved."""
    found = []
    for done, task in enumerate(tasks, 1):
        backend.reset(task.db, task.extra.get("databases"))
        reason = gold_not_discriminative(backend.gold(task.gold), backend.kind)
        if reason:
            found.append((task, reason))
        if progress is not None:
            progress(done, len(tasks))
    return found


def check_gold_set(tasks: list[Task], sandbox: str, progress: Callable[[str], None]) -> list[tuple[Task, str]]:
    """SQL's gold check (``icplay tasks --check``): ``check_golds`` on a ``sandbox`` backend."""
    backend = make_sql_backend(sandbox, progress=progress)
    try:
        return check_golds(tasks, backend)
    finally:
        backend.close()


def make_sql_env(sandbox: str, image: str | None = None, timeout: float | None = None,
                 progress: Callable[[str], None] | None = None, recycle: bool = True, **options: Any) -> SqlEnv:
    """An SQL env on a SQLite or MariaDB backend (the language spec's ``env``)."""
    return SqlEnv(make_sql_backend(sandbox, progress=progress, image=image, timeout=timeout, **options))
