"""Messages that show nothing cost no turn, and a leading "@bot" is set aside before anything reads the text.

Before: a message of only zero-width spaces, joiners, a BOM, bidi marks,
control characters or lone combining marks was answered like a question (a
turn, a model call, an answer to nothing).  A leading mention was glued to the
next word in the model's input (Telegram's decode dropped the separator, so the
text read "@tutor_botPROBE"), and "@tutor_bot /export" in a group was no
command at all -- it went to the model instead of the "send it in a direct
chat" refusal.  Now the dispatcher, for every channel, drops the invisible
message with a recorded reason, and ``InboundMessage.text`` -- what every
command check and the model's input read -- sets a leading mention of the bot
aside (``gateway.core.messages.without_bot_mention``), so the brain's command
detection sees "/export".

Telegram through python-telegram-bot against the Bot API emulator, and the
same shared path with hand-made elements for the other channels' decodes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from brain.commands import command_of
from gateway.app import Gateway
from gateway.core.messages import ConversationKind, Element, Media, Mention, MessageId, Quote, Text, UserId
from tests.channels.telegram import conftest as telegram_rigs
from tests.channels.telegram.conftest import TelegramRig, new_group, new_id
from tests.contract.harness import eventually, settled
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel

pytestmark = pytest.mark.timeout(120)

NOTHING_VISIBLE = "nothing visible in the message"
INVISIBLE = {
    "zero-width space and joiners": "\u200b\u200c\u200d",
    "byte order mark and word joiner": "\ufeff\u2060",
    "bidi marks and isolates": "\u200e\u200f\u202e\u2066\u2069",
    "control characters": "\x01\x07\x1b\x7f",
    "lone combining marks": "\u0301\u0308",
    "blank letters": "\u3164\u115f\u2800",
    "tag characters": "\U000e0041\U000e007f",
    "spaces of every width": "\u00a0\u2003\u3000 \t",
}
ME = Mention(user=UserId("bot"), display_name="tutor_bot", is_self=True)


# --------------------------------------------------------------------------- Telegram, end to end


open_rig = telegram_rigs.open_rig
"""A gateway on a fresh bot at the Bot API emulator, as tests/channels/telegram use it."""


@pytest.fixture
async def rig(open_rig: Callable[..., Awaitable[TelegramRig]]) -> TelegramRig:
    return await open_rig()


@pytest.mark.parametrize("text", INVISIBLE.values(), ids=INVISIBLE.keys())
async def test_an_invisible_telegram_message_gets_no_turn_and_no_answer(rig: TelegramRig, text: str) -> None:
    chat = new_id()
    await rig.users.say(chat, text)
    await rig.users.say(chat, "hello")
    [answer] = await rig.replies(chat, 1)
    await rig.quiet()

    assert answer["text"] == "echo: hello"
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["hello"]
    dropped = rig.gateway.metrics.dropped.labels("telegram", "main", NOTHING_VISIBLE)._value.get()
    assert dropped == 1


async def test_a_leading_mention_is_not_glued_to_the_next_word(rig: TelegramRig) -> None:
    group = new_group()
    await rig.users.say({"id": group, "type": "supergroup", "title": "Class"}, "PROBE word", user=new_id(), mention=True)
    await rig.replies(group, 1)
    await rig.quiet()

    [turn] = rig.responder.turns
    assert [m.text for m in turn.messages] == ["PROBE word"]


async def test_a_command_after_a_leading_mention_is_the_command(rig: TelegramRig) -> None:
    group = new_group()
    await rig.users.say({"id": group, "type": "supergroup", "title": "Class"}, "/export", user=new_id(), mention=True)
    await rig.replies(group, 1)
    await rig.quiet()

    [turn] = rig.responder.turns
    [message] = turn.messages
    assert message.text == "/export"
    assert command_of(message) == ("/export", "")  # so the brain answers "send it in a direct chat"


# --------------------------------------------------------------------------- the shared path, any channel's decode


Memory = tuple[Gateway, MemoryChannel, ScriptedResponder]


@pytest.fixture
async def memory(tmp_path) -> AsyncIterator[Memory]:
    responder = ScriptedResponder()
    gateway = Gateway(make_config(tmp_path, access={"dm": "open", "group": "mention"}), responder=responder,
                      channel_classes={"memory": MemoryChannel})
    await gateway.start()
    try:
        yield gateway, gateway.channel("memory", "acct"), responder
    finally:
        await gateway.stop()
        MemoryChannel.instances.clear()
        MemoryChannel.caps = DEFAULT_CAPS


async def _said(memory: Memory, elements: tuple[Element, ...], *, group: bool = True) -> str:
    """What the responder was given for a message made of ``elements`` (as some channel decoded it)."""
    gateway, channel, responder = memory
    kind = ConversationKind.GROUP if group else ConversationKind.DIRECT
    message = channel.message("", kind=kind, chat="g" if group else "c1").model_copy(update={"elements": elements})
    await channel.context.sink.accept([message])
    await eventually(lambda: responder.turns and settled(gateway), what="the message to be answered")
    [turn] = responder.turns
    [said] = turn.messages
    return said.text


@pytest.mark.parametrize("elements, said", [
    ((ME, Text(text=" PROBE")), "PROBE"),                                     # Telegram, Matrix "@name ..."
    ((ME, Text(text="PROBE")), "PROBE"),                                      # a decode that dropped the space
    ((ME, Text(text=": /export")), "/export"),                                 # Matrix "Tutor: /export"
    ((ME, Text(text=",  what is 2+2?")), "what is 2+2?"),
    ((ME, Text(text=" :) hi")), ":) hi"),                                      # a smiley is not a separator
    ((Quote(message=MessageId("9"), text="4", is_self=True), ME, Text(text=" why?")), "why?"),
    ((ME, ME, Text(text=" twice")), "twice"),
    ((Text(text="ask "), ME, Text(text=" about it")), "ask @tutor_bot about it"),  # not leading: it stays
    ((ME,), "@tutor_bot"),                                                    # a bare call keeps its mention
])
async def test_a_leading_bot_mention_is_set_aside_on_every_channel(
    memory: Memory, elements: tuple[Element, ...], said: str
) -> None:
    assert await _said(memory, elements) == said


async def test_a_command_after_the_mention_is_a_command_on_every_channel(memory: Memory) -> None:
    await _said(memory, (ME, Text(text=" /export")))
    _gateway, _channel, responder = memory
    assert command_of(responder.turns[-1].messages[-1]) == ("/export", "")


@pytest.mark.parametrize("text", INVISIBLE.values(), ids=INVISIBLE.keys())
async def test_an_invisible_message_is_dropped_with_its_reason_on_every_channel(memory: Memory, text: str) -> None:
    gateway, channel, responder = memory
    message = await channel.inject(text)
    await eventually(lambda: settled(gateway), what="the gateway to settle")
    assert await gateway.store.open_inbound() == []
    assert responder.turns == [] and channel.sent == []
    assert gateway.metrics.dropped.labels("memory", "acct", NOTHING_VISIBLE)._value.get() == 1
    assert message.dedup_key  # dropped, not left pending for the next start


async def test_an_image_with_an_invisible_caption_is_still_answered(memory: Memory) -> None:
    photo = Media(kind="image", url="file:///tmp/homework.jpg", name="homework.jpg", caption="\u200b")
    assert await _said(memory, (photo,), group=False) == "\u200b"
