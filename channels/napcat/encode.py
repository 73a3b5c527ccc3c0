"""Rendered parts -> OneBot actions in the array format.

The dialect is plain (platforms.toml): QQ shows no markup, so the part's text
is one ``text`` segment, after a ``reply`` segment naming the learner's message
so the answer shows as a reply to it (and, in a group, reads as meant for that
learner).  A file goes as its own message: ``image`` / ``record`` / ``file``
segments whose ``file`` is the URL, which NapCat fetches.  The outbound path
already split the text at ``text_limit`` characters.
"""

from __future__ import annotations

from typing import Any

from channels.napcat.decode import GROUP_PREFIX
from gateway.core.messages import Address, Referrer, RenderedPart

SEGMENT_OF_KIND = {"image": "image", "audio": "record", "video": "video", "file": "file"}


def target_params(target: Address) -> tuple[str, dict[str, Any]]:
    """The action and its addressee: ``send_group_msg`` with ``group_id``, or ``send_private_msg`` with ``user_id``."""
    chat = str(target.conversation.chat)
    if chat.startswith(GROUP_PREFIX):
        return "send_group_msg", {"group_id": int(chat[len(GROUP_PREFIX):])}
    return "send_private_msg", {"user_id": int(chat)}


def segments(part: RenderedPart, referrer: Referrer) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if referrer.message:
        out.append({"type": "reply", "data": {"id": str(referrer.message)}})
    if part.text:
        out.append({"type": "text", "data": {"text": part.plain or part.text}})
    for attachment in part.attachments:
        if attachment.url:
            out.append({"type": SEGMENT_OF_KIND.get(attachment.kind, "file"),
                        "data": {"file": attachment.url, "name": attachment.name}})
    return out
