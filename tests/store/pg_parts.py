"""A test-only PostgreSQL store of the parts alone (console rows, transcripts, activity, accounts, API tokens).

The parts (:mod:`gateway.store.postgres.console` and its siblings) need of a store only ``_tx``
(:class:`~gateway.store.postgres.rows.OnPool`); :class:`PgParts` gives them that over a two-connection
pool to a database of its own, made fresh per test (``CREATE DATABASE t_<random>``) and dropped after,
with the parts' DDL applied.  Two connections, so a ``gather`` of many calls really runs on two
sessions at once, as two gateway nodes would.  The inbox and outbox tables the transcripts read are
the core's; until the engine exists, :data:`CORE_STAND_IN` creates the columns they read, and
:meth:`PgParts.accept`/:meth:`PgParts.put_reply` write them the way the core does.

``PARTNERS_TEST_PG_DSN`` names the server (default: the loopback one, user ``postgres``); a server
that cannot be reached fails the test -- never a skip.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from gateway.core.messages import InboundMessage, OutboundReply
from gateway.store import InboundState, ReplyState
from gateway.store.postgres import accounts, activity, console, tokens, transcripts
from gateway.store.postgres.accounts import PgAccountRows
from gateway.store.postgres.activity import PgActivityRows
from gateway.store.postgres.console import PgConsoleRows
from gateway.store.postgres.tokens import PgApiTokenRows
from gateway.store.postgres.transcripts import PgTranscriptRows
from tests.extras import need_module

T = TypeVar("T")

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"

PARTS_DDL: tuple[str, ...] = (*console.DDL, *transcripts.DDL, *activity.DDL, *accounts.DDL, *tokens.DDL)

CORE_STAND_IN: tuple[str, ...] = (
    """CREATE TABLE inbound (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel text NOT NULL, account text NOT NULL, event_id text NOT NULL, conversation text NOT NULL,
        sender text NOT NULL, payload jsonb NOT NULL, state text NOT NULL,
        received_at double precision NOT NULL, keep_until double precision NOT NULL,
        UNIQUE (channel, account, event_id)
    )""",
    """CREATE TABLE outbox (
        idempotency_key text PRIMARY KEY, channel text NOT NULL, account text NOT NULL, conversation text NOT NULL,
        payload jsonb NOT NULL, state text NOT NULL, created_at double precision NOT NULL
    )""",
)
"""The core's inbox and outbox columns the transcripts read (test-only; the engine's migrations own them)."""


def server_dsn() -> str:
    return os.environ.get("PARTNERS_TEST_PG_DSN", DEFAULT_DSN)


class PgParts(PgConsoleRows, PgTranscriptRows, PgActivityRows, PgAccountRows, PgApiTokenRows):
    """The parts over a pool to a fresh database; :meth:`open` makes it, :meth:`close` drops it."""

    def __init__(self) -> None:
        self.database = f"t_{secrets.token_hex(6)}"
        self._pool: Any = None

    def _dsn(self, database: str) -> str:
        psycopg = need_module("psycopg")
        return psycopg.conninfo.make_conninfo(server_dsn(), dbname=database)

    async def _admin(self, statement: str) -> None:
        psycopg = need_module("psycopg")
        async with await psycopg.AsyncConnection.connect(server_dsn(), autocommit=True, connect_timeout=20) as conn:
            await conn.execute(statement)

    async def open(self) -> None:
        pool_module = need_module("psycopg_pool")
        await self._admin(f'CREATE DATABASE "{self.database}"')
        self._pool = pool_module.AsyncConnectionPool(self._dsn(self.database), min_size=2, max_size=2, open=False,
                                                     timeout=60)
        await self._pool.open(wait=True, timeout=60)

        async def migrate(conn: Any) -> None:
            for statement in (*CORE_STAND_IN, *PARTS_DDL):
                await conn.execute(statement)

        await self._tx(migrate)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        await self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    async def _tx(self, op: Callable[[Any], Awaitable[T]]) -> T:
        async with self._pool.connection() as conn, conn.transaction():
            return await op(conn)

    async def prune(self) -> int:
        """What the engine's ``prune`` adds of the parts."""
        now = time.time()

        async def op(conn: Any) -> int:
            return (await self._prune_console(conn, now) + await self._prune_activity(conn, now)
                    + await self._prune_tokens(conn, now))

        return await self._tx(op)

    async def accept(self, messages: Sequence[InboundMessage], retention_s: float) -> list[bool]:
        now = time.time()

        async def op(conn: Any) -> list[bool]:
            fresh = []
            for m in messages:
                cursor = await conn.execute(
                    "INSERT INTO inbound (channel, account, event_id, conversation, sender, payload, state, received_at,"
                    " keep_until) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s)"
                    " ON CONFLICT (channel, account, event_id) DO NOTHING RETURNING 1",
                    (m.address.channel, m.address.account, m.event_id, m.address.conversation_key, m.sender.user,
                     m.model_dump_json(), InboundState.PENDING.value, now, now + retention_s))
                fresh.append(await cursor.fetchone() is not None)
            return fresh

        return await self._tx(op)

    async def mark_inbound(self, keys: Sequence[tuple[str, str, str]], state: InboundState, reason: str = "") -> None:
        async def op(conn: Any) -> None:
            for key in keys:
                await conn.execute("UPDATE inbound SET state = %s WHERE channel = %s AND account = %s AND event_id = %s",
                                   (state.value, *key))

        await self._tx(op)

    async def put_reply(self, reply: OutboundReply, state: ReplyState) -> None:
        now = time.time()

        async def op(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO outbox (idempotency_key, channel, account, conversation, payload, state, created_at)"
                " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s)",
                (reply.idempotency_key, reply.target.channel, reply.target.account, reply.target.conversation_key,
                 reply.model_dump_json(), state.value, now))

        await self._tx(op)
