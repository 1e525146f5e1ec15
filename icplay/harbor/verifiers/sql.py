"""SQL: InterCode's reward of the agent's final query (/app/answer.sql) against the gold's rows.

The query runs on a fresh in-memory copy of the pristine database that came in with
tests/ (the agent's own /app copy may have been changed), on a connection set up as
icplay's SQLite episodes are (its types, collation, authorizer and limits); the gold's rows
were computed at export time by icplay and came in as tests/expected.json."""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

from icplay.envs.sql_reward import non_result_reward, sql_reward_keys
from icplay.harbor.verifiers.common import TESTS, read_answer, run
from icplay.sql.base import row_key
from icplay.sql.sqlite_guard import Deadline, confine, episode_connection, run_statement

STATEMENT_TIMEOUT = 60.0


def pristine_copy(database: str) -> sqlite3.Connection:
    source = sqlite3.connect(f"file:{TESTS / database}?mode=ro", uri=True)
    conn = episode_connection()
    source.backup(conn)
    source.close()
    return conn


def score(expected: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    query = read_answer("answer.sql")
    gold_keys = expected["gold_keys"]
    if query is None or not query.strip():
        return non_result_reward(0, len(gold_keys)).reward, {"agent_result": "no query: /app/answer.sql was not written"}
    conn = pristine_copy(expected["database"])
    deadline = Deadline()
    guard = confine(conn, deadline)
    result = run_statement(conn, query.strip(), deadline, STATEMENT_TIMEOUT, guard,
                           lambda cursor, got: setattr(got, "rows", cursor.fetchall()))
    conn.close()
    if not result.is_result:
        why = f"error: {result.error}" if result.error is not None else "no result set"
        return non_result_reward(0, len(gold_keys)).reward, {"agent_result": why}
    scored = sql_reward_keys([row_key(row) for row in result.rows], gold_keys)
    return scored.reward, {"agent_result": "rows", **scored.to_dict()}


def main() -> int:
    return run(score)


if __name__ == "__main__":
    sys.exit(main())
