"""A fresh PostgreSQL database per test, on the server on loopback (CI has one running; ``deploy/test.sh``
makes sure of it).

``PARTNERS_TEST_PG_DSN`` names the server (default: the local server as ``postgres``, trust auth); a
server that cannot be reached fails the test with what to do -- never a skip.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.extras import need_module

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
        pytest.fail(f"the PostgreSQL tests need a server at PARTNERS_TEST_PG_DSN ({PG_ADMIN_DSN}): {error}"
                    " (`bash deploy/test.sh` sets one up)", pytrace=False)
    return make_conninfo(PG_ADMIN_DSN, dbname=name)


async def drop_database(dsn: str) -> None:
    """Drop it, with any connection still on it."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(dsn)["dbname"]
    async with await psycopg.AsyncConnection.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=10) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """An empty database for the block; dropped after it."""
    dsn = await create_database()
    try:
        yield dsn
    finally:
        await drop_database(dsn)
