"""Turn MySQL dump statements into SQLite ones with sqlglot, keeping MySQL's behaviour.

sqlglot does the parsing and the dialect rewrite (quoting, backslash escapes in strings,
``CONCAT``); this module only adjusts the table definitions so that SQLite behaves like
the MySQL server InterCode used where it is cheap to do so:

- text columns get ``COLLATE MYSQL_CI`` (registered by ``icplay.sql.sqlite``), since
  MySQL's ``utf8mb4_general_ci`` compares, groups and sorts case-insensitively and
  ignores trailing spaces (a gold ``WHERE name = 'alton'`` matches 'Alton ');
- column types become ones whose SQLite affinity stores what MySQL stores (``INTEGER``
  for int types, so a single integer primary key is the rowid and tables scan in key
  order like InnoDB's clustered index), and temporal / decimal types keep their names so
  values come back as ``datetime`` and ``Decimal`` objects (see ``icplay.sql.sqlite``);
  a ``DECIMAL(p,s)`` column is declared ``DECIMAL_s(p,s)`` so that its converter knows
  the scale (MySQL returns ``Decimal('567.0000')`` for 567 in a ``DECIMAL(19,4)``);
- secondary indexes, engine options, charsets, ``AUTO_INCREMENT`` and
  ``ON UPDATE`` clauses are dropped: SQLite has no place for them.

Statements that only configure a MySQL session (``SET``, ``LOCK TABLES``, executable
comments) are skipped.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from icplay.sql.base import SqlBackendError, leading_verb

if TYPE_CHECKING:     # sqlglot is imported where it is used: it costs 0.2 s, and SQLite's reset needs only
    from sqlglot import exp    # CONVERTER_VERSION (golds convert later, dumps only once)

CONVERTER_VERSION = 2   # part of the SQLite cache key: bump when the output changes

TEXT_COLLATION = "MYSQL_CI"

# A dump statement that opens with an executable comment (``/*!40101 SET NAMES utf8 */``,
# ``/*!40000 ALTER TABLE t DISABLE KEYS */``) only sets up MySQL: skipped.
_EXECUTABLE_FIRST = re.compile(r"(?:\s|--[^\n]*|#[^\n]*|/\*(?!M?!).*?\*/)*/\*M?!", re.S)
SKIPPED_VERBS = {"SET", "LOCK", "UNLOCK", "FLUSH", "GRANT", "REVOKE", "ANALYZE", "OPTIMIZE", ""}

_INTEGER = {"INT", "TINYINT", "SMALLINT", "MEDIUMINT", "BIGINT", "UINT", "UTINYINT", "USMALLINT",
            "UMEDIUMINT", "UBIGINT", "BIT", "BOOLEAN", "YEAR", "SERIAL"}
_REAL = {"FLOAT", "DOUBLE", "REAL"}
_DECIMAL = {"DECIMAL", "UDECIMAL", "BIGDECIMAL", "MONEY", "SMALLMONEY"}
_TEMPORAL = {"DATE": "DATE", "DATE32": "DATE", "DATETIME": "DATETIME", "DATETIME64": "DATETIME",
             "TIMESTAMP": "TIMESTAMP", "TIMESTAMPTZ": "TIMESTAMP", "TIMESTAMPLTZ": "TIMESTAMP", "TIME": "TIME"}
_BINARY = {"BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY"}
_DROPPED_CONSTRAINTS = ("AutoIncrementColumnConstraint", "CharacterSetColumnConstraint", "CollateColumnConstraint",
                        "CommentColumnConstraint", "OnUpdateColumnConstraint")


def sqlite_type(kind: exp.DataType | None) -> tuple[str, bool]:
    """The SQLite column type for a MySQL one, and whether it is text (gets NOCASE)."""
    if kind is None:
        return "TEXT", True
    name = kind.this.name
    if name in _INTEGER:
        return "INTEGER", False
    if name in _REAL:
        return "REAL", False
    if name in _DECIMAL:
        params = [p.name for p in kind.expressions]
        scale = params[1] if len(params) > 1 else "0"
        return f"DECIMAL_{scale}({', '.join(params) or '10, 0'})", False
    if name in _TEMPORAL:
        return _TEMPORAL[name], False
    if name in _BINARY:
        return "BLOB", False
    return "TEXT", True   # CHAR, VARCHAR, TEXT, ENUM, SET, JSON, ...


def _convert_create_table(create: exp.Create) -> exp.Create:
    from sqlglot import exp

    dropped = tuple(getattr(exp, name) for name in _DROPPED_CONSTRAINTS)
    schema = create.this
    if isinstance(schema, exp.Schema):
        kept = []
        for item in schema.expressions:
            if isinstance(item, exp.IndexColumnConstraint):
                continue   # a secondary KEY: no such clause in SQLite's CREATE TABLE
            if isinstance(item, exp.ColumnDef):
                type_name, is_text = sqlite_type(item.args.get("kind"))
                item.set("kind", exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=type_name))
                constraints = [c for c in item.args.get("constraints") or []
                               if not isinstance(c.args.get("kind"), dropped)]
                if is_text:
                    constraints.append(exp.ColumnConstraint(
                        kind=exp.CollateColumnConstraint(this=exp.Var(this=TEXT_COLLATION))))
                item.set("constraints", constraints)
            elif isinstance(item, exp.UniqueColumnConstraint) and isinstance(item.this, exp.Schema):
                item.this.set("this", None)   # SQLite's table-level UNIQUE takes no index name
            kept.append(item)
        schema.set("expressions", kept)
        for prefix in list(schema.find_all(exp.ColumnPrefix)):
            prefix.replace(prefix.this)       # key prefix lengths: `name`(255)
    create.set("properties", None)
    return create


def convert_statement(statement: str) -> list[str]:
    """The SQLite statements for one MySQL dump statement (none if it only sets up MySQL)."""
    if _EXECUTABLE_FIRST.match(statement) or leading_verb(statement) in SKIPPED_VERBS:
        return []
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = sqlglot.parse(statement, read="mysql")
    except SqlglotError as exc:
        raise SqlBackendError(f"cannot convert to SQLite: {_snippet(statement)}: {exc}") from None
    out = []
    for tree in trees:
        if tree is None:
            continue
        if isinstance(tree, exp.Create) and (tree.args.get("kind") or "").upper() == "TABLE":
            tree = _convert_create_table(tree)
        out.append(tree.sql(dialect="sqlite"))
    return out


def convert_statements(statements: list[str], where: str = "") -> list[str]:
    """A whole database's statements; errors name the database and the statement."""
    out = []
    for statement in statements:
        try:
            out.extend(convert_statement(statement))
        except SqlBackendError as exc:
            raise SqlBackendError(f"{where}: {exc}" if where else str(exc)) from None
    return out


@functools.lru_cache(maxsize=4096)   # golds repeat across episodes; sqlglot takes milliseconds
def mysql_query_to_sqlite(sql: str) -> str | None:
    """A MySQL query rewritten for SQLite, or None if sqlglot cannot parse it.

    Used for gold queries, which are written for MySQL: the rewrite keeps MySQL's
    meaning where SQLite differs (``/`` on integers, ``CONCAT``, backticks).
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql, read="mysql") if t is not None]
    except SqlglotError:
        return None
    if len(trees) != 1:
        return None
    try:
        return trees[0].sql(dialect="sqlite")
    except SqlglotError:
        return None


def load_sqlglot() -> None:
    """Import sqlglot and its MySQL and SQLite dialects (0.2 s and more), as a SQLite
    episode's first score needs them to rewrite its gold (the SQL language's ``warm``)."""
    mysql_query_to_sqlite("SELECT 1")


def _snippet(statement: str, width: int = 80) -> str:
    flat = " ".join(statement.split())
    return flat if len(flat) <= width else flat[:width] + "..."
