"""Rendered parts -> AI-bot reply bodies, and the stream handle the outbox keeps.

Every answer to a learner's message is an ``aibot_respond_msg`` under the
message's ``req_id``, of msgtype ``stream``: an ``id`` WeCom groups the updates
by, the whole text so far as ``content`` (WeCom replaces, it does not append),
and ``finish``.  A reply shown only when complete is one stream sent finished.
The stream id is derived from the reply's key, so a process restarted mid-reply
finishes the stream the killed one opened instead of starting a second.

A reply with no message to answer (or whose stream WeCom no longer takes) goes
as ``aibot_send_msg``: markdown to the chat.  The outbound path has already
split the text at 4,096 bytes (``text_unit = "bytes"`` in platforms.toml).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from gateway.core.errors import InvalidEvent


@dataclass(frozen=True)
class Stream:
    """What an open stream needs to be touched again: the message it answers, its id, and the chat."""

    req_id: str
    id: str
    chat: str

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, handle: str) -> Stream:
        try:
            said = json.loads(handle)
            return cls(req_id=str(said["req_id"]), id=str(said["id"]), chat=str(said["chat"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidEvent("wecom stream handle is not one this channel made") from None


def stream_id(key: str) -> str:
    """A stream id from the reply's stable key: the same reply, the same stream."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def frame_of(req_id: str) -> dict[str, Any]:
    """The part of the inbound frame the SDK reads to answer it: its ``req_id``."""
    return {"headers": {"req_id": req_id}}


def markdown_body(text: str) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"content": text}}
