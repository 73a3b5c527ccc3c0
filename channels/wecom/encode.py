"""Rendered parts -> AI-bot reply bodies, and the stream handle the outbox keeps.

Every answer to a learner's message is an ``aibot_respond_msg`` under the
message's ``req_id``, of msgtype ``stream``: an ``id`` WeCom groups the updates
by, the whole text so far as ``content`` (WeCom replaces, it does not append),
and ``finish``.  A reply shown only when complete is one stream sent finished.
The stream id is derived from the reply's key, so a process restarted mid-reply
finishes the stream the killed one opened instead of starting a second.

A reply with no message to answer (or whose stream WeCom no longer takes) goes
as ``aibot_send_msg``: markdown to the chat.

**The clock.**  WeCom takes a stream's updates for six minutes from the learner's
message (``reply_token_lifetime_s``).  So the referrer's token carries, besides
the ``req_id``, when the callback arrived (:class:`ReplyTo`, epoch seconds, so a
restarted process knows it too), and the stream handle carries the same time.
A token or handle from before this field existed reads as "time unknown": such a
stream is finished as before, and the 846608 fallback still catches it.  The outbound path has already
split the text at 4,096 bytes (``text_unit = "bytes"`` in platforms.toml).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from gateway.core.errors import InvalidEvent


@dataclass(frozen=True)
class ReplyTo:
    """The referrer's token: the callback's ``req_id`` and when it arrived (epoch seconds; None: not known)."""

    req_id: str
    at: float | None = None

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, token: str) -> ReplyTo:
        """A token this channel made; a bare ``req_id`` (a token stored before the clock was kept) has no time."""
        if not token.startswith("{"):
            return cls(token)
        try:
            said = json.loads(token)
            at = said.get("at")
            return cls(str(said["req_id"]), float(at) if at is not None else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InvalidEvent("wecom reply token is not one this channel made") from None


@dataclass(frozen=True)
class Stream:
    """What an open stream needs to be touched again: the message it answers, its id, the chat, and when
    the message arrived (what WeCom's time limit counts from)."""

    req_id: str
    id: str
    chat: str
    at: float | None = None

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, handle: str) -> Stream:
        try:
            said = json.loads(handle)
            at = said.get("at")
            return cls(req_id=str(said["req_id"]), id=str(said["id"]), chat=str(said["chat"]),
                       at=float(at) if at is not None else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InvalidEvent("wecom stream handle is not one this channel made") from None


def cut_point(text: str) -> str:
    """What of a stream's text so far to keep when it must finish early: up to its last line break, else
    its last space, so the rest (sent as a message) starts at a whole line or word; all of it when it has none."""
    if not text or text[-1].isspace():
        return text
    for boundary in ("\n", " "):
        at = text.rstrip().rfind(boundary)
        if at > 0:
            return text[:at + 1]
    return text


def rest_after(shown: str, final: str) -> str:
    """What of the final text the chat has not seen yet, when the stream showed ``shown`` of it.

    The final text normally begins with what was streamed; when it does not (the answer was rewritten at
    the end), the whole final text is the rest -- repeated rather than lost."""
    return final[len(shown):].lstrip() if shown and final.startswith(shown) else final


def stream_id(key: str) -> str:
    """A stream id from the reply's stable key: the same reply, the same stream."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def frame_of(req_id: str) -> dict[str, Any]:
    """The part of the inbound frame the SDK reads to answer it: its ``req_id``."""
    return {"headers": {"req_id": req_id}}


def markdown_body(text: str) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"content": text}}
