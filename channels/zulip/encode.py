"""Rendered parts -> Zulip's ``POST /messages`` parameters; the only place that knows Zulip's Markdown.

**Where.**  The conversation says it (decode.py): a person's user id is a
one-to-one DM (``type=private``, ``to=[id]``); ``dm:<ids>`` a group DM; and
``stream:<id>`` a stream message into the conversation's topic (its thread), so
an answer stays in the topic it answers.  ``private`` rather than ``direct``:
every Zulip server takes the older word, only 7.0 and later the newer one.

**LaTeX.**  Zulip renders ``$$...$$`` as inline math and a fenced ``math``
block as display math, from the raw text.  The gateway's Markdown renderer
escapes ASCII punctuation in text (``x_1`` becomes ``x\\_1``), which KaTeX would
then read as a literal underscore.  A fence is code and comes through as written;
inside ``$$...$$`` spans this module takes back the backslashes the renderer
added -- every ``\\`` before ASCII punctuation -- so the learner sees the
formula the model wrote.  Code spans and fences are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from channels.zulip.decode import GROUP_DM, STREAM
from gateway.core.errors import BadRequest
from gateway.core.messages import Address

PLATFORM = "zulip"
_FENCE = re.compile(r"(?ms)^(```|~~~).*?^\1[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_MATH = re.compile(r"(?<!\$)\$\$(?!\$)(.+?)(?<!\$)\$\$(?!\$)", re.S)
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


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


def _unescape_math(text: str) -> str:
    return _MATH.sub(lambda m: "$$" + _ESCAPE.sub(r"\1", m.group(1)) + "$$", text)


def content(text: str) -> str:
    """The part's Markdown with ``$$`` math as written; fences and code spans untouched."""
    out, at = [], 0
    for block in _FENCE.finditer(text):
        out.append(_outside_code_spans(text[at:block.start()]))
        out.append(block.group(0))
        at = block.end()
    out.append(_outside_code_spans(text[at:]))
    return "".join(out)


def _outside_code_spans(text: str) -> str:
    out, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_unescape_math(text[at:span.start()]))
        out.append(span.group(0))
        at = span.end()
    out.append(_unescape_math(text[at:]))
    return "".join(out)
