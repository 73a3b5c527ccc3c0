"""The embedded store: SQLite in WAL mode, driven by one writer thread with group commit.

Why a thread of our own rather than one call per statement through a pool:
every write here is small, and what costs is the commit (an fsync with
``synchronous=FULL``).  The thread drains all operations queued while the
previous commit ran and commits them together, so a burst of a thousand
inbound messages costs a handful of fsyncs, and each caller still resumes only
after *its* write is durable.  Each operation runs inside its own SAVEPOINT,
so one failing operation never takes the rest of its batch down with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

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
from gateway.store.accounts import AccountRows
from gateway.store.activity import ActivityRows
from gateway.store.console import ConsoleRows
from gateway.store.health import StoreHealth, is_store_failure
from gateway.store.migrations import GATEWAY_SCHEMA
from gateway.store.schema import open_database
from gateway.store.tokens import ApiTokenRows
from gateway.store.transcripts import TranscriptRows

log = logging.getLogger(__name__)
T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]
_STOP = object()
PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: codes are read aloud and typed


def _pairing_code() -> str:
    return "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(8))


class SqliteStore(ConsoleRows, TranscriptRows, ActivityRows, AccountRows, ApiTokenRows):
    def __init__(self, path: Path, *, synchronous: str = "FULL", max_batch: int = 512) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self.health = StoreHealth()
        """Whether writes work; read by ``/healthz``, ``/status`` and the gateway's resume after a failure."""

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._thread is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._writer, name=f"store:{self.path.name}", daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._open_error is not None:
            self._thread = None
            raise self._open_error

    async def close(self) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    def _connect(self) -> sqlite3.Connection:
        pragmas = ("journal_mode=WAL", f"synchronous={self.synchronous}", "busy_timeout=5000", "foreign_keys=ON")
        return open_database(self.path, (GATEWAY_SCHEMA,), pragmas=pragmas)

    def _writer(self) -> None:
        try:
            conn = self._connect()
        except BaseException as error:  # reported to open()'s caller
            self._open_error = error
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                first = self._queue.get()
                if first is _STOP:
                    return
                batch = [first]
                stop = False
                while len(batch) < self.max_batch:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                self._run_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[tuple[Op, asyncio.AbstractEventLoop, asyncio.Future]]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        changes = conn.total_changes
        try:
            conn.execute("BEGIN IMMEDIATE")
            for op, _loop, _future in batch:
                conn.execute("SAVEPOINT op")
                try:
                    outcomes.append((True, op(conn)))
                    conn.execute("RELEASE op")
                except Exception as error:
                    if not conn.in_transaction:  # SQLite rolled it all back (disk full, I/O): the batch fails with this
                        raise
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    outcomes.append((False, error))
            conn.execute("COMMIT")
        except Exception as error:  # the commit itself failed: nothing in the batch is durable
            log.exception("store batch failed batch=%d", len(batch))
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            outcomes = [(False, error)] * len(batch)
        failure = next((value for ok, value in outcomes if not ok and is_store_failure(value)), None)
        if failure is not None:
            self.health.failed(failure)
        elif conn.total_changes != changes:
            self.health.wrote(proves_room=any(op is _probe_room for op, _loop, _future in batch))
        for (ok, value), (_op, loop, future) in zip(outcomes, batch, strict=True):
            loop.call_soon_threadsafe(_settle, future, ok, value)

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        if self._thread is None:
            raise RuntimeError("store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((op, loop, future))
        return await future

    async def probe_write(self) -> None:
        """Commit a write that needs new room (:data:`PROBE_BYTES`, added and removed), to learn
        whether writes work again; raises while they do not.  Its success is the only write that
        ends a failure (see :mod:`gateway.store.health`)."""
        await self._run(_probe_room)

    # ------------------------------------------------------------------ inbound

    async def accept(self, messages: Sequence[InboundMessage], retention_s: float) -> list[bool]:
        now = time.time()
        rows = [
            (
                m.address.channel,
                m.address.account,
                m.event_id,
                m.address.conversation_key,
                m.sender.user,
                m.model_dump_json(),
                InboundState.PENDING.value,
                now,
                now + retention_s,
            )
            for m in messages
        ]

        def op(conn: sqlite3.Connection) -> list[bool]:
            fresh: list[bool] = []
            for row in rows:
                cursor = conn.execute(
                    "INSERT INTO inbound (channel, account, event_id, conversation, sender, payload, state, received_at, keep_until)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, account, event_id) DO NOTHING",
                    row,
                )
                fresh.append(cursor.rowcount == 1)
            return fresh

        return await self._run(op)

    async def open_inbound(self) -> list[InboxItem]:
        def op(conn: sqlite3.Connection) -> list[InboxItem]:
            rows = conn.execute(
                "SELECT seq, payload, state FROM inbound WHERE state = ? ORDER BY seq", (InboundState.PENDING.value,)
            ).fetchall()
            return [InboxItem(seq, InboundMessage.model_validate_json(payload), InboundState(state)) for seq, payload, state in rows]

        return await self._run(op)

    async def mark_inbound(self, keys: Sequence[tuple[str, str, str]], state: InboundState, reason: str = "") -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE inbound SET state = ?, reason = ? WHERE channel = ? AND account = ? AND event_id = ?",
                [(state.value, reason, *key) for key in keys],
            )

        await self._run(op)

    async def record_media(self, message: InboundMessage) -> None:
        payload = message.model_dump_json()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE inbound SET payload = ? WHERE channel = ? AND account = ? AND event_id = ?",
                         (payload, *message.dedup_key))

        await self._run(op)

    async def blobs_in_use(self, received_before: float) -> set[str]:
        def op(conn: sqlite3.Connection) -> set[str]:
            rows = conn.execute(
                "SELECT payload FROM inbound WHERE payload LIKE '%\"blob\":\"%' AND (state IN (?, ?) OR received_at >= ?)",
                (InboundState.PENDING.value, InboundState.HELD.value, received_before),
            ).fetchall()
            return {key for (payload,) in rows for key in blob_keys(InboundMessage.model_validate_json(payload))}

        return await self._run(op)

    async def erase_sender_files(self, channel: str, account: str, user: str, note: str) -> set[str]:
        def op(conn: sqlite3.Connection) -> set[str]:
            rows = conn.execute(
                "SELECT seq, payload FROM inbound WHERE channel = ? AND account = ? AND sender = ?"
                " AND (payload LIKE '%\"ref\":{%' OR payload LIKE '%\"blob\":\"%')",
                (channel, account, user),
            ).fetchall()
            erased: set[str] = set()
            for seq, payload in rows:
                message = InboundMessage.model_validate_json(payload)
                erased |= blob_keys(message)
                conn.execute("UPDATE inbound SET payload = ? WHERE seq = ?", (without_files(message, note).model_dump_json(), seq))
            return erased

        return await self._run(op)

    async def release_held(self, channel: str, account: str, user: str) -> list[InboxItem]:
        def op(conn: sqlite3.Connection) -> list[InboxItem]:
            rows = conn.execute(
                "UPDATE inbound SET state = ?, reason = '' WHERE channel = ? AND account = ? AND sender = ? AND state = ?"
                " RETURNING seq, payload",
                (InboundState.PENDING.value, channel, account, user, InboundState.HELD.value),
            ).fetchall()
            return _released(rows)

        return await self._run(op)

    async def release_approved(self) -> list[InboxItem]:
        """Release held messages of every sender approved since (by the CLI, possibly another process)."""

        def op(conn: sqlite3.Connection) -> list[InboxItem]:
            rows = conn.execute(
                "UPDATE inbound SET state = ?, reason = '' WHERE state = ? AND EXISTS (SELECT 1 FROM approved_senders a"
                " WHERE a.channel = inbound.channel AND a.account = inbound.account AND a.sender = inbound.sender)"
                " RETURNING seq, payload",
                (InboundState.PENDING.value, InboundState.HELD.value),
            ).fetchall()
            return _released(rows)

        return await self._run(op)

    async def drop_expired_holds(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s

        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE inbound SET state = ?, reason = 'pairing expired' WHERE state = ? AND received_at < ?",
                (InboundState.DROPPED.value, InboundState.HELD.value, cutoff),
            ).rowcount

        return await self._run(op)

    # ------------------------------------------------------------------ outbox

    async def put_reply(
        self, reply: OutboundReply, state: ReplyState, answered: Sequence[tuple[str, str, str]] = ()
    ) -> OutboxItem:
        now = time.time()
        payload = reply.model_dump_json()
        target = reply.target

        def op(conn: sqlite3.Connection) -> OutboxItem:
            conn.execute(
                "INSERT INTO outbox (key, channel, account, conversation, payload, state, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET payload = excluded.payload, state = excluded.state, updated_at = excluded.updated_at",
                (reply.idempotency_key, target.channel, target.account, target.conversation_key, payload, state.value,
                 now, now),
            )
            if answered:
                conn.executemany(
                    "UPDATE inbound SET state = ? WHERE channel = ? AND account = ? AND event_id = ?",
                    [(InboundState.ANSWERED.value, *key) for key in answered],
                )
            row = conn.execute(f"SELECT {self._OUTBOX_COLUMNS} FROM outbox WHERE key = ?", (reply.idempotency_key,)).fetchone()
            return self._outbox_item(row, reply)

        return await self._run(op)

    async def begin_preview(self, reply: OutboundReply) -> None:
        now = time.time()
        payload = reply.model_dump_json()
        target = reply.target

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO outbox (key, channel, account, conversation, payload, state, preview_unconfirmed, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET preview_unconfirmed = 1, updated_at = excluded.updated_at",
                (reply.idempotency_key, target.channel, target.account, target.conversation_key, payload, ReplyState.STREAMING.value,
                 now, now),
            )

        await self._run(op)

    @staticmethod
    def _outbox_item(row: tuple, reply: OutboundReply | None = None) -> OutboxItem:
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

    _OUTBOX_COLUMNS = "payload, state, preview, preview_unconfirmed, parts_sent, sent, attempts, last_error"

    async def get_reply(self, key: str) -> OutboxItem | None:
        def op(conn: sqlite3.Connection) -> OutboxItem | None:
            row = conn.execute(f"SELECT {self._OUTBOX_COLUMNS} FROM outbox WHERE key = ?", (key,)).fetchone()
            return self._outbox_item(row) if row else None

        return await self._run(op)

    async def record_preview(self, key: str, handle: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE outbox SET preview = ?, preview_unconfirmed = 0, updated_at = ? WHERE key = ?", (handle, time.time(), key)
            )

        await self._run(op)

    async def record_part(self, key: str, parts_sent: int, message: MessageId | None, *, delivered: bool = False) -> None:
        def op(conn: sqlite3.Connection) -> None:
            # One statement: the id joins the list as the row is written, so parts recorded at once all stay.
            row = conn.execute(
                "UPDATE outbox SET parts_sent = ?,"
                " sent = CASE WHEN ? IS NULL THEN sent ELSE json_insert(sent, '$[#]', ?) END,"
                " state = CASE WHEN ? THEN ? ELSE state END, updated_at = ? WHERE key = ? RETURNING key",
                (parts_sent, message, message, delivered, ReplyState.DELIVERED.value, time.time(), key),
            ).fetchone()
            if row is None:
                raise KeyError(f"no reply {key!r} in the outbox")

        await self._run(op)

    async def parts_answering(self, conversation: str, message: MessageId, *, besides: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COALESCE(SUM(parts_sent), 0) FROM outbox WHERE conversation = ? AND key != ?"
                " AND json_extract(payload, '$.referrer.message') = ?",
                (conversation, besides, message),
            ).fetchone()
            return int(row[0])

        return await self._run(op)

    async def record_attempt(self, key: str, error: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, updated_at = ? WHERE key = ? RETURNING attempts",
                (error[:500], time.time(), key),
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._run(op)

    async def finish_reply(self, key: str, state: ReplyState, error: str | None = None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE outbox SET state = ?, last_error = COALESCE(?, last_error), updated_at = ? WHERE key = ?",
                (state.value, error[:500] if error else None, time.time(), key),
            )

        await self._run(op)

    async def open_replies(self) -> list[OutboxItem]:
        def op(conn: sqlite3.Connection) -> list[OutboxItem]:
            rows = conn.execute(
                f"SELECT {self._OUTBOX_COLUMNS} FROM outbox WHERE state IN (?, ?) ORDER BY created_at",
                (ReplyState.READY.value, ReplyState.STREAMING.value),
            ).fetchall()
            return [self._outbox_item(row) for row in rows]

        return await self._run(op)

    # ------------------------------------------------------------------ cursors

    async def get_cursor(self, channel: str, account: str, name: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT value FROM cursors WHERE channel = ? AND account = ? AND name = ?", (channel, account, name)
            ).fetchone()
            return row[0] if row else None

        return await self._run(op)

    async def put_cursor(self, channel: str, account: str, name: str, value: str, *, keep_s: float | None = None) -> None:
        keep_until = None if keep_s is None else time.time() + keep_s

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO cursors (channel, account, name, value, keep_until) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (channel, account, name) DO UPDATE SET value = excluded.value, keep_until = excluded.keep_until",
                (channel, account, name, value, keep_until),
            )

        await self._run(op)

    # ------------------------------------------------------------------ access

    async def is_approved(self, channel: str, account: str, user: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "SELECT 1 FROM approved_senders WHERE channel = ? AND account = ? AND sender = ?", (channel, account, user)
                ).fetchone()
                is not None
            )

        return await self._run(op)

    async def pairing_request(
        self, channel: str, account: str, user: str, display_name: str, ttl_s: float, max_pending: int,
        *, source: str = "", max_account: int | None = None,
    ) -> PairingRequest | None:
        now = time.time()

        def op(conn: sqlite3.Connection) -> PairingRequest | None:
            conn.execute("DELETE FROM pairing WHERE expires_at < ?", (now,))
            # One statement decides and writes: the sender has no live code, and the limits have room.
            row = conn.execute(_PAIRING_INSERT, {
                "code": _pairing_code(), "channel": channel, "account": account, "sender": user, "name": display_name,
                "source": source, "now": now, "until": now + ttl_s, "max_pending": max_pending, "max_account": max_account,
            }).fetchone()
            if row is None:  # a live code of theirs (returned), or no room (None)
                row = conn.execute(
                    "SELECT code, created_at, expires_at FROM pairing WHERE channel = ? AND account = ? AND sender = ?"
                    " AND expires_at >= ?", (channel, account, user, now),
                ).fetchone()
            return PairingRequest(channel, account, row[0], user, display_name, row[1], row[2]) if row else None

        return await self._run(op)

    async def pairing_list(self) -> list[PairingRequest]:
        now = time.time()

        def op(conn: sqlite3.Connection) -> list[PairingRequest]:
            rows = conn.execute(
                "SELECT channel, account, code, sender, display_name, created_at, expires_at FROM pairing"
                " WHERE expires_at >= ? ORDER BY created_at",
                (now,),
            ).fetchall()
            return [PairingRequest(*row) for row in rows]

        return await self._run(op)

    async def pairing_resolve(self, code: str, approve: bool) -> PairingRequest | None:
        now = time.time()
        code = code.strip().upper()

        def op(conn: sqlite3.Connection) -> PairingRequest | None:
            row = conn.execute(  # taking the code is the delete: two resolves of one code, and only one finds it
                "DELETE FROM pairing WHERE code = ? AND expires_at >= ?"
                " RETURNING channel, account, code, sender, display_name, created_at, expires_at",
                (code, now),
            ).fetchone()
            if row is None:
                return None
            request = PairingRequest(*row)
            if approve:
                conn.execute(
                    "INSERT INTO approved_senders (channel, account, sender, approved_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (channel, account, sender) DO NOTHING",
                    (request.channel, request.account, request.user, now),
                )
            else:
                conn.execute(
                    "UPDATE inbound SET state = ?, reason = 'pairing denied'"
                    " WHERE channel = ? AND account = ? AND sender = ? AND state = ?",
                    (InboundState.DROPPED.value, request.channel, request.account, request.user, InboundState.HELD.value),
                )
            return request

        return await self._run(op)

    async def notice_due(self, channel: str, account: str, user: str, min_interval_s: float) -> bool:
        now = time.time()

        def op(conn: sqlite3.Connection) -> bool:
            # Written only when due (new, or the last one old enough): a row back means this caller may send it.
            row = conn.execute(
                "INSERT INTO notices (channel, account, sender, last_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (channel, account, sender) DO UPDATE SET last_at = excluded.last_at"
                " WHERE excluded.last_at - notices.last_at >= ? RETURNING last_at",
                (channel, account, user, now, min_interval_s),
            ).fetchone()
            return row is not None

        return await self._run(op)

    # ------------------------------------------------------------------ reminders

    async def add_reminder(self, reminder: Reminder) -> None:
        target = reminder.target

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO reminders (id, channel, account, target, text, due_at, state, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?) ON CONFLICT (id) DO NOTHING",
                (reminder.id, target.channel, target.account, target.model_dump_json(), reminder.text, reminder.due_at, time.time()),
            )

        await self._run(op)

    async def last_inbound_at(self, conversation_key: str) -> float | None:
        def op(conn: sqlite3.Connection) -> float | None:
            row = conn.execute("SELECT MAX(received_at) FROM inbound WHERE conversation = ?", (conversation_key,)).fetchone()
            return row[0] if row else None

        return await self._run(op)

    async def fire_due_reminders(self, now: float, key_of: Callable[[str], str]) -> list[OutboxItem]:
        def op(conn: sqlite3.Connection) -> list[OutboxItem]:
            # Marking them fired is what claims them: a second caller's update finds none of these left.
            rows = conn.execute(
                "UPDATE reminders SET state = 'fired' WHERE state = 'scheduled' AND due_at <= ? RETURNING id, target, text, due_at",
                (now,),
            ).fetchall()
            items = []
            for reminder_id, target_json, text, _due in sorted(rows, key=lambda r: (r[3], r[0])):
                target = Address.model_validate_json(target_json)
                reply = OutboundReply(idempotency_key=key_of(reminder_id), target=target, markdown=text)
                conn.execute(
                    "INSERT INTO outbox (key, channel, account, conversation, payload, state, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                    (reply.idempotency_key, target.channel, target.account, target.conversation_key, reply.model_dump_json(),
                     ReplyState.READY.value, now, now),
                )
                items.append(OutboxItem(reply, ReplyState.READY, None, False, 0, (), 0, None))
            return items

        return await self._run(op)

    # ------------------------------------------------------------------ takeovers

    _TAKEOVER_COLUMNS = "code, partner, target, reason, started_at, locale"

    @staticmethod
    def _takeover(row: tuple | None) -> Takeover | None:
        if row is None:
            return None
        code, partner, target, reason, started_at, locale = row
        return Takeover(code, partner, Address.model_validate_json(target), reason, started_at, locale)

    async def start_takeover(self, partner: str, target: Address, reason: str, locale: str = "") -> Takeover:
        def op(conn: sqlite3.Connection) -> Takeover:
            conn.execute(
                "INSERT INTO takeovers (code, conversation, partner, target, reason, started_at, locale)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation) DO NOTHING",
                (_pairing_code()[:6], target.conversation_key, partner, target.model_dump_json(), reason, time.time(), locale),
            )
            row = conn.execute(
                f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE conversation = ?", (target.conversation_key,)
            ).fetchone()
            return self._takeover(row)  # type: ignore[return-value]

        return await self._run(op)

    async def takeover_of(self, conversation_key: str) -> Takeover | None:
        def op(conn: sqlite3.Connection) -> Takeover | None:
            return self._takeover(
                conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE conversation = ?", (conversation_key,)).fetchone()
            )

        return await self._run(op)

    async def takeover_by_code(self, code: str) -> Takeover | None:
        def op(conn: sqlite3.Connection) -> Takeover | None:
            return self._takeover(
                conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers WHERE code = ?", (code.strip().upper(),)).fetchone()
            )

        return await self._run(op)

    async def end_takeover(self, code: str) -> Takeover | None:
        def op(conn: sqlite3.Connection) -> Takeover | None:
            return self._takeover(conn.execute(f"DELETE FROM takeovers WHERE code = ? RETURNING {self._TAKEOVER_COLUMNS}",
                                               (code.strip().upper(),)).fetchone())

        return await self._run(op)

    async def takeovers(self) -> list[Takeover]:
        def op(conn: sqlite3.Connection) -> list[Takeover]:
            rows = conn.execute(f"SELECT {self._TAKEOVER_COLUMNS} FROM takeovers ORDER BY started_at").fetchall()
            return [t for t in map(self._takeover, rows) if t is not None]

        return await self._run(op)

    # ------------------------------------------------------------------ housekeeping

    async def queue_depths(self) -> QueueDepths:
        def op(conn: sqlite3.Connection) -> QueueDepths:
            def grouped(sql: str, *args: Any) -> dict[str, int]:
                return {f"{c}:{a}": n for c, a, n in conn.execute(sql, args).fetchall()}

            inbound = "SELECT channel, account, COUNT(*) FROM inbound WHERE state = ? GROUP BY channel, account"
            return QueueDepths(
                inbound_pending=grouped(inbound, InboundState.PENDING.value),
                inbound_held=grouped(inbound, InboundState.HELD.value),
                outbox_open=grouped(
                    "SELECT channel, account, COUNT(*) FROM outbox WHERE state IN (?, ?) GROUP BY channel, account",
                    ReplyState.READY.value,
                    ReplyState.STREAMING.value,
                ),
            )

        return await self._run(op)

    async def prune(self, finished_replies_after_s: float = 7 * 24 * 3600.0) -> int:
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            removed = conn.execute(
                "DELETE FROM inbound WHERE keep_until < ? AND state IN (?, ?)",
                (now, InboundState.ANSWERED.value, InboundState.DROPPED.value),
            ).rowcount
            removed += conn.execute(
                "DELETE FROM outbox WHERE state IN (?, ?) AND updated_at < ?",
                (ReplyState.DELIVERED.value, ReplyState.FAILED.value, now - finished_replies_after_s),
            ).rowcount
            removed += conn.execute("DELETE FROM cursors WHERE keep_until < ?", (now,)).rowcount
            return removed + self._prune_console(conn, now) + self._prune_activity(conn, now) + self._prune_tokens(conn, now)

        return await self._run(op)


_PAIRING_INSERT = (
    "INSERT INTO pairing (code, channel, account, sender, display_name, source, created_at, expires_at)"
    " SELECT :code, :channel, :account, :sender, :name, :source, :now, :until"
    " WHERE NOT EXISTS (SELECT 1 FROM pairing WHERE channel = :channel AND account = :account AND sender = :sender"
    "   AND expires_at >= :now)"
    " AND (SELECT COUNT(*) FROM pairing WHERE channel = :channel AND account = :account AND source = :source"
    "   AND expires_at >= :now) < :max_pending"
    " AND (:max_account IS NULL OR (SELECT COUNT(*) FROM pairing WHERE channel = :channel AND account = :account"
    "   AND expires_at >= :now) < :max_account)"
    " RETURNING code, created_at, expires_at"
)
"""A new pairing code, written only if the sender has no live one and the source and account have room."""


def _released(rows: list[tuple[int, str]]) -> list[InboxItem]:
    """Held messages an update moved back to pending, in arrival order (RETURNING keeps none)."""
    return [InboxItem(seq, InboundMessage.model_validate_json(p), InboundState.PENDING) for seq, p in sorted(rows)]


def _settle(future: asyncio.Future, ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


PROBE_BYTES = 65_536
"""What a probe writes: more than a long answer's outbox row, so a file whose free pages hold
only small writes still counts as full."""


def _probe_room(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO cursors (channel, account, name, value) VALUES ('gateway', 'store', 'write-probe',"
                 " hex(randomblob(?))) ON CONFLICT (channel, account, name) DO UPDATE SET value = excluded.value",
                 (PROBE_BYTES // 2,))
    conn.execute("DELETE FROM cursors WHERE channel = 'gateway' AND account = 'store' AND name = 'write-probe'")
