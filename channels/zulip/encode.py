"""Rendered parts -> Zulip's ``POST /messages`` parameters; the only place that knows Zulip's Markdown.

**Where.**  The conversation says it (decode.py): a person's user id is a
one-to-one DM (``type=private``, ``to=[id]``); ``dm:<ids>`` a group DM; and
``stream:<id>`` a stream message into the conversation's topic (its thread), so
an answer stays in the topic it answers.  ``private`` rather than ``direct``:
every Zulip server takes the older word, only 7.0 and later the newer one.

**LaTeX.**  Zulip renders ``$$...$$`` as inline math and a fenced ``math``
block as display math, from the raw text.  Both reach this module as written:
the gateway's Markdown parser keeps ``$$...$$`` as one math span
(``gateway.render.markdown.Math``), which the Markdown dialect writes back
verbatim, and a fence is code.  So the part's text is the message's content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.zulip.decode import GROUP_DM, STREAM
from gateway.core.errors import BadRequest
from gateway.core.messages import Address

PLATFORM = "zulip"


@dataclass(frozen=True)
class Where:
    """``POST /messages``'s addressing: type, to, and the topic of a stream message."""

    kind: str
    to: Any
    topic: str | None = None

    def typing(self) -> dict[str, Any]:
        """``POST /typing``'s addressing for the same place."""
        if self.kind == "stream":
            return {"type": "stream", "stream_id": self.to, "topic": self.topic or ""}
        return {"type": "private", "to": self.to}


def where(target: Address, *, default_topic: str) -> Where:
    conversation = target.conversation
    chat = str(conversation.chat)
    try:
        if chat.startswith(STREAM):
            return Where("stream", int(chat.removeprefix(STREAM)), conversation.thread or default_topic)
        if chat.startswith(GROUP_DM):
            return Where("private", [int(p) for p in chat.removeprefix(GROUP_DM).split(",")])
        return Where("private", [int(chat)])
    except ValueError:
        raise BadRequest(PLATFORM, f"not a Zulip conversation: {chat[:60]!r}") from None

