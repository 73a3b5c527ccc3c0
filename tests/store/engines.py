"""The store engines the store tests run on: every engine passes the same tests.

A test that takes the ``store`` fixture (``tests/store/conftest.py``) runs once per entry of
:data:`ENGINES`; :func:`open_store` makes a fresh, empty, migrated store of that engine.  An engine
that needs a service (PostgreSQL) fails its tests when the service cannot be had -- never a skip.

PostgreSQL: each store gets a database of its own (``t_<random>``), made through the server named by
``PARTNERS_TEST_PG_DSN`` (default: the local server as ``postgres``) and dropped when the store closes.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from gateway.store import Store
from gateway.store.sqlite import SqliteStore
from tests.extras import need_module

ENGINES: tuple[str, ...] = ("sqlite", "postgresql")
PG_ADMIN_DSN = os.environ.get("PARTNERS_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def create_database() -> str:
    """A new empty database on the test server; its DSN.  Fails (never skips) when the server is not there."""
    psycopg = need_module("psycopg")
    from psycopg.conninfo import make_conninfo

    name = f"t_{secrets.token_hex(6)}"
    try:
        async with await psycopg.AsyncConnection.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=10) as conn:
            await conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]  # a name made here
    except psycopg.OperationalError as error:
        pytest.fail(f"the PostgreSQL store tests need a server at PARTNERS_TEST_PG_DSN ({PG_ADMIN_DSN}): {error}"
                    " (`bash deploy/test.sh` sets one up)", pytrace=False)
    return make_conninfo(PG_ADMIN_DSN, dbname=name)


async def drop_database(dsn: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(dsn)["dbname"]
    async with await psycopg.AsyncConnection.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=10) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


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
