"""`partners pairing`: list, approve and deny against the gateway's real SQLite store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

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
    Sender,
    Text,
    UserId,
)
from gateway.store import InboundState
from gateway.store.sqlite import SqliteStore


def held_message(user: str) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(f"{user}-1"),
        address=Address(channel=ChannelName("telegram"), account=AccountId("default"),
                        conversation=Conversation(chat=ChatId(user), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(user), display_name=user.title()),
        elements=(Text(text="can you help me?"),),
        received_at=datetime.now(UTC),
    )


async def on_store(path: Path, action):
    store = SqliteStore(path)
    await store.open()
    try:
        return await action(store)
    finally:
        await store.close()


def in_store(path: Path, action):
    return asyncio.run(on_store(path, action))


@pytest.fixture
def db(workdir: Path) -> Path:
    (workdir / "partners.yaml").write_text("data_dir: data\n", encoding="utf-8")
    return workdir / "data" / "gateway.db"


def request_code(db: Path, user: str, name: str, ttl_s: float = 3600.0) -> str:
    async def action(store: SqliteStore) -> str:
        message = held_message(user)
        await store.accept([message], retention_s=3600)
        await store.mark_inbound([message.dedup_key], InboundState.HELD, "waiting for pairing")
        request = await store.pairing_request("telegram", "default", user, name, ttl_s=ttl_s, max_pending=3)
        return request.code

    return in_store(db, action)


def held_count(db: Path) -> int:
    async def action(store: SqliteStore) -> int:
        return (await store.queue_depths()).inbound_held.get("telegram:default", 0)

    return in_store(db, action)


def test_list_shows_the_waiting_codes(invoke, db):
    ann = request_code(db, "u-ann", "Ann")
    bob = request_code(db, "u-bob", "Bob")

    result = invoke("pairing", "list")

    assert result.exit_code == 0, result.output
    header, *rows = result.output.strip().splitlines()
    assert header.split() == ["CODE", "CHANNEL", "ACCOUNT", "USER", "NAME", "EXPIRES", "IN"]
    assert [row.split()[:5] for row in rows] == [
        [ann, "telegram", "default", "u-ann", "Ann"],
        [bob, "telegram", "default", "u-bob", "Bob"],
    ]
    assert rows[0].split()[5:] in (["59", "min"], ["60", "min"])


def test_approve_lets_the_sender_in(invoke, db):
    code = request_code(db, "u-ann", "Ann")

    result = invoke("pairing", "approve", code.lower())

    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Approved Ann (u-ann) on telegram/default. Their waiting messages will be answered."
    assert in_store(db, lambda store: store.is_approved("telegram", "default", "u-ann"))
    assert invoke("pairing", "list").output.strip() == "No pairing codes are waiting."


def test_deny_drops_the_held_messages(invoke, db):
    code = request_code(db, "u-bob", "Bob")
    assert held_count(db) == 1

    result = invoke("pairing", "deny", code)

    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Denied Bob (u-bob) on telegram/default. Their waiting messages are dropped."
    assert held_count(db) == 0
    assert not in_store(db, lambda store: store.is_approved("telegram", "default", "u-bob"))


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_an_unknown_code_is_a_clear_error(invoke, db, verb):
    request_code(db, "u-ann", "Ann")

    result = invoke("pairing", verb, "nope1234")

    assert result.exit_code == 1
    assert result.stderr.startswith("error: no pending pairing code NOPE1234: it is unknown, already used, or expired")
    assert "`partners pairing list`" in result.stderr


def test_an_expired_code_is_neither_listed_nor_approvable(invoke, db):
    code = request_code(db, "u-old", "Old", ttl_s=-1.0)

    assert invoke("pairing", "list").output.strip() == "No pairing codes are waiting."
    result = invoke("pairing", "approve", code)

    assert result.exit_code == 1
    assert f"no pending pairing code {code}" in result.stderr
    assert not in_store(db, lambda store: store.is_approved("telegram", "default", "u-old"))


def test_without_gateway_data_there_is_nothing_to_list_and_nothing_is_created(invoke, db):
    listed = invoke("pairing", "list")
    approved = invoke("pairing", "approve", "ABCD2345")

    assert listed.exit_code == 0 and listed.output.strip() == "No pairing codes are waiting."
    assert approved.exit_code == 1
    assert not db.parent.exists()
