"""A fresh PostgreSQL database per test, on the server on loopback (CI has one running).

``PARTNERS_TEST_PG_DSN`` names the server (default: user postgres on 127.0.0.1:5432, trust auth);
a server that cannot be reached fails the test with what to do -- never a skip.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

SERVER_DSN = os.environ.get("PARTNERS_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def dsn_for(database: str) -> str:
    base, _, _ = SERVER_DSN.rpartition("/")
    return f"{base}/{database}"


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """Create an empty database, yield its DSN, drop it afterwards (with any connection still on it)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    try:
        admin = await psycopg.AsyncConnection.connect(SERVER_DSN, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        pytest.fail(f"PostgreSQL at {SERVER_DSN} cannot be reached ({error}); start it or set PARTNERS_TEST_PG_DSN")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield dsn_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
