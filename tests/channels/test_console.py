"""The terminal channel: lines in become inbound messages, replies stream out as suffixes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from channels.base import ChannelContext
from channels.console import ConsoleChannel
from channels.registry import load_channel
from gateway.core.capabilities import Dialect, EditMode
from gateway.core.channel import ChannelState
from gateway.core.config import AccountConfig
from gateway.core.messages import AccountId, ConversationKind, Referrer, RenderedPart
from tests.fakes import MemoryCursors, RecordingHeartbeat, RecordingSink


def script(*lines: str):
    async def source() -> AsyncIterator[str]:
        for line in lines:
            yield line

    return source


def console(*lines: str, output: list[str] | None = None) -> tuple[ConsoleChannel, RecordingSink]:
    sink = RecordingSink()
    context = ChannelContext(AccountId("default"), AccountConfig(), sink, MemoryCursors(), Path("/nonexistent"))
    out = output if output is not None else []
    return ConsoleChannel(context, lines=script(*lines), write=out.append, user="ada"), sink


def part(text: str, final: bool = True) -> RenderedPart:
    return RenderedPart(index=0, text=text, final=final)


async def test_each_line_becomes_an_addressed_direct_message_until_quit():
    channel, sink = console("hello\n", "   \n", "what is 2+2?\n", "/quit\n", "never read\n")
    heartbeat = RecordingHeartbeat()

    await channel.run(heartbeat)

    assert [m.text for m in sink.accepted] == ["hello", "what is 2+2?"]
    first = sink.accepted[0]
    assert first.address.channel == "console" and first.address.account == "default"
    assert first.address.conversation.chat == "console"
    assert first.address.conversation.kind is ConversationKind.DIRECT
    assert first.sender.user == "ada" and first.addressed and not first.from_self
    assert len({m.event_id for m in sink.accepted}) == 2
    assert channel.finished.is_set()
    assert heartbeat.events == 2
    assert heartbeat.states == [ChannelState.RUNNING]


async def test_end_of_input_ends_the_run():
    channel, sink = console("only line")

    await channel.run(RecordingHeartbeat())

    assert [m.text for m in sink.accepted] == ["only line"]
    assert channel.finished.is_set()


async def test_a_streamed_reply_prints_only_what_each_edit_adds():
    out: list[str] = []
    channel, _ = console(output=out)
    target = channel.address()

    preview = RenderedPart(index=0, text="Hel", final=False)
    sent = await channel.send(target, preview, referrer=Referrer(), idempotency_key="k:p")
    await channel.edit(target, sent.ref, part("Hello, Ada", final=False), referrer=Referrer())
    await channel.edit(target, sent.ref, part("Hello, Ada!", final=True), referrer=Referrer())

    assert out == ["Hel", "lo, Ada", "!", "\n"]


async def test_an_edit_that_rewrites_the_text_reprints_it_on_a_new_line():
    out: list[str] = []
    channel, _ = console(output=out)
    target = channel.address()

    sent = await channel.send(target, part("Draft answer"), referrer=Referrer(), idempotency_key="k:p")
    await channel.edit(target, sent.ref, part("Final answer", final=True), referrer=Referrer())

    assert "".join(out) == "Draft answer\nFinal answer\n"


async def test_a_final_message_is_a_whole_line():
    out: list[str] = []
    channel, _ = console(output=out)
    target = channel.address()

    one = await channel.send(target, part("part one"), referrer=Referrer(), idempotency_key="k:0")
    two = await channel.send(target, part("part two"), referrer=Referrer(), idempotency_key="k:1")

    assert one.message != two.message
    assert "".join(out) == "part one\npart two\n"


async def test_a_preview_cut_short_is_closed_before_the_next_message_and_on_close():
    out: list[str] = []
    channel, _ = console(output=out)
    target = channel.address()

    await channel.send(target, part("Thinking"), referrer=Referrer(), idempotency_key="k:p")
    await channel.send(target, part("Notice"), referrer=Referrer(), idempotency_key="n:0")
    await channel.send(target, part("Half"), referrer=Referrer(), idempotency_key="m:p")
    await channel.close()

    assert "".join(out) == "Thinking\nNotice\nHalf\n"


async def test_an_edit_of_a_preview_that_is_no_longer_last_starts_a_new_line():
    out: list[str] = []
    channel, _ = console(output=out)
    target = channel.address()

    first = await channel.send(target, part("One"), referrer=Referrer(), idempotency_key="a:p")
    await channel.send(target, part("Two"), referrer=Referrer(), idempotency_key="b:p")
    await channel.edit(target, first.ref, part("One more", final=True), referrer=Referrer())

    assert "".join(out) == "One\nTwo\nOne more\n"


async def test_editing_an_unknown_message_prints_the_whole_text():
    out: list[str] = []
    channel, _ = console(output=out)

    await channel.send(channel.address(), part("Hi"), referrer=Referrer(), idempotency_key="k:p")
    await channel.edit(channel.address(), "from-before-a-restart", part("the answer", final=True), referrer=Referrer())

    assert "".join(out) == "Hi\nthe answer\n"


def test_the_registry_loads_it_with_the_declared_capabilities():
    cls = load_channel("console")
    caps = cls.capabilities()

    assert cls is ConsoleChannel
    assert caps.dialect is Dialect.PLAIN
    assert caps.edit_mode is EditMode.EDIT
