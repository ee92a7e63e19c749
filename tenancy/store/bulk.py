"""Bulk writes: many rows per statement, the rows going to the driver as plain tuples.

SQLAlchemy's executemany processes each row's parameters in Python (about 6 µs a row: 0.6 s of
a 100,000-port import, measured on SQLite); the driver takes plain tuples as they are. So a
statement is compiled once for the session's dialect and its rows go straight to the driver.
That skips SQLAlchemy's type processing too: only for values the drivers take unchanged
(str, int, bool, None, bytes), which is what the topology import and the digest state write.

Inserts on SQLite go as multi-row VALUES, a few hundred rows a statement: half the time of
executemany's statement per row (100k ports: 0.25 s instead of 0.5 s). On PostgreSQL that is
twice as slow as psycopg's pipelined executemany, whose cost is the server's foreign-key checks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Delete, Insert, Update, bindparam, insert
from sqlmodel import Session, SQLModel

# Rows per multi-row INSERT on SQLite (fewer if its bound-parameter limit asks for it).
ROWS_PER_INSERT = 500


def insert_rows(
    session: Session, model: type[SQLModel], columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """INSERT `rows` into `model`'s table, each with values for `columns` in that order."""
    if not rows:
        return
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        names = [f"new_{column}" for column in columns]  # SQLAlchemy reserves the columns' own
        statement = insert(model).values(dict(zip(columns, map(bindparam, names), strict=True)))
        execute_many(session, statement, names, rows)
        return
    quote = connection.dialect.identifier_preparer.quote
    table = quote(insert(model).table.name)
    head = f"INSERT INTO {table} ({', '.join(map(quote, columns))}) VALUES "
    values = "(" + ", ".join("?" * len(columns)) + ")"
    per = max(1, min(ROWS_PER_INSERT, _parameter_limit(connection) // len(columns)))
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        statement_text = head + ", ".join([values] * len(chunk))
        connection.exec_driver_sql(statement_text, tuple(chain.from_iterable(chunk)))


def _parameter_limit(connection: Connection) -> int:
    """SQLite's bound parameters per statement (999 before 3.32, 32766 after, as compiled)."""
    driver = connection.connection.driver_connection
    assert driver is not None  # a connection inside a transaction is open
    return int(driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))


def execute_many(
    session: Session,
    statement: Insert | Update | Delete,
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
) -> None:
    """Run `statement` once per row in the session's transaction (nothing for no rows).

    `names` are the statement's bind parameters (``bindparam(name)``), in the order of each
    row's values. Values go to the driver unprocessed: str, int, bool, None or bytes only.
    """
    if not rows:
        return
    connection = session.connection()
    compiled = statement.compile(dialect=connection.dialect)
    if compiled.positiontup is None:  # named style (psycopg's %(name)s)
        connection.exec_driver_sql(
            compiled.string, [dict(zip(names, row, strict=True)) for row in rows]
        )
        return
    order = [names.index(name) for name in compiled.positiontup]
    if order != list(range(len(names))):
        # The compiler places columns in the table's order; itemgetter reorders a row in C.
        rows = list(map(itemgetter(*order), rows))
    connection.exec_driver_sql(compiled.string, list(rows))
