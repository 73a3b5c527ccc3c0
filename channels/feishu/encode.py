"""Rendered parts -> Feishu message bodies, and the streaming card's handle the outbox keeps.

Text goes as rich text (``msg_type: post``) holding one ``md`` tag: Feishu renders the Markdown the
renderer wrote (bold, italics, lists, links, code).  In a group the first part mentions the asker
(``<at user_id="ou_..."></at>``), so the answer reaches them among many.  A streamed answer is a CardKit
card (JSON 2.0) in ``streaming_mode`` with one markdown element whose text is replaced as it grows;
Feishu types out the difference.  The card, the message showing it and every update carry ids
derived from the reply's key, so a process restarted mid-reply touches the card the killed one made.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from gateway.core.errors import InvalidEvent

ELEMENT = "answer"
"""The streaming card's one markdown element."""


def uuid_of(key: str, *more: object) -> str:
    """A send's ``uuid`` (≤ 50 characters) from the reply's stable key: the same send, the same uuid."""
    return hashlib.sha256("|".join([key, *map(str, more)]).encode()).hexdigest()[:32]


def post(text: str, *, mention: str | None = None) -> dict[str, Any]:
    lead = f'<at user_id="{mention}"></at> ' if mention else ""
    return {"zh_cn": {"content": [[{"tag": "md", "text": lead + text}]]}}


def streaming_card(text: str, *, mention: str | None = None) -> dict[str, Any]:
    """A card in streaming mode; ``mention`` shows at its top (card markdown's ``<at id=...>``)."""
    elements: list[dict[str, Any]] = []
    if mention:
        elements.append({"tag": "markdown", "content": f"<at id={mention}></at>"})
    elements.append({"tag": "markdown", "element_id": ELEMENT, "content": text})
    return {"schema": "2.0", "config": {"streaming_mode": True, "summary": {"content": "…"},
                                        "streaming_config": {"print_strategy": "fast"}},
            "body": {"elements": elements}}


def card_message(card_id: str) -> dict[str, Any]:
    return {"type": "card", "data": {"card_id": card_id}}


def link_post(name: str, url: str) -> dict[str, Any]:
    """A file known only by its URL: a link to it (an upload needs the bytes, and no URL a model wrote is fetched)."""
    return {"zh_cn": {"content": [[{"tag": "a", "text": name or url, "href": url}]]}}


@dataclass(frozen=True)
class Card:
    """An open streaming card: its id, the message showing it, and when it was made (its sequences count from there)."""

    id: str
    message: str
    born_ms: int

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, handle: str) -> Card:
        try:
            said = json.loads(handle)
            return cls(id=str(said["id"]), message=str(said["message"]), born_ms=int(said["born_ms"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidEvent("feishu card handle is not one this channel made") from None
