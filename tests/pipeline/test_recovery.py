"""Restarts: unanswered messages are answered, half-sent replies finish, nothing twice."""

from __future__ import annotations

import asyncio

from gateway.app import Gateway
from gateway.core.messages import OutboundReply
from gateway.pipeline.outbox import reply_key
from gateway.pipeline.resume import resume
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import MemoryChannel, make_message


async def test_turn_cut_short_is_rerun_and_reuses_the_preview(tmp_path):
    config = make_config(tmp_path, pipeline={"shutdown_drain_s": 0.3})

    class Hang(ScriptedResponder):
        async def respond(self, turn):
            from gateway.core.events import StreamDelta
            yield StreamDelta(text="thinking about it")
            await asyncio.Event().wait()

    first = Gateway(config, responder=Hang(), channel_classes={"memory": MemoryChannel})
    await first.start()
    channel = first.channel("memory", "acct")
    message = await channel.inject("question")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    preview_id = channel.sent[0].message
    await first.stop()  # the turn is cancelled mid-stream: its message stays pending

    second = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await second.start()
    again = second.channel("memory", "acct")
    await again.wait_for(lambda sent: any(s.final for s in sent))
    await second.stop()
    assert [(s.kind, s.message, s.text) for s in again.sent] == [("edit", preview_id, "re: question")]
    assert message.event_id


async def test_reply_half_delivered_continues_with_the_next_part(tmp_path):
    config = make_config(tmp_path)
    gateway = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await gateway.store.open()
    message = make_message("q", event="e1")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    text = " ".join(["alpha"] * 30) + "\n\n" + " ".join(["omega"] * 30)
    await gateway.store.put_reply(OutboundReply(idempotency_key=key, target=message.address, markdown=text),
                                  ReplyState.READY, answered=[message.dedup_key])
    await gateway.store.record_part(key, 1, None)
    await gateway.store.close()

    restarted = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await restarted.start()
    channel = restarted.channel("memory", "acct")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.2)
    await restarted.stop()
    assert [s.text.split()[0] for s in channel.sent] == ["omega"]
    assert [s.key for s in channel.sent] == [f"{key}:1"]


async def test_graceful_stop_drains_in_flight_turns(tmp_path):
    config = make_config(tmp_path)
    slow = ScriptedResponder(chunks=3, delay=0.1)
    gateway = Gateway(config, responder=slow, channel_classes={"memory": MemoryChannel})
    await gateway.start()
    channel = gateway.channel("memory", "acct")
    await channel.inject("finish me")
    while not slow.turns:
        await asyncio.sleep(0.01)
    await gateway.stop()
    assert any(s.final and s.text == "re: finish me" for s in channel.sent)


async def test_recovered_replies_are_woken_through_the_outbox_like_every_written_one(tmp_path):
    """Resume has no way of its own to start delivery: what the outbox's listeners hear is what gets delivered."""
    config = make_config(tmp_path)
    gateway = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await gateway.store.open()
    message = make_message("q", event="e1")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    await gateway.store.put_reply(OutboundReply(idempotency_key=key, target=message.address, markdown="left ready"),
                                  ReplyState.READY, answered=[message.dedup_key])
    heard: list[str] = []

    def listen(woken: str, _target: object) -> bool:
        heard.append(woken)
        return False

    gateway.outbox.on_ready(listen)
    replies, messages = await resume(gateway.store, gateway.outbox, gateway.dispatcher, gateway.lanes, lambda _c, _a: True)
    await gateway.store.close()
    assert heard == [key]
    assert (replies, messages) == (0, 0)  # heard, but nothing runs the memory channel yet: left in the store


async def test_waking_a_reply_delivery_already_has_in_hand_queues_it_once(start_gateway):
    gateway, channel = await start_gateway()
    message = make_message("q", event="e9")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    await gateway.store.put_reply(OutboundReply(idempotency_key=key, target=message.address, markdown="once"),
                                  ReplyState.READY, answered=[message.dedup_key])
    # No await between the wake-ups, as in resume: the first is queued, the others find it in hand.
    assert [gateway.outbox.wake(key, message.address) for _ in range(3)] == [True, False, False]
    assert gateway.lanes.delivering(key)
    replies, _ = await resume(gateway.store, gateway.outbox, gateway.dispatcher, gateway.lanes, gateway._runs)
    await channel.wait_for(lambda sent: any(s.text == "once" for s in sent))
    assert replies == 0 and [s.text for s in channel.sent] == ["once"]
    item = await gateway.store.get_reply(key)
    assert item is not None and item.state is ReplyState.DELIVERED
