"""Every SQLite file the project keeps is opened and migrated here, and damage is described here.

Why one module: the connections are in autocommit (``isolation_level=None``), where
``with conn:`` opens no transaction and each ``CREATE TABLE`` commits alone.  A crash
(SIGKILL, power loss, a WAL cut short) between two statements of a migration left a
half-made schema whose next start failed with ``table inbound already exists``.  Here
all pending migrations of a file run in *one* ``BEGIN IMMEDIATE`` transaction together
with the row that records the new version, so a crash leaves the file before or after
them, never between; and the shipped scripts use ``IF NOT EXISTS``, so a file a
previous release left half-made is completed rather than refused.

Versions are kept per schema in the ``schema_versions`` table, not only in
``PRAGMA user_version``: two schemas may share a file (the session log and the usage
ledger live in ``brain.db``, the catalog and its FTS index in ``catalog.db``).  A schema
that owns its file also keeps ``user_version`` in step, which is what earlier releases read.

Failures become one :class:`StoreError` naming the file, what is wrong and the fix --
never a traceback: not a database, damaged, written by a newer release, disk full,
no permission.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.core.errors import GatewayError

MOVE_ASIDE = "stop the gateway, move the file aside (a new, empty one is made at the next start) or restore it from a backup"
VERSIONS_TABLE = "CREATE TABLE IF NOT EXISTS schema_versions (schema TEXT PRIMARY KEY, version INTEGER NOT NULL)"


@dataclass(frozen=True)
class Schema:
    """The migrations of one store, in order; never edit a shipped one, append a new one."""

    name: str
    """Its key in ``schema_versions`` and how messages name it ("gateway store")."""
    migrations: tuple[str, ...]
    """One SQL script per version."""
    fix: str = MOVE_ASIDE
    """What an operator does with a damaged file of this schema."""
    owns_file: bool = True
    """Keep ``PRAGMA user_version`` in step (and trust it for files written before ``schema_versions``)."""

    @property
    def version(self) -> int:
        return len(self.migrations)


class StoreError(GatewayError):
    """A store file that cannot be used: which file, what is wrong, and the fix, in one line."""

    def __init__(self, path: Path | str, problem: str, fix: str, *, damaged: bool = True) -> None:
        self.path, self.problem, self.fix, self.damaged = Path(path), problem, fix, damaged
        super().__init__(f"{path} {problem} (fix: {fix})")


def statements(script: str) -> Iterator[str]:
    """The statements of a script, one by one (a trigger's ``BEGIN ... END`` stays whole)."""
    start = 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start:end + 1]):
            statement = script[start:end + 1].strip().rstrip(";").strip()
            if statement:
                yield statement
            start = end + 1
    rest = script[start:].strip()
    if rest:
        yield rest


def version_of(conn: sqlite3.Connection, schema: Schema) -> int:
    """The schema's version in this file (0: never migrated)."""
    version = 0
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_versions'").fetchone():
        row = conn.execute("SELECT version FROM schema_versions WHERE schema = ?", (schema.name,)).fetchone()
        version = int(row[0]) if row else 0
    if schema.owns_file:
        version = max(version, int(conn.execute("PRAGMA user_version").fetchone()[0]))
    return version


def _newer(path: Path | str, schema: Schema, version: int) -> StoreError:
    return StoreError(path, f"has {schema.name} schema version {version}, newer than this release knows ({schema.version})",
                      "upgrade partners-gateway, or restore a backup made by this release")


def migrate(conn: sqlite3.Connection, schema: Schema, path: Path | str = "") -> int:
    """Bring the schema up to date in one transaction; return its version."""
    if version_of(conn, schema) == schema.version:
        return schema.version
    conn.execute("BEGIN IMMEDIATE")  # read again under the write lock: another process may have migrated
    try:
        version = version_of(conn, schema)
        if version > schema.version:
            raise _newer(path, schema, version)
        if version < schema.version:
            conn.execute(VERSIONS_TABLE)
            for script in schema.migrations[version:]:
                for statement in statements(script):
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_versions (schema, version) VALUES (?, ?)"
                         " ON CONFLICT (schema) DO UPDATE SET version = excluded.version", (schema.name, schema.version))
            if schema.owns_file:
                conn.execute(f"PRAGMA user_version = {schema.version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return schema.version


def describe(path: Path | str, error: sqlite3.Error, schema: Schema) -> StoreError:
    """The one-line form of an SQLite error met opening or using ``path``."""
    code = getattr(error, "sqlite_errorname", "")
    if code == "SQLITE_NOTADB":
        return StoreError(path, f"is not a readable {schema.name} (not an SQLite database, or an encrypted one)", schema.fix)
    if code.startswith("SQLITE_CORRUPT"):
        return StoreError(path, f"is damaged ({error})", schema.fix)
    if code == "SQLITE_FULL":
        return StoreError(path, "cannot be written: the disk is full", "free disk space", damaged=False)
    if code.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")):
        return StoreError(path, f"cannot be opened for writing ({error})",
                          "check that the data dir and its files belong to the user running the gateway", damaged=False)
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(path, "is locked by another process", "wait, or stop the other `partners` command", damaged=False)
    return StoreError(path, f"cannot be used ({error})", schema.fix)


def open_database(
    path: Path,
    schemas: Sequence[Schema],
    *,
    pragmas: Sequence[str] = ("journal_mode=WAL",),
    isolation_level: Literal["DEFERRED", "IMMEDIATE", "EXCLUSIVE"] | None = None,
    timeout: float = 5.0,
) -> sqlite3.Connection:
    """Connect, set ``pragmas``, migrate every schema; raise :class:`StoreError`, never a raw sqlite3 error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, isolation_level=isolation_level, check_same_thread=False, timeout=timeout)
    except sqlite3.Error as error:
        raise describe(path, error, schemas[0]) from None
    try:
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
        for schema in schemas:
            migrate(conn, schema, path)
    except sqlite3.Error as error:
        conn.close()
        raise describe(path, error, schemas[0]) from None
    except BaseException:
        conn.close()
        raise
    return conn


def check(path: Path, schemas: Sequence[Schema], *, thorough: bool = True) -> StoreError | None:
    """What is wrong with an existing store file, without changing its schema (None: nothing).

    ``thorough`` adds ``PRAGMA quick_check`` (reads every page; doctor does, serve's quick
    look before start does not)."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    except sqlite3.Error as error:
        return describe(path, error, schemas[0])
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # reads the header: "not a database" shows here
        for schema in schemas:
            version = version_of(conn, schema)
            if version > schema.version:
                return _newer(path, schema, version)
        if thorough:
            found = [row[0] for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if found != ["ok"]:
                return StoreError(path, f"fails its integrity check ({'; '.join(found)[:300]})", schemas[0].fix)
    except sqlite3.Error as error:
        return describe(path, error, schemas[0])
    finally:
        conn.close()
    return None
