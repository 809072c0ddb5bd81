"""Opening the studio database: one SQLite engine per process, safe settings on every connection, migrations on start.

The app and a background training process share one file, so every connection runs in WAL mode with a busy
timeout, and every write transaction takes the write lock up front (BEGIN IMMEDIATE) and stays short."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlmodel import Session

from wmstudio.locations import user_home
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import is_whole

DB_ENV = "WMSTUDIO_DB"
BUSY_TIMEOUT_S = 10.0
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_MAGIC = b"SQLite format 3\x00"


def default_db_path() -> Path:
    """`WMSTUDIO_DB` when set, else `studio.db` in the user's wmstudio folder."""
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV]).expanduser()
    return user_home() / "studio.db"


def _json_text(value: Any) -> str:
    # Keep non-ASCII text readable in the file, so full-text search finds "café" as written.
    return json.dumps(value, ensure_ascii=False)


def _make_engine(path: Path, foreign_keys: bool = True, pool: type[sa.pool.Pool] | None = None) -> sa.Engine:
    """An engine whose connections are set up for sharing the file between processes."""
    engine = sa.create_engine(
        f"sqlite:///{path}",
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
        json_serializer=_json_text,
        poolclass=pool,
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun by the "begin" hook below
        with closing(dbapi_connection.cursor()) as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _switch_to_wal(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        # A deferred transaction that reads and then writes fails at once with "database is locked" when
        # another process wrote in between (the busy timeout does not apply); writers therefore lock first.
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _switch_to_wal(cursor: sqlite3.Cursor) -> None:
    """Put the file in WAL mode, waiting like the busy timeout does.

    Switching a new file to WAL needs an exclusive lock, and SQLite answers "database is locked" at once
    (without its busy wait) when two processes create the same file together; once in WAL this is a no-op."""
    deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(2 * pause, 0.05)


class Store:
    """The studio database at `path`: hands out read and write sessions from this process's engine.

    The engine is created lazily and again after a fork (or in a spawned worker that unpickled the Store),
    because SQLite connections must never cross process boundaries."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._engine: sa.Engine | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()  # Gradio calls in from several threads
        self.file_id: tuple[int, int] | None = None  # (device, inode) of the file when opened

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])

    @property
    def engine(self) -> sa.Engine:
        """This process's engine (created on first use, recreated in a forked child)."""
        with self._lock:
            if self._engine is None or self._pid != os.getpid():
                if self._engine is not None:
                    self._engine.dispose(close=False)  # the parent's connections stay the parent's
                self._engine = _make_engine(self.path)
                self._pid = os.getpid()
            return self._engine

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reading (a consistent snapshot until the block ends)."""
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session holding the write lock from its first statement; commits at the end, rolls back on error."""
        with Session(self.engine, expire_on_commit=False) as session:
            session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    @property
    def connected(self) -> bool:
        """Whether this process has an engine (and maybe connections) on the file now."""
        return self._engine is not None and self._pid == os.getpid()

    def close(self) -> None:
        """Close this process's pooled connections (the Store opens new ones if used again)."""
        with self._lock:
            if self._engine is not None and self._pid == os.getpid():
                self._engine.dispose()
            self._engine = None


_OPEN_STORES: dict[Path, Store] = {}
_OPEN_STORES_LOCK = threading.Lock()


def open_store(path: str | Path | None = None, upgrade: bool = True) -> Store:
    """Open (or create) the studio database and bring its schema up to date; `path` defaults to `default_db_path()`.

    InvalidInput when the path is a folder, is not a SQLite file, cannot be written, or was written by a newer
    wmstudio. Upgrading never drops data; an existing database is copied beside itself before it is changed.
    Opening the same file again in this process returns the same Store, so the process keeps one engine."""
    db_path = Path(path).expanduser() if path is not None else default_db_path()
    with _OPEN_STORES_LOCK:
        known = _OPEN_STORES.get(db_path.resolve())
    if known is not None and known.connected and known.file_id == _file_id(db_path):
        # checked and upgraded when first opened; reading the file again would close a descriptor of it, and closing
        # any descriptor drops every POSIX lock this process's SQLite connections hold on it (another process then
        # believes it is alone, deletes the WAL on exit, and our connections read a stale copy from then on)
        return known
    _check_path(db_path)
    if upgrade:
        try:
            upgrade_database(db_path)
        except sqlite3.DatabaseError as err:
            raise _database_problem(db_path, err) from None
        except sa.exc.DatabaseError as err:
            raise _database_problem(db_path, err.orig or err) from None
    file_id = _file_id(db_path)
    with _OPEN_STORES_LOCK:
        store = _OPEN_STORES.setdefault(db_path.resolve(), Store(db_path))
        if store.file_id != file_id:  # the file was replaced (deleted, restored): drop connections to the old one
            store.close()
            store.file_id = file_id
        return store


def _file_id(db_path: Path) -> tuple[int, int] | None:
    try:
        info = db_path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _check_path(db_path: Path) -> None:
    if db_path.is_dir():
        raise InvalidInput(Problem("db", f"{db_path} is a folder: give a file path such as {db_path / 'studio.db'}"))
    if db_path.exists() and db_path.stat().st_size > 0:
        with db_path.open("rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise InvalidInput(Problem("db", f"{db_path} is not a SQLite database: give another file path "
                                                 "(or move this file away and a new database is created)"))
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidInput(Problem("db", f"cannot create the folder {db_path.parent} ({err.strerror}): "
                                         "choose a writable place")) from None


def _database_problem(db_path: Path, err: BaseException) -> InvalidInput:
    message = str(err)
    if "unable to open" in message or "readonly" in message or "read-only" in message:
        fix = "check that the file and its folder are writable, or choose another path"
    elif "not a database" in message or "malformed" in message:
        fix = "the file is damaged or not a studio database: restore a backup or choose another path"
    else:
        fix = "the database could not be prepared; choose another path or restore a backup"
    return InvalidInput(Problem("db", f"{db_path}: {message}: {fix}"))


def alembic_config() -> Config:
    """Alembic configuration built in code (no alembic.ini is needed at run time)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest schema revision this wmstudio knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the store has no migrations"
    return head


def current_revision(db_path: str | Path) -> str | None:
    """The schema revision recorded in the database file (None for an empty or new file)."""
    engine = _make_engine(Path(db_path), pool=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def upgrade_database(db_path: str | Path, revision: str = "head") -> None:
    """Migrate the file to `revision` under the write lock, so two processes starting at once migrate once.

    Foreign keys are off while migrating: SQLite rebuilds a table to alter it, and the old table must be
    droppable without touching the rows that refer to it; they are checked before the migration commits."""
    db_path = Path(db_path)
    config = alembic_config()
    scripts = ScriptDirectory.from_config(config)
    target = scripts.get_current_head() if revision == "head" else revision
    if current_revision(db_path) == target:
        return
    known = {script.revision for script in scripts.walk_revisions()}
    engine = _make_engine(db_path, foreign_keys=False, pool=sa.pool.NullPool)
    try:
        with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as connection, connection.begin():
            current = MigrationContext.configure(connection).get_current_revision()  # again, under the lock
            if current == target:
                return
            if current is not None and current not in known:
                raise InvalidInput(Problem("db", f"{db_path} has schema revision {current}, written by a newer "
                                                 "wmstudio: upgrade wmstudio, or choose another database file"))
            if current is None:
                _refuse_foreign_database(db_path, connection)
            else:
                backup_database(db_path, _free_name(db_path.with_name(f"{db_path.name}.before-{target}.bak")))
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            dangling = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if dangling:  # raising rolls the whole migration back
                raise InvalidInput(Problem("db", f"{db_path}: migrating would leave {len(dangling)} rows pointing "
                                                 f"at missing rows (first: {tuple(dangling[0])}); nothing changed"))
    finally:
        engine.dispose()


def _free_name(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def _refuse_foreign_database(db_path: Path, connection: sa.Connection) -> None:
    """A file with tables but no migration record is someone else's database: never write into it."""
    rows = connection.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    names = [name for (name,) in rows if name != "alembic_version" and not name.startswith("sqlite_")]
    if names:
        shown = ", ".join(sorted(names)[:5])
        raise InvalidInput(Problem("db", f"{db_path} holds tables ({shown}) but is not a wmstudio database: "
                                         "choose another file path"))


def backup_database(db_path: str | Path, backup_path: str | Path) -> Path:
    """Copy a live database consistently (SQLite's online backup), e.g. before a migration changes it."""
    backup_path = Path(backup_path)
    with closing(sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S)) as source, \
            closing(sqlite3.connect(backup_path)) as target:
        source.backup(target)
    return backup_path


def fetch_row(session: Session, table: type[Any], row_id: int, field: str) -> Any:
    """The row of `table` with this id; InvalidInput naming `field` when there is none."""
    if not is_whole(row_id):
        raise InvalidInput(Problem(field, f"must be a whole-number id, got {row_id!r}"))
    row = session.get(table, row_id) if -2**63 <= row_id < 2**63 else None  # beyond SQLite's integers: none
    if row is None:
        raise InvalidInput(Problem(field, f"no {table.__tablename__.replace('_', ' ')} with id {row_id}: "
                                          "pick one that exists (it may have been deleted or be in another database)"))
    return row
