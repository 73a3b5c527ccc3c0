"""The embedded store: dedup, the transactional outbox, cursors, pairing, migrations."""

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
from gateway.store import InboundState, ReplyState
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


async def test_accept_deduplicates_by_channel_account_and_event(store):
    first = await store.accept([message("1"), message("2")], retention_s=60)
    again = await store.accept([message("2"), message("3"), message("1", channel="other")], retention_s=60)
    assert first == [True, True]
    assert again == [False, True, True]
    pending = await store.open_inbound()
    assert [i.message.event_id for i in pending] == ["1", "2", "3", "1"]


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


async def test_put_reply_marks_answered_in_the_same_write(store):
    m = message("1")
    await store.accept([m], 60)
    reply = OutboundReply(idempotency_key="k1", target=m.address, markdown="hi", in_reply_to=(m.event_id,))
    await store.put_reply(reply, ReplyState.READY, answered=[m.dedup_key])
    assert await store.open_inbound() == []
    item = await store.get_reply("k1")
    assert item.state is ReplyState.READY and item.parts_sent == 0 and item.reply.markdown == "hi"
    assert [i.reply.idempotency_key for i in await store.open_replies()] == ["k1"]


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


async def test_failing_operation_does_not_break_its_batch(store):
    async def bad():
        await store.record_part("missing-key", 1, None)  # no such row: the SELECT returns None

    results = await asyncio.gather(bad(), store.accept([message("9")], 60), return_exceptions=True)
    assert isinstance(results[0], TypeError)
    assert results[1] == [True]


async def test_cursors_round_trip_and_overwrite(store):
    assert await store.get_cursor("relay", "a", "offset") is None
    await store.put_cursor("relay", "a", "offset", "10")
    await store.put_cursor("relay", "a", "offset", "11")
    assert await store.get_cursor("relay", "a", "offset") == "11"
    assert await store.get_cursor("relay", "b", "offset") is None


async def test_pairing_issue_approve_and_release(store):
    m = message("1", user="stranger")
    await store.accept([m], 60)
    await store.mark_inbound([m.dedup_key], InboundState.HELD, "pairing")
    request = await store.pairing_request("relay", "a", "stranger", "S", ttl_s=60, max_pending=3)
    again = await store.pairing_request("relay", "a", "stranger", "S", ttl_s=60, max_pending=3)
    assert request.code == again.code and len(request.code) == 8
    assert [r.code for r in await store.pairing_list()] == [request.code]
    assert await store.pairing_resolve("nope", approve=True) is None
    resolved = await store.pairing_resolve(request.code.lower(), approve=True)
    assert resolved.user == "stranger"
    assert await store.is_approved("relay", "a", "stranger")
    released = await store.release_approved()
    assert [i.message.event_id for i in released] == ["1"]
    assert [i.message.event_id for i in await store.open_inbound()] == ["1"]


async def test_pairing_caps_pending_codes_and_deny_drops_held(store):
    codes = [await store.pairing_request("relay", "a", f"u{i}", "", 60, max_pending=2) for i in range(3)]
    assert codes[0] and codes[1] and codes[2] is None
    m = message("1", user="u0")
    await store.accept([m], 60)
    await store.mark_inbound([m.dedup_key], InboundState.HELD, "pairing")
    await store.pairing_resolve(codes[0].code, approve=False)
    assert not await store.is_approved("relay", "a", "u0")
    assert await store.release_approved() == []
    assert await store.open_inbound() == []


async def test_notice_is_rate_limited_per_sender(store):
    assert await store.notice_due("relay", "a", "u1", 3600)
    assert not await store.notice_due("relay", "a", "u1", 3600)
    assert await store.notice_due("relay", "a", "u2", 3600)
    assert await store.notice_due("relay", "a", "u1", 0)


async def test_prune_forgets_expired_dedup_keys_only_when_finished(store):
    done, waiting = message("1"), message("2")
    await store.accept([done, waiting], retention_s=-1)
    await store.mark_inbound([done.dedup_key], InboundState.ANSWERED)
    assert await store.prune() == 1
    assert await store.accept([done], 60) == [True]  # past retention the key is forgotten
    assert [i.message.event_id for i in await store.open_inbound()] == ["2", "1"]


async def test_queue_depths(store):
    await store.accept([message("1"), message("2", channel="webchat")], 60)
    depths = await store.queue_depths()
    assert depths.inbound_pending == {"relay:a": 1, "webchat:a": 1}


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
