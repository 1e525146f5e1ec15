"""SQL (InterCode-SQL: Spider, WikiSQL): one statement per action on SQLite or MariaDB."""

from __future__ import annotations

from icplay.languages.spec import Image, LanguageSpec, Prompts
from icplay.tasks.model import Task

LAST_RESULT = {"error": "an error: no rows to compare (scores 0)",
               "no result set": "a statement without rows (scores 0)",
               "no statement was run": "nothing was run (scores 0)"}


def score_rows(b: dict) -> list[tuple[str, str]]:
    rows = []
    result = b.get("agent_result")
    if result and result != "rows":
        rows.append(("your last result", LAST_RESULT.get(result, result)))
    rows.append(("rows matched", f"{b.get('rows_matched', b.get('shared', 0))} (yours {b.get('agent_count', 0)}, "
                                 f"gold {b.get('gold_count', 0)})"))
    rows.append(("IoU (rows)", f"{b.get('iou', 0):.3f}"))
    tau = b.get("kendall_tau_b")
    rows.append(("order (Kendall tau-b)", "n/a (fewer than two shared rows to order)" if tau is None else f"{tau:.3f}"))
    if b.get("agent_truncated"):
        rows.append(("note", "your result was truncated at the row limit"))
    if b.get("gold_error"):
        rows.append(("gold error", str(b["gold_error"])))
    return rows


def score_lines(b: dict) -> list[str]:
    """The reward's measures on one line, as line mode prints them."""
    if "iou" not in b:
        return []
    return ["  " + "   ".join(f"{k} {v}" for k, v in b.items() if k != "reward" and not isinstance(v, (list, dict)))]


def task_lines(task: Task) -> list[str]:
    return [f"Database: {task.db}"] if task.db else []


PROMPTS = Prompts(
    name="SQL", setting="SQL database session", unit="query", units="queries", fence="sql",
    fence_aliases=("sql", "mysql", "sqlite", "sqlite3", "mariadb", "postgresql", "psql", "tsql", "plsql"),
    notes=(
        "- One statement per reply. The result rows of your last query are compared with the expected rows, so\n"
        "  finish with a query that returns exactly the requested columns, in the requested order, and no extras.\n"
        "- Explore the schema first if you need to; do not guess table or column names."
    ),
    bare_code="sql",
    sandbox_notes={
        "sqlite": "The database is SQLite: list tables with `SELECT name FROM sqlite_master WHERE type='table'` and "
                  "see a table's columns with `PRAGMA table_info(table_name)`.",
        "mysql": "The database is MySQL/MariaDB: list tables with `SHOW TABLES` and see a table's columns with "
                 "`DESCRIBE table_name`.",
    },
    task_lines=task_lines,
)

SPEC = LanguageSpec(
    name="sql", title="SQL", sandboxes=("sqlite", "mysql"),
    env="icplay.envs.sql:make_sql_env", prompts=PROMPTS, warm="icplay.sql.convert:load_sqlglot",
    pane="icplay.tui.widgets.panes:SqlPane", keys_scope="sql",
    score_rows=score_rows, score_lines=score_lines,
    images=(Image("sql", "icplay-sql:latest", "docker/sql.Dockerfile", "SQL tasks: MariaDB server on port 3306"),),
    submit_scores="the rows of the last query",
    description="SQL queries over a database (SQLite or MariaDB)",
    rescore="icplay.rescore.sql:plan", forks=True, result_view="rows",
    report_note=("SQL rewards run from -1 to 1: the right rows in the wrong order score below 0 "
                 "(IoU times Kendall's tau-b; docs/rewards.md)."),
    gold_check="icplay.envs.sql:check_gold_set",
    gold_check_finds="have a gold that is not discriminative on {sandbox} (never strictly solved)",
    fresh_state="a pristine database", input_mode="statement", input_help="SQL: end a statement with ';' (it may span lines)", prompt="sql> ",
)
