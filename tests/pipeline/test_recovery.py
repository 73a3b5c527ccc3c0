"""Restarts: unanswered messages are answered, half-sent replies finish, nothing twice."""

from __future__ import annotations

import asyncio

from gateway.app import Gateway
from gateway.core.messages import OutboundReply
from gateway.pipeline.outbox import reply_key
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
