"""Media after the ack: files are fetched in the lane before the turn, recorded, and a failure is a note."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from channels.base import MediaStream
from gateway.app import Gateway
from gateway.core.errors import PeerUnavailable
from gateway.core.events import StreamEnd, TurnEnd
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Media,
    MediaRef,
    Sender,
    Text,
    UserId,
)
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel

PHOTO = b"\x89PNG" + bytes(range(200))


def with_file(event: str, ref: MediaRef, text: str = "look") -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName("memory"), account=AccountId("acct"),
                        conversation=Conversation(chat=ChatId("c1"), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId("u1"), display_name="u1"),
        elements=(Media.inbound("image", ref), Text(text=text)),
        received_at=datetime.now(UTC),
        addressed=True,
    )


class FileChannel(MemoryChannel):
    """The memory channel with files: ``files`` by locator; ``hold`` keeps a fetch waiting; ``fail`` raises."""

    files: dict[str, bytes] = {}
    fetched: list[str] = []
    hold: asyncio.Event | None = None
    fail: Exception | None = None

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        FileChannel.fetched.append(ref.locator)
        if FileChannel.hold is not None:
            await FileChannel.hold.wait()
        if FileChannel.fail is not None:
            raise FileChannel.fail
        body = FileChannel.files[ref.locator]

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(body), 64):
                yield body[i:i + 64]

        yield MediaStream(chunks=chunks(), content_type="image/png")


def reset() -> None:
    FileChannel.files, FileChannel.fetched, FileChannel.hold, FileChannel.fail = {"f1": PHOTO}, [], None, None
    FileChannel.caps = DEFAULT_CAPS.model_copy(update={"media_max_bytes": 1000})


async def started(tmp_path, responder=None, **pipeline) -> tuple[Gateway, FileChannel, ScriptedResponder]:
    responder = responder or ScriptedResponder()
    gateway = Gateway(make_config(tmp_path, pipeline=pipeline), responder=responder, channel_classes={"memory": FileChannel})
    await gateway.start()
    return gateway, gateway.channel("memory", "acct"), responder


def media(turn_messages) -> Media:
    [found] = [e for m in turn_messages for e in m.elements if isinstance(e, Media)]
    return found


async def test_a_file_is_fetched_into_the_blob_store_before_the_turn_reads_it(tmp_path):
    reset()
    gateway, channel, responder = await started(tmp_path)
    try:
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png", size=len(PHOTO)))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        got = media(responder.turns[0].messages)
        assert got.blob is not None and got.blob.endswith(".png") and got.size == len(PHOTO) and not got.missing
        assert await gateway.blobs.get(got.blob) == PHOTO
        assert FileChannel.fetched == ["f1"]
    finally:
        await gateway.stop()


async def test_a_failed_fetch_is_a_note_to_the_model_and_the_learner_gets_one_answer(tmp_path):
    reset()
    FileChannel.fail = PeerUnavailable("memory", "file server down", code=503)
    gateway, channel, responder = await started(tmp_path)
    try:
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png"))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        [turn] = responder.turns
        text = turn.messages[0].text
        assert "the learner sent an image (cat.png) that could not be fetched: memory did not hand it over" in text
        assert text.endswith("look")
        assert [s.kind for s in channel.sent] == ["send"]
    finally:
        await gateway.stop()


async def test_a_file_declared_over_the_limit_is_not_fetched_at_all(tmp_path):
    reset()
    gateway, channel, responder = await started(tmp_path)
    try:
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="film.mp4", size=5000))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        assert media(responder.turns[0].messages).missing == "too large (4.9 KB > 1000 bytes)"
        assert FileChannel.fetched == []
    finally:
        await gateway.stop()


async def test_a_body_past_the_limit_is_cut_off_and_nothing_is_kept(tmp_path):
    """The declared size is the sender's word; the blob store counts what arrives."""
    reset()
    FileChannel.files = {"f1": b"x" * 5000}
    gateway, channel, responder = await started(tmp_path)
    try:
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="small.png", size=10))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        assert media(responder.turns[0].messages).missing == "too large (over 1000 bytes)"
        assert [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == []
    finally:
        await gateway.stop()


async def test_a_fetch_that_hangs_gives_up_in_time_and_the_turn_runs(tmp_path):
    reset()
    FileChannel.hold = asyncio.Event()
    gateway, channel, responder = await started(tmp_path, media_fetch_timeout_s=0.3)
    try:
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png"))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        assert media(responder.turns[0].messages).missing == "the download took longer than 0.3 s"
    finally:
        await gateway.stop()


async def test_a_channel_that_cannot_fetch_files_gives_a_note(tmp_path):
    reset()
    gateway = Gateway(make_config(tmp_path), responder=(responder := ScriptedResponder()),
                      channel_classes={"memory": MemoryChannel})
    await gateway.start()
    try:
        channel = gateway.channel("memory", "acct")
        await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png"))])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        assert "could not be fetched: memory files cannot be fetched by the gateway" in responder.turns[0].messages[0].text
    finally:
        await gateway.stop()


async def test_a_recorded_fetch_is_reused_after_a_restart(tmp_path):
    """The fetch result is written to the inbox row before the turn: a restart mid-turn reuses the blob."""
    reset()

    class Hang(ScriptedResponder):
        async def respond(self, turn):
            self.turns.append(turn)
            await asyncio.Event().wait()
            yield  # pragma: no cover

    first, channel, hung = await started(tmp_path, responder=Hang(), shutdown_drain_s=0.2)
    await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png"))])
    while not hung.turns:
        await asyncio.sleep(0.01)
    await first.stop()
    second, again, responder = await started(tmp_path)
    try:
        await again.wait_for(lambda sent: any(s.final for s in sent))
        assert FileChannel.fetched == ["f1"]  # once, by the first run
        got = media(responder.turns[0].messages)
        assert await second.blobs.get(got.blob or "") == PHOTO
        assert [s.kind for s in again.sent] == ["send"]
    finally:
        await second.stop()


async def test_a_crash_before_the_fetch_was_recorded_fetches_again_and_answers_once(tmp_path):
    reset()
    FileChannel.hold = asyncio.Event()
    first, channel, _ = await started(tmp_path, shutdown_drain_s=0.2)
    await channel.context.sink.accept([with_file("e1", MediaRef(locator="f1", name="cat.png"))])
    while not FileChannel.fetched:
        await asyncio.sleep(0.01)
    await first.stop()  # cut off mid-fetch: nothing recorded, the message stays pending
    FileChannel.hold = None
    second, again, responder = await started(tmp_path)
    try:
        await again.wait_for(lambda sent: any(s.final for s in sent))
        assert FileChannel.fetched == ["f1", "f1"]
        assert media(responder.turns[0].messages).blob is not None
        assert [s.kind for s in again.sent] == ["send"] and channel.sent == []
    finally:
        await second.stop()


async def test_a_file_sent_during_a_merging_turn_waits_for_the_next_turn_in_order(tmp_path):
    """The responder takes arrivals without waiting, so a file it took would be read before it was
    fetched; the message with the file goes to the next turn instead, with the arrivals not yet taken
    before it and everything after it, in order."""
    reset()

    class Taking(ScriptedResponder):
        def __init__(self):
            super().__init__()
            self.taken: list[list[str]] = []

        async def respond(self, turn):
            self.turns.append(turn)
            if self.gate is not None:
                await self.gate.wait()
            self.taken.append([m.event_id for m in turn.take_arrivals()])
            yield StreamEnd(markdown="ok")
            yield TurnEnd()

    responder = Taking()
    responder.gate = asyncio.Event()
    gateway = Gateway(make_config(tmp_path, partner={"mid_turn": "merge"}), responder=responder,
                      channel_classes={"memory": FileChannel})
    await gateway.start()
    try:
        channel = gateway.channel("memory", "acct")
        await channel.inject("first", event="e1")
        while not responder.turns:
            await asyncio.sleep(0.01)
        await channel.inject("while you think", event="e2")
        await channel.context.sink.accept([with_file("e3", MediaRef(locator="f1", name="cat.png"))])
        await channel.inject("and this", event="e4")
        while len(gateway.lanes._lanes.get(channel.message("x").address.conversation_key).pending) < 3:
            await asyncio.sleep(0.01)
        responder.gate.set()
        await channel.wait_for(lambda sent: len([s for s in sent if s.final]) >= 2)
        first, second = responder.turns[:2]
        assert [m.event_id for m in first.messages] == ["e1"] and responder.taken[0] == []
        assert [m.event_id for m in second.messages] == ["e2", "e3", "e4"]
        assert media(second.messages).blob is not None
    finally:
        await gateway.stop()
