"""Transcripts, on every engine: the console's view of conversations, built from the inbox and outbox."""

from __future__ import annotations

from gateway.store import InboundState, ReplyState
from gateway.store.transcripts import Heard, Said
from tests.store.rows import message, reply


async def test_conversations_are_newest_first_with_what_waits_there(store):
    first, waiting, held = message("1", chat="c1"), message("2", chat="c2"), message("3", chat="c2", user="kid")
    await store.accept([first], 60)
    await store.put_reply(reply("r1", chat="c1"), ReplyState.DELIVERED, answered=[first.dedup_key])
    await store.accept([waiting, held], 60)
    await store.mark_inbound([held.dedup_key], InboundState.HELD, "pairing")
    listed = await store.conversations(limit=10)
    assert [c.key for c in listed] == [waiting.address.conversation_key, first.address.conversation_key]
    newest, oldest = listed
    assert (newest.pending, newest.held, newest.last_said) == (1, 1, None)
    assert oldest.last_said is not None and oldest.last_said.reply.idempotency_key == "r1" and oldest.pending == 0
    assert len(await store.conversations(limit=1)) == 1


async def test_a_transcript_is_heard_and_said_oldest_first(store):
    m = message("1")
    await store.accept([m], 60)
    await store.put_reply(reply("r1"), ReplyState.READY, answered=[m.dedup_key])
    lines = await store.transcript(m.address.conversation_key, limit=10)
    assert [type(line) for line in lines] == [Heard, Said]
    assert isinstance(lines[0], Heard) and lines[0].state is InboundState.ANSWERED
    assert await store.transcript("relay:a:nowhere", limit=10) == []
