"""The outbound contract as the pipeline drives it: attachment parts, native streams, handles, one key module."""

from __future__ import annotations

import asyncio

from gateway.app import Gateway
from gateway.core.capabilities import EditMode
from gateway.core.errors import PeerUnavailable
from gateway.core.events import StreamEnd, TurnEnd
from gateway.core.messages import Attachment, OutboundReply
from gateway.pipeline.outbox import part_key, reply_key, stream_key
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel, make_message

FILES = (Attachment(kind="image", url="https://x.test/a.png", name="a.png"),
         Attachment(kind="file", url="https://x.test/b.pdf", name="b.pdf"))
WITH_MEDIA = DEFAULT_CAPS.model_copy(update={"media_kinds": frozenset({"image", "file"}), "media_max_bytes": 10**6,
                                             "elements": DEFAULT_CAPS.elements | {"image", "file"}})


class WithFiles(ScriptedResponder):
    async def respond(self, turn):
        self.turns.append(turn)
        yield StreamEnd(markdown="Here are your sheets.", attachments=FILES)
        yield TurnEnd()


async def test_each_attachment_is_a_part_of_its_own_with_its_own_key(start_gateway):
    MemoryChannel.caps = WITH_MEDIA
    gateway, channel = await start_gateway(WithFiles())
    message = await channel.inject("sheets please")
    await channel.wait_for(lambda sent: len(sent) >= 3)
    key = reply_key(message.address, message.event_id)
    assert [(s.key, s.text, s.attachments) for s in channel.sent] == [
        (part_key(key, 0), "Here are your sheets.", ()), (part_key(key, 1), "", ("a.png",)), (part_key(key, 2), "", ("b.pdf",))]
    item = await gateway.store.get_reply(key)
    assert item is not None and item.parts_sent == 3 and item.state is ReplyState.DELIVERED


async def test_a_failed_attachment_is_retried_alone_and_the_text_is_not_sent_again(start_gateway):
    MemoryChannel.caps = WITH_MEDIA
    responder = WithFiles()
    gateway, channel = await start_gateway(responder)
    message = make_message("sheets please", event="e-files", account="acct")
    key = reply_key(message.address, message.event_id)
    channel.fail_keys[part_key(key, 2)] = PeerUnavailable("memory", "upload timed out")
    await channel.context.sink.accept([message])
    await channel.wait_for(lambda sent: len(sent) >= 3)
    await asyncio.sleep(0.1)
    assert [s.key for s in channel.sent] == [part_key(key, i) for i in range(3)]
    item = await gateway.store.get_reply(key)
    assert item is not None and item.attempts == 1 and item.state is ReplyState.DELIVERED


async def test_files_ride_with_the_text_where_the_platform_carries_them_inside_it(start_gateway):
    MemoryChannel.caps = WITH_MEDIA.model_copy(update={"media_with_text": True})
    gateway, channel = await start_gateway(WithFiles())
    await channel.inject("sheets please")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.1)
    assert [(s.text, s.attachments) for s in channel.sent] == [("Here are your sheets.", ("a.png", "b.pdf"))]


async def test_a_native_stream_is_started_appended_and_finished_never_sent(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NATIVE_STREAM})
    responder = ScriptedResponder(lambda turn: "one two three four five six", chunks=6, delay=0.06)
    gateway, channel = await start_gateway(responder)
    message = await channel.inject("stream it")
    await channel.wait_for(lambda sent: any(s.kind == "finish" for s in sent))
    kinds = [s.kind for s in channel.sent]
    assert kinds[0] == "start" and kinds[-1] == "finish" and "send" not in kinds and "append" in kinds, kinds
    key = reply_key(message.address, message.event_id)
    assert channel.sent[0].key == stream_key(key)
    appended = "".join(s.text for s in channel.sent if s.kind == "append")
    assert "one two three four five six".startswith(appended) and appended
    handle = channel.sent[0].message
    assert {s.message for s in channel.sent} == {handle}  # every call went to the stream's one handle
    assert channel.visible() == {handle: "one two three four five six"}
    item = await gateway.store.get_reply(key)
    assert item is not None and item.preview == handle and item.sent == (handle,)


async def test_a_stream_opened_before_a_restart_is_finished_by_its_stored_handle(tmp_path):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NATIVE_STREAM})
    config = make_config(tmp_path)
    gateway = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await gateway.store.open()
    message = make_message("q", event="e1")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    reply = OutboundReply(idempotency_key=key, target=message.address, markdown="the whole answer")
    await gateway.store.begin_preview(reply)
    await gateway.store.record_preview(key, "stream-from-before")
    await gateway.store.put_reply(reply, ReplyState.READY, answered=[message.dedup_key])
    await gateway.store.close()

    restarted = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await restarted.start()
    channel = restarted.channel("memory", "acct")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.1)
    await restarted.stop()
    assert [(s.kind, s.message, s.text) for s in channel.sent] == [("finish", "stream-from-before", "the whole answer")]


async def restarted_after_a_crash_before_the_stream_handle(tmp_path, channel_class: type[MemoryChannel]) -> tuple[Gateway, str]:
    """A gateway restarted on a ready reply whose stream began but whose handle was never recorded."""
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NATIVE_STREAM})
    config = make_config(tmp_path)
    gateway = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": channel_class})
    await gateway.store.open()
    message = make_message("q", event="e1")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    reply = OutboundReply(idempotency_key=key, target=message.address, markdown="the whole answer")
    await gateway.store.begin_preview(reply)  # a crash before the stream's handle was recorded
    await gateway.store.put_reply(reply, ReplyState.READY, answered=[message.dedup_key])
    await gateway.store.close()
    restarted = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": channel_class})
    await restarted.start()
    return restarted, key


async def test_an_unconfirmed_stream_is_started_again_under_its_key_then_finished(tmp_path):
    restarted, key = await restarted_after_a_crash_before_the_stream_handle(tmp_path, MemoryChannel)
    channel = restarted.channel("memory", "acct")
    await channel.wait_for(lambda sent: any(s.kind == "finish" for s in sent))
    await restarted.stop()
    assert [(s.kind, s.key) for s in channel.sent] == [("start", stream_key(key)), ("finish", "")]
    assert list(channel.visible().values()) == ["the whole answer"]


class FinishFailsOnce(MemoryChannel):
    """Like Slack without idempotency keys: every start opens a new stream; the first finish fails."""

    async def start(self, target, referrer, key):
        self.by_key.pop(key, None)
        return await super().start(target, referrer, key)

    async def finish(self, stream, final):
        if not getattr(self, "failed_once", False):
            self.failed_once = True
            raise PeerUnavailable("memory", "the finish's answer never came")
        return await super().finish(stream, final)


async def test_a_stream_opened_by_the_final_delivery_is_recorded_so_a_failed_finish_is_retried_on_it(tmp_path):
    restarted, _ = await restarted_after_a_crash_before_the_stream_handle(tmp_path, FinishFailsOnce)
    channel = restarted.channel("memory", "acct")
    await channel.wait_for(lambda sent: any(s.kind == "finish" for s in sent))
    await restarted.stop()
    assert [s.kind for s in channel.sent] == ["start", "finish"]
    assert list(channel.visible().values()) == ["the whole answer"]
