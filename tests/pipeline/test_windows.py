"""One reply window, asked at scheduling time (reminders) and at send time (delivery).

Through the real gateway with the in-memory platform.  A window that has
closed is shown by a learner's message that arrived long enough ago (its
``received_at``), never by waiting.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from gateway.core.capabilities import Proactive
from gateway.core.messages import ConversationKind, reply_key
from gateway.store import Reminder, ReplyState
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


async def inject_old(channel: MemoryChannel, text: str, seconds: float, **kw):
    message = channel.message(text, **kw).model_copy(update={"received_at": ago(seconds)})
    await channel.context.sink.accept([message])
    return message


async def test_a_reply_after_the_window_closed_is_a_dead_letter_with_the_reason(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 3600.0})
    gateway, channel = await start_gateway()
    late = await inject_old(channel, "still there?", 2 * 3600, chat="late", user="late")
    fresh = await inject_old(channel, "hello", 60, chat="fresh", user="fresh")
    await channel.wait_for(lambda sent: any(s.chat == "fresh" for s in sent))
    await gateway.lanes.drain()
    assert [s.chat for s in channel.sent] == ["fresh"]
    row = await gateway.store.get_reply(reply_key(late.address, late.event_id))
    assert row.state is ReplyState.FAILED
    assert "only lets me write within 1 hour of the learner's last message" in row.last_error
    account = (await gateway.status()).accounts[0]
    assert account.undelivered == 1 and "1 hour" in account.last_undelivered
    assert (await gateway.store.get_reply(reply_key(fresh.address, fresh.event_id))).state is ReplyState.DELIVERED


async def test_a_group_has_its_own_narrower_window(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 3600.0, "group_reply_window_s": 300.0})
    gateway, channel = await start_gateway(access={"dm": "open", "group": "always"})
    group = await inject_old(channel, "in the group", 600, chat="g1", user="a", kind=ConversationKind.GROUP)
    direct = await inject_old(channel, "in private", 600, chat="d1", user="b")
    await channel.wait_for(lambda sent: any(s.chat == "d1" for s in sent))
    await gateway.lanes.drain()
    assert [s.chat for s in channel.sent] == ["d1"]
    row = await gateway.store.get_reply(reply_key(group.address, group.event_id))
    assert row.state is ReplyState.FAILED and "5 minutes" in row.last_error
    assert direct.address.conversation.kind is ConversationKind.DIRECT


async def test_an_expired_reply_token_refuses_the_send(start_gateway):
    gateway, channel = await start_gateway()
    message = channel.message("quick!", chat="k", user="k")
    message = message.model_copy(update={"referrer": message.referrer.model_copy(update={"expires_at": ago(1)})})
    await channel.context.sink.accept([message])
    await gateway.lanes.drain()
    for _ in range(50):
        row = await gateway.store.get_reply(reply_key(message.address, message.event_id))
        if row is not None and row.state is ReplyState.FAILED:
            break
        await gateway.lanes.drain()
    assert row.state is ReplyState.FAILED and "reply token expired" in row.last_error
    assert channel.sent == []


async def test_a_reminder_into_a_conversation_with_no_open_window_is_refused_at_send_time(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 3600.0})
    gateway, channel = await start_gateway()
    message = await channel.inject("remind me", chat="k", user="k")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    # Due in a conversation the platform never handed us a message from: no window was ever opened there.
    elsewhere = message.address.model_copy(update={"conversation": message.address.conversation.model_copy(
        update={"chat": "never-wrote"})})
    await gateway.store.add_reminder(Reminder(id=uuid.uuid4().hex, target=elsewhere, text="revise", due_at=time.time() - 1))
    assert await gateway.fire_reminders() == 1
    await gateway.lanes.drain()
    assert [s.chat for s in channel.sent] == ["k"]
    assert "within 1 hour of the learner's, and none is known" in (await gateway.status()).accounts[0].last_undelivered


async def test_the_desk_and_delivery_give_the_same_reason(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 3600.0})
    gateway, channel = await start_gateway()
    message = await inject_old(channel, "remind me", 30 * 60, chat="k", user="k")
    await gateway.lanes.drain()
    refused = await gateway.reminders.schedule(message.address, datetime.now(UTC) + timedelta(hours=1), "later")
    assert not refused.accepted
    assert refused.reason == "memory only lets me write within 1 hour of the learner's last message"


async def test_a_platform_without_proactive_messages_refuses_a_due_reminder_at_send_time(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"proactive": Proactive.NONE})
    gateway, channel = await start_gateway()
    message = await channel.inject("hi", chat="k", user="k")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await gateway.store.add_reminder(Reminder(id=uuid.uuid4().hex, target=message.address, text="revise",
                                              due_at=time.time() - 1))
    assert await gateway.fire_reminders() == 1
    await gateway.lanes.drain()
    assert [s.text for s in channel.sent] == ["re: hi"]
    assert "does not allow messages the learner did not ask for" in (await gateway.status()).accounts[0].last_undelivered
