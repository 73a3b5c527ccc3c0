"""The store engines the store tests run on: every engine passes the same tests.

A test that takes the ``store`` fixture (``tests/store/conftest.py``) runs once per entry of
:data:`ENGINES`; :func:`open_store` makes a fresh, empty, migrated store of that engine.  An engine
that needs a service (PostgreSQL) fails its tests when the service cannot be had -- never a skip.

PostgreSQL: each store gets a database of its own (``t_<random>``), made through the server named by
``PARTNERS_TEST_PG_DSN`` (:mod:`tests.pg`) and dropped when the store closes.
"""

from __future__ import annotations

from pathlib import Path

from gateway.store import Store
from gateway.store.sqlite import SqliteStore
from tests.pg import create_database, drop_database

ENGINES: tuple[str, ...] = ("sqlite", "postgresql")
def _scratch_postgres_store(dsn: str):  # the class needs psycopg, imported only here
    from gateway.store.postgres.engine import PostgresStore

    class ScratchPostgresStore(PostgresStore):
        """A store on a database of its own, dropped when it closes."""

        async def close(self) -> None:
            await super().close()
            await drop_database(self.dsn)

    return ScratchPostgresStore(dsn)


async def open_store(engine: str, tmp_path: Path) -> Store:
    """A new empty store of ``engine``, opened (the caller closes it)."""
    if engine == "sqlite":
        store: Store = SqliteStore(tmp_path / "gateway.db")
    elif engine == "postgresql":
        store = _scratch_postgres_store(await create_database())
    else:
        raise ValueError(f"unknown store engine {engine!r}")
    await store.open()
    return store
