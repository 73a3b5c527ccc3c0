"""The PostgreSQL store: a pool of connections, the migrations, and the core rows.

Why each method is one statement (or a few under a row or advisory lock) rather than read, decide,
write: N gateway nodes run them at once against one database.  Claims are ``UPDATE ... RETURNING``
(what comes back is what *this* call took), upserts carry their condition in ``ON CONFLICT ... WHERE``
(``notice_due``), and due work is taken ``FOR UPDATE SKIP LOCKED`` (``fire_due_reminders``), so two
nodes never both take the same row.  ``pairing_request`` counts before it inserts, so it holds a
transaction-scoped advisory lock per account for that moment.

Every operation runs through :meth:`PostgresStore._tx`, one transaction on a pooled connection; a
deadlock or serialization failure is retried, and a failure of the database itself (connection
lost, disk full) is recorded in :attr:`PostgresStore.health` as the SQLite store does.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.core.messages import Address, InboundMessage, MessageId, OutboundReply
from gateway.store import (
    InboundState,
    InboxItem,
    OutboxItem,
    PairingRequest,
    QueueDepths,
    Reminder,
    ReplyState,
    Takeover,
    blob_keys,
    without_files,
)
from gateway.store.health import StoreHealth
from gateway.store.postgres.accounts import PgAccountRows
from gateway.store.postgres.activity import PgActivityRows
from gateway.store.postgres.console import PgConsoleRows
from gateway.store.postgres.migrations import MIGRATION_LOCK, MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_NAME
from gateway.store.postgres.tokens import PgApiTokenRows
from gateway.store.postgres.transcripts import PgTranscriptRows
from gateway.store.schema import StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

log = logging.getLogger(__name__)
T = TypeVar("T")
PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: codes are read aloud and typed
RETRIES = 5
"""How often a transaction that lost a deadlock or a serialization race is run again."""
CONNECT_TIMEOUT_S = 10
PROBE_BYTES = 65_536
"""What a probe writes: more than a long answer's outbox row (as the SQLite store's probe)."""


_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _jsonb(json_text: str) -> str:
    """A reply's JSON as ``jsonb`` takes it: a NUL character (which ``jsonb`` cannot hold, and no platform
    shows) becomes U+FFFD.  Inbound messages are kept as text instead, exactly as they came."""
    return _JSON_NUL.sub(lambda m: m.group(1) + "\\ufffd", json_text)


def _pairing_code() -> str:
    return "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(8))


class PostgresStoreError(StoreError):
    """The database cannot be used (unreachable, refused, newer schema): one line, what and the fix.

    A :class:`StoreError`, so the command line prints it as one line as it does a damaged SQLite file."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__("postgresql", f"store {problem}", fix, damaged=False)


def is_pg_failure(error: BaseException) -> bool:
    """True for the database failing (connection lost, disk full, pool exhausted), not a rejected statement."""
    import psycopg
    from psycopg import errors

    # Read-only: the server became a standby (a failover) or was set so; every write fails alike.
    return isinstance(error, psycopg.OperationalError | errors.ReadOnlySqlTransaction)


def _retryable(error: BaseException) -> bool:
    from psycopg import errors

    return isinstance(error, errors.DeadlockDetected | errors.SerializationFailure)


class PostgresStore(PgConsoleRows, PgTranscriptRows, PgActivityRows, PgAccountRows, PgApiTokenRows):
    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self._pool: AsyncConnectionPool | None = None
        self.health = StoreHealth()
        """Whether writes work; read by ``/healthz``, ``/status`` and the gateway's resume after a failure."""

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._pool is not None:
            return
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as error:
            raise PostgresStoreError(f"cannot be reached: {_one_line(error)}",
                                     "check store: in partners.yaml, that the server runs, and PGPASSWORD") from None
        try:
            await migrate(conn)
        finally:
            await conn.close()
        pool = AsyncConnectionPool(self.dsn, min_size=self.min_size, max_size=self.max_size, open=False,
                                   kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S})
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 3)
        self._pool = pool

    async def close(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        await pool.close()

    async def _tx(self, op: Callable[[AsyncConnection], Awaitable[T]], *, proves_room: bool = False) -> T:
        """Run ``op`` in one transaction on a pooled connection; retry lost deadlocks, record failures."""
        if self._pool is None:
            raise RuntimeError("store is not open")
        for attempt in range(RETRIES):
            try:
                async with self._pool.connection() as conn, conn.transaction():
                    result = await op(conn)
            except Exception as error:
                if _retryable(error) and attempt + 1 < RETRIES:
                    continue
                if is_pg_failure(error):
                    log.warning("store transaction failed error=%s", _one_line(error))
                    self.health.failed(error)
                raise
            self.health.wrote(proves_room=proves_room)
            return result
        raise AssertionError("unreachable")

    async def probe_write(self) -> None:
        """Commit a write that needs new room (:data:`PROBE_BYTES`, added and removed); raises while writes fail."""

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO cursors (channel, account, name, value) VALUES ('gateway', 'store', 'write-probe',"
                " repeat(md5(random()::text), %s))"
                " ON CONFLICT (channel, account, name) DO UPDATE SET value = excluded.value",
                (PROBE_BYTES // 32,),
            )
            await conn.execute("DELETE FROM cursors WHERE channel = 'gateway' AND account = 'store' AND name = 'write-probe'")

        await self._tx(op, proves_room=True)

    # ------------------------------------------------------------------ inbound

    async def accept(self, messages: Sequence[InboundMessage], retention_s: float) -> list[bool]:
        now = time.time()
        first: dict[tuple[str, str, str], int] = {}
        for i, m in enumerate(messages):
            first.setdefault(m.dedup_key, i)
        batch = [messages[i] for i in sorted(first.values())]
        columns = (
            [m.address.channel for m in batch], [m.address.account for m in batch], [m.event_id for m in batch],
            [m.address.conversation_key for m in batch], [m.sender.user for m in batch],
            [m.model_dump_json() for m in batch],
        )

        async def op(conn: AsyncConnection) -> set[tuple[str, str, str]]:
            cursor = await conn.execute(
                "INSERT INTO inbound (channel, account, event_id, conversation, sender, payload, state, received_at, keep_until)"
                " SELECT c, a, e, v, s, p, %s, %s, %s"
                " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY"
                " AS m (c, a, e, v, s, p, n) ORDER BY n"
                " ON CONFLICT (channel, account, event_id) DO NOTHING RETURNING channel, account, event_id",
                (InboundState.PENDING.value, now, now + retention_s, *columns),
            )
            return {(c, a, e) for c, a, e in await cursor.fetchall()}

        stored = await self._tx(op) if batch else set()
        return [first[m.dedup_key] == i and m.dedup_key in stored for i, m in enumerate(messages)]

    @staticmethod
    def _inbox(rows: Sequence[tuple[Any, ...]], state: InboundState | None = None) -> list[InboxItem]:
        ordered = sorted(rows, key=lambda row: row[0])
        return [InboxItem(row[0], InboundMessage.model_validate_json(row[1]), state or InboundState(row[2])) for row in ordered]

    async def open_inbound(self) -> list[InboxItem]:
        async def op(conn: AsyncConnection) -> list[InboxItem]:
            cursor = await conn.execute("SELECT seq, payload, state FROM inbound WHERE state = %s ORDER BY seq",
                                        (InboundState.PENDING.value,))
            return self._inbox(await cursor.fetchall())

        return await self._tx(op)

    async def mark_inbound(self, keys: Sequence[tuple[str, str, str]], state: InboundState, reason: str = "") -> None:
        async def op(conn: AsyncConnection) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "UPDATE inbound SET state = %s, reason = %s WHERE channel = %s AND account = %s AND event_id = %s",
                    [(state.value, reason, *key) for key in keys],
                )

        if keys:
            await self._tx(op)

    async def record_media(self, message: InboundMessage) -> None:
        payload = message.model_dump_json()

        async def op(conn: AsyncConnection) -> None:
            await conn.execute("UPDATE inbound SET payload = %s WHERE channel = %s AND account = %s AND event_id = %s",
                               (payload, *message.dedup_key))

        await self._tx(op)

    async def blobs_in_use(self, received_before: float) -> set[str]:
        async def op(conn: AsyncConnection) -> set[str]:
            cursor = await conn.execute(
                "SELECT payload FROM inbound WHERE payload LIKE '%%\"blob\":\"%%'"
                " AND (state IN (%s, %s) OR received_at >= %s)",
                (InboundState.PENDING.value, InboundState.HELD.value, received_before),
            )
            return {key for (payload,) in await cursor.fetchall() for key in blob_keys(InboundMessage.model_validate_json(payload))}

        return await self._tx(op)

    async def erase_sender_files(self, channel: str, account: str, user: str, note: str) -> set[str]:
        async def op(conn: AsyncConnection) -> set[str]:
            cursor = await conn.execute(
                "SELECT seq, payload FROM inbound WHERE channel = %s AND account = %s AND sender = %s FOR UPDATE",
                (channel, account, user),
            )
            erased: set[str] = set()
            for seq, payload in await cursor.fetchall():
                message = InboundMessage.model_validate_json(payload)
                stripped = without_files(message, note)
                if stripped == message:
                    continue
                erased |= blob_keys(message)
                await conn.execute("UPDATE inbound SET payload = %s WHERE seq = %s", (stripped.model_dump_json(), seq))
            return erased

        return await self._tx(op)

    async def release_held(self, channel: str, account: str, user: str) -> list[InboxItem]:
        async def op(conn: AsyncConnection) -> list[InboxItem]:
            cursor = await conn.execute(
                "UPDATE inbound SET state = %s, reason = '' WHERE channel = %s AND account = %s AND sender = %s AND state = %s"
                " RETURNING seq, payload",
                (InboundState.PENDING.value, channel, account, user, InboundState.HELD.value),
            )
            return self._inbox(await cursor.fetchall(), InboundState.PENDING)

        return await self._tx(op)

    async def release_approved(self) -> list[InboxItem]:
        """Release held messages of every sender approved since (by the CLI, possibly another node)."""

        async def op(conn: AsyncConnection) -> list[InboxItem]:
            cursor = await conn.execute(
                "UPDATE inbound i SET state = %s, reason = '' FROM approved_senders a"
                " WHERE a.channel = i.channel AND a.account = i.account AND a.sender = i.sender AND i.state = %s"
                " RETURNING i.seq, i.payload",
                (InboundState.PENDING.value, InboundState.HELD.value),
            )
            return self._inbox(await cursor.fetchall(), InboundState.PENDING)

        return await self._tx(op)

    async def drop_expired_holds(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s

        async def op(conn: AsyncConnection) -> int:
            cursor = await conn.execute(
                "UPDATE inbound SET state = %s, reason = 'pairing expired' WHERE state = %s AND received_at < %s",
                (InboundState.DROPPED.value, InboundState.HELD.value, cutoff),
            )
            return cursor.rowcount

        return await self._tx(op)

    # ------------------------------------------------------------------ outbox

    _OUTBOX_COLUMNS = "payload::text, state, preview, preview_unconfirmed, parts_sent, sent::text, attempts, last_error"

    @staticmethod
    def _outbox_item(row: Sequence[Any], reply: OutboundReply | None = None) -> OutboxItem:
        import json

        payload, state, preview, unconfirmed, parts_sent, sent, attempts, last_error = row
        return OutboxItem(
            reply=reply or OutboundReply.model_validate_json(payload),
            state=ReplyState(state),
            preview=preview or None,
            preview_unconfirmed=bool(unconfirmed),
            parts_sent=parts_sent,
            sent=tuple(MessageId(m) for m in json.loads(sent)),
            attempts=attempts,
            last_error=last_error,
        )

    async def put_reply(
        self, reply: OutboundReply, state: ReplyState, answered: Sequence[tuple[str, str, str]] = ()
    ) -> OutboxItem:
        now = time.time()
        payload = _jsonb(reply.model_dump_json())
        target = reply.target

        async def op(conn: AsyncConnection) -> OutboxItem:
            cursor = await conn.execute(
                "INSERT INTO outbox (key, channel, account, conversation, payload, state, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET payload = excluded.payload, state = excluded.state, updated_at = excluded.updated_at"
                f" RETURNING {self._OUTBOX_COLUMNS}",
                (reply.idempotency_key, target.channel, target.account, target.conversation_key, payload, state.value, now, now),
            )
            row = await cursor.fetchone()
            if answered:
                async with conn.cursor() as marks:
                    await marks.executemany(
                        "UPDATE inbound SET state = %s WHERE channel = %s AND account = %s AND event_id = %s",
                        [(InboundState.ANSWERED.value, *key) for key in answered],
                    )
            assert row is not None  # an upsert always returns its row
            return self._outbox_item(row, reply)

        return await self._tx(op)

    async def begin_preview(self, reply: OutboundReply) -> None:
        now = time.time()
        target = reply.target

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO outbox (key, channel, account, conversation, payload, state, preview_unconfirmed, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s::jsonb, %s, true, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET preview_unconfirmed = true, updated_at = excluded.updated_at",
                (reply.idempotency_key, target.channel, target.account, target.conversation_key, _jsonb(reply.model_dump_json()),
                 ReplyState.STREAMING.value, now, now),
            )

        await self._tx(op)

    async def get_reply(self, key: str) -> OutboxItem | None:
        async def op(conn: AsyncConnection) -> OutboxItem | None:
            row = await (await conn.execute(f"SELECT {self._OUTBOX_COLUMNS} FROM outbox WHERE key = %s", (key,))).fetchone()
            return self._outbox_item(row) if row else None

        return await self._tx(op)

    async def record_preview(self, key: str, handle: str) -> None:
        async def op(conn: AsyncConnection) -> None:
            await conn.execute("UPDATE outbox SET preview = %s, preview_unconfirmed = false, updated_at = %s WHERE key = %s",
                               (handle, time.time(), key))

        await self._tx(op)

    async def record_part(self, key: str, parts_sent: int, message: MessageId | None, *, delivered: bool = False) -> None:
        async def op(conn: AsyncConnection) -> None:
            cursor = await conn.execute(
                "UPDATE outbox SET parts_sent = %s,"
                " sent = CASE WHEN %s::text IS NULL THEN sent ELSE sent || jsonb_build_array(%s::text) END,"
                " state = CASE WHEN %s THEN %s ELSE state END, updated_at = %s WHERE key = %s RETURNING 1",
                (parts_sent, message, message, delivered, ReplyState.DELIVERED.value, time.time(), key),
            )
            if await cursor.fetchone() is None:  # as the SQLite store: progress of a reply never written is a bug
                raise TypeError(f"no reply {key!r} to record a part of")

        await self._tx(op)

    async def parts_answering(self, conversation: str, message: MessageId, *, besides: str) -> int:
        async def op(conn: AsyncConnection) -> int:
            row = await (await conn.execute(
                "SELECT COALESCE(SUM(parts_sent), 0) FROM outbox WHERE conversation = %s AND key <> %s"
                " AND payload -> 'referrer' ->> 'message' = %s",
                (conversation, besides, message),
            )).fetchone()
            return int(row[0]) if row else 0

        return await self._tx(op)

    async def record_attempt(self, key: str, error: str) -> int:
        async def op(conn: AsyncConnection) -> int:
            row = await (await conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s, updated_at = %s WHERE key = %s RETURNING attempts",
                (error[:500], time.time(), key),
            )).fetchone()
            return int(row[0]) if row else 0

        return await self._tx(op)

    async def finish_reply(self, key: str, state: ReplyState, error: str | None = None) -> None:
        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "UPDATE outbox SET state = %s, last_error = COALESCE(%s, last_error), updated_at = %s WHERE key = %s",
                (state.value, error[:500] if error else None, time.time(), key),
            )

        await self._tx(op)

    async def open_replies(self) -> list[OutboxItem]:
        async def op(conn: AsyncConnection) -> list[OutboxItem]:
            cursor = await conn.execute(
                f"SELECT {self._OUTBOX_COLUMNS} FROM outbox WHERE state IN (%s, %s) ORDER BY created_at, key",
                (ReplyState.READY.value, ReplyState.STREAMING.value),
            )
            return [self._outbox_item(row) for row in await cursor.fetchall()]

        return await self._tx(op)

    # ------------------------------------------------------------------ cursors

    async def get_cursor(self, channel: str, account: str, name: str) -> str | None:
        async def op(conn: AsyncConnection) -> str | None:
            row = await (await conn.execute(
                "SELECT value FROM cursors WHERE channel = %s AND account = %s AND name = %s", (channel, account, name)
            )).fetchone()
            return row[0] if row else None

        return await self._tx(op)

    async def put_cursor(self, channel: str, account: str, name: str, value: str, *, keep_s: float | None = None) -> None:
        keep_until = None if keep_s is None else time.time() + keep_s

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO cursors (channel, account, name, value, keep_until) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (channel, account, name) DO UPDATE SET value = excluded.value, keep_until = excluded.keep_until",
                (channel, account, name, value, keep_until),
            )

        await self._tx(op)

    # ------------------------------------------------------------------ access

    async def is_approved(self, channel: str, account: str, user: str) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute(
                "SELECT 1 FROM approved_senders WHERE channel = %s AND account = %s AND sender = %s", (channel, account, user)
            )
            return await cursor.fetchone() is not None

        return await self._tx(op)

    async def pairing_request(
        self, channel: str, account: str, user: str, display_name: str, ttl_s: float, max_pending: int,
        *, source: str = "", max_account: int | None = None,
    ) -> PairingRequest | None:
        now = time.time()

        async def op(conn: AsyncConnection) -> PairingRequest | None:
            # Counting, then inserting: one node at a time per account, or two could both take the last place.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pairing'), hashtext(%s))", (f"{channel}\n{account}",))
            await conn.execute("DELETE FROM pairing WHERE expires_at < %s", (now,))
            row = await (await conn.execute(
                "SELECT code, created_at, expires_at FROM pairing WHERE channel = %s AND account = %s AND sender = %s",
                (channel, account, user),
            )).fetchone()
            if row:
                return PairingRequest(channel, account, row[0], user, display_name, row[1], row[2])
            counted = await (await conn.execute(
                "SELECT COUNT(*) FILTER (WHERE source = %s), COUNT(*) FROM pairing WHERE channel = %s AND account = %s",
                (source, channel, account),
            )).fetchone()
            pending, total = counted if counted else (0, 0)
            if pending >= max_pending or (max_account is not None and total >= max_account):
                return None
            code = _pairing_code()
            await conn.execute(
                "INSERT INTO pairing (code, channel, account, sender, display_name, source, created_at, expires_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (code, channel, account, user, display_name, source, now, now + ttl_s),
            )
            return PairingRequest(channel, account, code, user, display_name, now, now + ttl_s)

        return await self._tx(op)

    async def pairing_list(self) -> list[PairingRequest]:
        now = time.time()

        async def op(conn: AsyncConnection) -> list[PairingRequest]:
            cursor = await conn.execute(
                "SELECT channel, account, code, sender, display_name, created_at, expires_at FROM pairing"
                " WHERE expires_at >= %s ORDER BY created_at",
                (now,),
            )
            return [PairingRequest(*row) for row in await cursor.fetchall()]

        return await self._tx(op)

    async def pairing_resolve(self, code: str, approve: bool) -> PairingRequest | None:
        now = time.time()
        code = code.strip().upper()

        async def op(conn: AsyncConnection) -> PairingRequest | None:
            row = await (await conn.execute(
                "DELETE FROM pairing WHERE code = %s AND expires_at >= %s"
                " RETURNING channel, account, code, sender, display_name, created_at, expires_at",
                (code, now),
            )).fetchone()
            if row is None:  # unknown, expired, or another node resolved it first
                return None
            request = PairingRequest(*row)
            if approve:
                await conn.execute(
                    "INSERT INTO approved_senders (channel, account, sender, approved_at) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (channel, account, sender) DO NOTHING",
                    (request.channel, request.account, request.user, now),
                )
            else:
                await conn.execute(
                    "UPDATE inbound SET state = %s, reason = 'pairing denied'"
                    " WHERE channel = %s AND account = %s AND sender = %s AND state = %s",
                    (InboundState.DROPPED.value, request.channel, request.account, request.user, InboundState.HELD.value),
                )
            return request

        return await self._tx(op)

    async def notice_due(self, channel: str, account: str, user: str, min_interval_s: float) -> bool:
        now = time.time()

        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute(
                "INSERT INTO notices (channel, account, sender, last_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (channel, account, sender) DO UPDATE SET last_at = excluded.last_at"
                " WHERE excluded.last_at - notices.last_at >= %s RETURNING 1",
                (channel, account, user, now, min_interval_s),
            )
            return await cursor.fetchone() is not None

        return await self._tx(op)

    # ------------------------------------------------------------------ reminders

    async def add_reminder(self, reminder: Reminder) -> None:
        target = reminder.target

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO reminders (id, channel, account, target, text, due_at, state, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, 'scheduled', %s) ON CONFLICT (id) DO NOTHING",
                (reminder.id, target.channel, target.account, target.model_dump_json(), reminder.text, reminder.due_at, time.time()),
            )

        await self._tx(op)

    async def last_inbound_at(self, conversation_key: str) -> float | None:
        async def op(conn: AsyncConnection) -> float | None:
            row = await (await conn.execute("SELECT MAX(received_at) FROM inbound WHERE conversation = %s",
                                            (conversation_key,))).fetchone()
            return row[0] if row else None

        return await self._tx(op)

    async def fire_due_reminders(self, now: float, key_of: Callable[[str], str]) -> list[OutboxItem]:
        async def op(conn: AsyncConnection) -> list[OutboxItem]:
            cursor = await conn.execute(
                "UPDATE reminders SET state = 'fired' WHERE id IN (SELECT id FROM reminders"
                " WHERE state = 'scheduled' AND due_at <= %s ORDER BY due_at FOR UPDATE SKIP LOCKED)"
                " RETURNING id, target, text, due_at",
                (now,),
            )
            items = []
            for reminder_id, target_json, text, _due in sorted(await cursor.fetchall(), key=lambda row: (row[3], row[0])):
                target = Address.model_validate_json(target_json)
                reply = OutboundReply(idempotency_key=key_of(reminder_id), target=target, markdown=text)
                await conn.execute(
                    "INSERT INTO outbox (key, channel, account, conversation, payload, state, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                    (reply.idempotency_key, target.channel, target.account, target.conversation_key,
                     _jsonb(reply.model_dump_json()), ReplyState.READY.value, now, now),
                )
                items.append(OutboxItem(reply, ReplyState.READY, None, False, 0, (), 0, None))
            return items

        return await self._tx(op)

    # ------------------------------------------------------------------ takeovers

    _TAKEOVER_COLUMNS = "code, partner, target, reason, started_at, locale"

    @staticmethod
    def _takeover(row: Sequence[Any] | None) -> Takeover | None:
        if row is None:
            return None
        code, partner, target, reason, started_at, locale = row
        return Takeover(code, partner, Address.model_validate_json(target), reason, started_at, locale)

    async def start_takeover(self, partner: str, target: Address, reason: str, locale: str = "") -> Takeover:
        async def op(conn: AsyncConnection) -> Takeover:
            await conn.execute(
                "INSERT INTO takeovers (code, conversation, partner, target, reason, started_at, locale)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (conversation) DO NOTHING",
                (_pairing_code()[:6], target.conversation_key, partner, target.model_dump_json(), reason, time.time(), locale),
            )
            # A new statement: it sees the row a racing node committed, which the insert above gave way to.
            row = await (await conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE conversation = %s",
                                            (target.conversation_key,))).fetchone()
            takeover = self._takeover(row)
            assert takeover is not None
            return takeover

        return await self._tx(op)

    async def takeover_of(self, conversation_key: str) -> Takeover | None:
        async def op(conn: AsyncConnection) -> Takeover | None:
            cursor = await conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE conversation = %s", (conversation_key,))
            return self._takeover(await cursor.fetchone())

        return await self._tx(op)

    async def takeover_by_code(self, code: str) -> Takeover | None:
        async def op(conn: AsyncConnection) -> Takeover | None:
            cursor = await conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE code = %s", (code.strip().upper(),))
            return self._takeover(await cursor.fetchone())

        return await self._tx(op)

    async def end_takeover(self, code: str) -> Takeover | None:
        async def op(conn: AsyncConnection) -> Takeover | None:
            cursor = await conn.execute(f"DELETE FROM takeovers WHERE code = %s RETURNING {self._TAKEOVER_COLUMNS}",
                                        (code.strip().upper(),))
            return self._takeover(await cursor.fetchone())

        return await self._tx(op)

    async def takeovers(self) -> list[Takeover]:
        async def op(conn: AsyncConnection) -> list[Takeover]:
            cursor = await conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers ORDER BY started_at")
            return [t for t in map(self._takeover, await cursor.fetchall()) if t is not None]

        return await self._tx(op)

    # ------------------------------------------------------------------ housekeeping

    async def queue_depths(self) -> QueueDepths:
        async def op(conn: AsyncConnection) -> QueueDepths:
            async def grouped(sql: str, *args: Any) -> dict[str, int]:
                cursor = await conn.execute(sql, args)
                return {f"{c}:{a}": n for c, a, n in await cursor.fetchall()}

            inbound = "SELECT channel, account, COUNT(*) FROM inbound WHERE state = %s GROUP BY channel, account"
            return QueueDepths(
                inbound_pending=await grouped(inbound, InboundState.PENDING.value),
                inbound_held=await grouped(inbound, InboundState.HELD.value),
                outbox_open=await grouped(
                    "SELECT channel, account, COUNT(*) FROM outbox WHERE state IN (%s, %s) GROUP BY channel, account",
                    ReplyState.READY.value, ReplyState.STREAMING.value,
                ),
            )

        return await self._tx(op)

    async def prune(self, finished_replies_after_s: float = 7 * 24 * 3600.0) -> int:
        now = time.time()

        async def op(conn: AsyncConnection) -> int:
            removed = (await conn.execute(
                "DELETE FROM inbound WHERE keep_until < %s AND state IN (%s, %s)",
                (now, InboundState.ANSWERED.value, InboundState.DROPPED.value),
            )).rowcount
            removed += (await conn.execute(
                "DELETE FROM outbox WHERE state IN (%s, %s) AND updated_at < %s",
                (ReplyState.DELIVERED.value, ReplyState.FAILED.value, now - finished_replies_after_s),
            )).rowcount
            removed += (await conn.execute("DELETE FROM cursors WHERE keep_until < %s", (now,))).rowcount
            return (removed + await self._prune_console(conn, now) + await self._prune_activity(conn, now)
                    + await self._prune_tokens(conn, now))

        return await self._tx(op)


async def migrate(conn: AsyncConnection) -> int:
    """Run the pending migrations in one transaction under :data:`MIGRATION_LOCK`; return the version now.

    Two nodes starting together: the second waits on the lock, then finds the version already current."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        version = 0
        exists = await (await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")).fetchone()
        if exists and exists[0]:  # read first: a node on a current database writes nothing at start
            row = await (await conn.execute("SELECT version FROM schema_migrations WHERE name = %s", (SCHEMA_NAME,))).fetchone()
            version = int(row[0]) if row else 0
        if version == len(MIGRATIONS):
            return version
        await conn.execute(MIGRATIONS_TABLE)
        if version > len(MIGRATIONS):
            raise PostgresStoreError(f"is at schema version {version}, newer than this release's {len(MIGRATIONS)}",
                                     "run the newer release, or restore a backup")
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                await conn.execute(statement)  # shipped constants, not user input
        await conn.execute(
            "INSERT INTO schema_migrations (name, version) VALUES (%s, %s)"
            " ON CONFLICT (name) DO UPDATE SET version = excluded.version",
            (SCHEMA_NAME, len(MIGRATIONS)),
        )
        return len(MIGRATIONS)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__
