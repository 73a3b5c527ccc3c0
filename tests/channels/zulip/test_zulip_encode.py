"""Where a reply goes on Zulip, and its LaTeX as the model wrote it after the gateway's Markdown renderer."""

from __future__ import annotations

import pytest

from channels.zulip.channel import ZulipChannel
from channels.zulip.encode import where
from gateway.core.errors import BadRequest
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind
from gateway.render import render_reply


def to(chat: str, kind: ConversationKind = ConversationKind.DIRECT, thread: str | None = None) -> Address:
    return Address(channel=ChannelName("zulip"), account=AccountId("school"),
                   conversation=Conversation(chat=ChatId(chat), kind=kind, thread=thread))


def test_a_person_a_group_dm_and_a_topic_are_each_addressed_as_zulip_takes_them():
    assert (where(to("8"), default_topic="tutor").kind, where(to("8"), default_topic="tutor").to) == ("private", [8])
    assert where(to("dm:8,9,100", ConversationKind.GROUP), default_topic="tutor").to == [8, 9, 100]
    topic = where(to("stream:3", ConversationKind.GROUP, "homework 3"), default_topic="tutor")
    assert (topic.kind, topic.to, topic.topic) == ("stream", 3, "homework 3")
    assert where(to("stream:3", ConversationKind.GROUP), default_topic="tutor").topic == "tutor"
    assert topic.typing() == {"type": "stream", "stream_id": 3, "topic": "homework 3"}


def test_a_chat_that_is_no_zulip_conversation_is_a_bad_request():
    with pytest.raises(BadRequest):
        where(to("someone@example.org"), default_topic="tutor")


@pytest.mark.parametrize("written", [
    "Area $$\\pi r^2$$ and $$x_1 * x_2 < y_{[0]}$$ here.",
    "Sets $$\\{x \\mid x > 0\\}$$, $$a \\\\ b$$ and $$\\frac{1}{2}\\,\\text{m}$$.",
    "$$\n\\sum_{i=1}^n i = \\frac{n(n+1)}{2}\n$$",
    "```math\n\\int_0^1 x_1^2 \\, dx\n```",
])
def test_math_reaches_zulip_as_written_through_the_markdown_renderer(written):
    [part] = render_reply(written, ZulipChannel.capabilities())
    assert part == written
