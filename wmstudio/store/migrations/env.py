"""Alembic environment for the studio database: runs revisions on the connection the store hands over.

Batch mode (copy-and-move) is on because SQLite can alter little in place; the full-text search tables that
a revision creates by hand are left out of comparisons with the SQLModel classes."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from wmstudio.store.tables import STORE_TABLES, include_object

target_metadata = STORE_TABLES[0].metadata


def run_migrations() -> None:
    """Use the store's connection (already inside its write transaction), or a URL when run by hand."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        url = context.config.get_main_option("sqlalchemy.url")
        engine = create_engine(url, poolclass=pool.NullPool)
        with engine.connect() as own_connection:
            _run(own_connection)
        return
    _run(connection)


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
