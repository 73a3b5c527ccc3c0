"""The outbox role, on every engine: replies by key, answered-marking in the same write, progress."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.messages import MessageId
from gateway.store import InboundState, ReplyState
from tests.store.rows import message, reply


async def test_put_reply_marks_answered_in_the_same_write(store):
    m, other = message("1"), message("2")
    await store.accept([m, other], 60)
    written = await store.put_reply(reply("k1"), ReplyState.READY, answered=[m.dedup_key])
    assert [i.message.event_id for i in await store.open_inbound()] == ["2"]
    assert written.state is ReplyState.READY and written.parts_sent == 0 and written.reply.markdown == "hi"
    item = await store.get_reply("k1")
    assert item is not None and item.reply.markdown == "hi" and item.attempts == 0
    assert [i.reply.idempotency_key for i in await store.open_replies()] == ["k1"]
    assert await store.get_reply("nope") is None


async def test_put_reply_again_returns_the_progress_an_earlier_run_recorded(store):
    await store.put_reply(reply("k1", markdown="partial"), ReplyState.STREAMING)
    await store.record_preview("k1", "p-1")
    await store.record_part("k1", 1, MessageId("m-1"))
    again = await store.put_reply(reply("k1", markdown="final"), ReplyState.READY)
    assert (again.preview, again.parts_sent, again.sent, again.reply.markdown) == ("p-1", 1, ("m-1",), "final")


async def test_a_preview_is_unconfirmed_until_its_handle_is_recorded(store):
    await store.begin_preview(reply("k1"))
    started = await store.get_reply("k1")
    assert started is not None and started.state is ReplyState.STREAMING and started.preview_unconfirmed
    await store.record_preview("k1", "handle-9")
    confirmed = await store.get_reply("k1")
    assert confirmed is not None and confirmed.preview == "handle-9" and not confirmed.preview_unconfirmed
    await store.begin_preview(reply("k1"))  # a second preview send: unconfirmed again, the handle kept
    again = await store.get_reply("k1")
    assert again is not None and again.preview_unconfirmed and again.preview == "handle-9"


async def test_parts_accumulate_and_delivered_closes_the_reply(store):
    await store.put_reply(reply("k1"), ReplyState.READY)
    await store.record_part("k1", 1, None)
    await store.record_part("k1", 2, MessageId("m-2"))
    await store.record_part("k1", 3, MessageId("m-3"), delivered=True)
    item = await store.get_reply("k1")
    assert item is not None and (item.parts_sent, item.sent, item.state) == (3, ("m-2", "m-3"), ReplyState.DELIVERED)
    assert await store.open_replies() == []


async def test_parts_recorded_at_once_all_keep_their_message_ids(store):
    await store.put_reply(reply("k1"), ReplyState.READY)
    await asyncio.gather(*(store.record_part("k1", i + 1, MessageId(f"m-{i}")) for i in range(30)))
    item = await store.get_reply("k1")
    assert item is not None and sorted(item.sent) == sorted(f"m-{i}" for i in range(30))
    assert item.state is ReplyState.READY


async def test_a_part_of_a_reply_that_does_not_exist_is_an_error(store):
    with pytest.raises(KeyError):
        await store.record_part("missing-key", 1, None)


async def test_attempts_are_counted_one_by_one_even_at_once(store):
    await store.put_reply(reply("k1"), ReplyState.READY)
    assert await store.record_attempt("k1", "first") == 1
    counts = await asyncio.gather(*(store.record_attempt("k1", f"error {i}") for i in range(25)))
    assert sorted(counts) == list(range(2, 27))
    item = await store.get_reply("k1")
    assert item is not None and item.attempts == 26 and item.last_error is not None and item.last_error.startswith("error")
    assert await store.record_attempt("missing-key", "x") == 0


async def test_finish_reply_moves_the_state_and_keeps_the_last_error(store):
    await store.put_reply(reply("k1"), ReplyState.READY)
    await store.record_attempt("k1", "telegram says 500")
    await store.finish_reply("k1", ReplyState.FAILED)
    item = await store.get_reply("k1")
    assert item is not None and item.state is ReplyState.FAILED and item.last_error == "telegram says 500"
    await store.finish_reply("k1", ReplyState.FAILED, "reply window closed")
    item = await store.get_reply("k1")
    assert item is not None and item.last_error == "reply window closed"
    assert await store.open_replies() == []


async def test_open_replies_are_the_streaming_and_ready_ones_oldest_first(store):
    for key, state in (("a", ReplyState.READY), ("b", ReplyState.STREAMING), ("c", ReplyState.DELIVERED),
                       ("d", ReplyState.FAILED), ("e", ReplyState.READY)):
        await store.put_reply(reply(key), state)
    assert [i.reply.idempotency_key for i in await store.open_replies()] == ["a", "b", "e"]


async def test_parts_answering_counts_other_replies_to_that_message_in_that_conversation(store):
    await store.put_reply(reply("greeting", answering="m-1"), ReplyState.READY)
    await store.put_reply(reply("answer", answering="m-1"), ReplyState.READY)
    await store.put_reply(reply("elsewhere", chat="c2", answering="m-1"), ReplyState.READY)
    await store.put_reply(reply("later", answering="m-2"), ReplyState.READY)
    for key, parts in (("greeting", 1), ("answer", 3), ("elsewhere", 4), ("later", 2)):
        await store.record_part(key, parts, None)
    conversation = reply("x").target.conversation_key
    assert await store.parts_answering(conversation, MessageId("m-1"), besides="answer") == 1
    assert await store.parts_answering(conversation, MessageId("m-1"), besides="none") == 4
    assert await store.parts_answering(conversation, MessageId("m-9"), besides="none") == 0


async def test_answered_messages_are_not_open(store):
    m = message("1")
    await store.accept([m], 60)
    await store.put_reply(reply("k1"), ReplyState.STREAMING, answered=[m.dedup_key])
    await store.mark_inbound([m.dedup_key], InboundState.ANSWERED)
    assert await store.open_inbound() == []
