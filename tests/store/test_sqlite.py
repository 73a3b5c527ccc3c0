"""What only the SQLite engine does: group commit, its file across reopen, its migrations and schema versions.

What every engine does is held by the contract suite (``tests/store/test_contract_*.py``)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime

import pytest

from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    OutboundReply,
    Sender,
    Text,
    UserId,
)
from gateway.store import ReplyState
from gateway.store.migrations import GATEWAY_SCHEMA, MIGRATIONS
from gateway.store.schema import Schema, StoreError, open_database
from gateway.store.sqlite import SqliteStore


def message(event: str, chat: str = "c1", user: str = "u1", channel: str = "relay") -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName(channel), account=AccountId("a"),
                        conversation=Conversation(chat=ChatId(chat), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(user)),
        elements=(Text(text=f"hello {event}"),),
        received_at=datetime.now(UTC),
    )




async def test_concurrent_accepts_are_group_committed_and_all_durable(tmp_path):
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    results = await asyncio.gather(*(store.accept([message(str(i))], 60) for i in range(300)))
    await store.close()
    assert all(r == [True] for r in results)
    reopened = SqliteStore(tmp_path / "g.db")
    await reopened.open()
    assert len(await reopened.open_inbound()) == 300
    await reopened.close()




async def test_reply_progress_survives_reopen_and_keeps_preview(tmp_path):
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    m = message("1")
    reply = OutboundReply(idempotency_key="k1", target=m.address, markdown="partial")
    await store.put_reply(reply, ReplyState.STREAMING)
    await store.record_preview("k1", MessageId("p-1"))
    await store.put_reply(reply.model_copy(update={"markdown": "final"}), ReplyState.READY)
    await store.record_part("k1", 1, None)
    await store.record_part("k1", 2, MessageId("m-2"))
    await store.close()
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    item = await store.get_reply("k1")
    assert (item.preview, item.parts_sent, item.sent, item.reply.markdown) == ("p-1", 2, ("m-2",), "final")
    await store.record_part("k1", 3, MessageId("m-3"), delivered=True)
    assert (await store.get_reply("k1")).state is ReplyState.DELIVERED
    assert await store.open_replies() == []
    await store.close()


@pytest.fixture
async def sqlite_store(tmp_path):
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    yield store
    await store.close()


async def test_failing_operation_does_not_break_its_batch(sqlite_store):
    store = sqlite_store

    async def bad():
        await store.record_part("missing-key", 1, None)  # no such row

    results = await asyncio.gather(bad(), store.accept([message("9")], 60), return_exceptions=True)
    assert isinstance(results[0], KeyError)
    assert results[1] == [True]














async def test_schema_version_recorded_and_newer_schema_refused(tmp_path):
    path = tmp_path / "g.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this release"):
        await SqliteStore(path).open()


async def test_a_takeover_from_before_locales_were_kept_reads_with_none(tmp_path):
    """A case opened by a release at schema 3 survives the upgrade; its locale is unknown (the partner's language)."""
    path = tmp_path / "g.db"
    target = message("1", chat="kid").address
    old = open_database(path, (Schema(GATEWAY_SCHEMA.name, GATEWAY_SCHEMA.migrations[:3]),), isolation_level=None)
    old.execute("INSERT INTO takeovers (code, conversation, partner, target, reason, started_at) VALUES (?, ?, ?, ?, ?, ?)",
                ("ABC123", target.conversation_key, "tutor", target.model_dump_json(), "worried", 1.0))
    old.close()

    store = SqliteStore(path)
    await store.open()
    takeover = await store.takeover_by_code("ABC123")
    kept = await store.start_takeover("tutor", message("2", chat="zh-kid").address, "asks", locale="zh-CN")
    await store.close()
    assert takeover is not None and takeover.target == target and takeover.locale == ""
    assert kept.locale == "zh-CN"


async def test_using_a_closed_store_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="not open"):
        await SqliteStore(tmp_path / "g.db").get_cursor("a", "b", "c")


async def test_a_cursor_written_to_expire_is_pruned_after_its_time_and_others_are_kept(tmp_path, monkeypatch):
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    try:
        await store.put_cursor("whatsapp", "a", "status:wamid.1", "read", keep_s=60.0)
        await store.put_cursor("whatsapp", "a", "status:wamid.2", "sent", keep_s=3600.0)
        await store.put_cursor("whatsapp", "a", "offset", "42")
        import gateway.store.sqlite as sqlite_module

        later = sqlite_module.time.time() + 120.0
        monkeypatch.setattr(sqlite_module.time, "time", lambda: later)
        assert await store.prune() >= 1
        assert await store.get_cursor("whatsapp", "a", "status:wamid.1") is None
        assert await store.get_cursor("whatsapp", "a", "status:wamid.2") == "sent"
        assert await store.get_cursor("whatsapp", "a", "offset") == "42"
        await store.put_cursor("whatsapp", "a", "status:wamid.2", "read")  # written again without keep_s: kept for good
        monkeypatch.setattr(sqlite_module.time, "time", lambda: later + 7200.0)
        await store.prune()
        assert await store.get_cursor("whatsapp", "a", "status:wamid.2") == "read"
    finally:
        await store.close()


async def test_two_stores_on_one_file_claim_notices_reminders_and_codes_once(tmp_path):
    """Two writers on one file (``partners serve`` and a CLI command, each its own connection): each
    read-modify-write is one statement, so what one claims the other never claims again."""
    from gateway.store import Reminder

    first, second = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    await first.open()
    await second.open()
    try:
        target = message("1").address
        for i in range(4):
            await first.add_reminder(Reminder(id=f"r{i}", target=target, text=f"t{i}", due_at=1.0))
        request = await first.pairing_request("relay", "a", "kid", "", 60, max_pending=3)
        assert request is not None
        calls = [s for _ in range(10) for s in (first, second)]
        notices = await asyncio.gather(*(s.notice_due("relay", "a", "u1", 3600) for s in calls))
        fired = await asyncio.gather(*(s.fire_due_reminders(2.0, lambda r: f"reminder-{r}") for s in calls))
        resolved = await asyncio.gather(*(s.pairing_resolve(request.code, approve=True) for s in calls))
        assert sum(notices) == 1
        assert sorted(i.reply.idempotency_key for batch in fired for i in batch) == [f"reminder-r{i}" for i in range(4)]
        assert sum(r is not None for r in resolved) == 1
    finally:
        await first.close()
        await second.close()
