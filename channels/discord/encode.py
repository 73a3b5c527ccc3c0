"""Rendered parts -> what discord.py sends: content, files, image embeds, reply reference, allowed mentions.

The renderer has already written Discord markdown within 2,000 UTF-16 units;
this module only decides how each attachment travels.  A file on disk is
uploaded (multipart ``files[n]``; the delivery's budget already moved one over
``media_max_bytes`` into the text); an image known only by URL is shown as an embed image; any
other URL-only attachment goes as its link on a line of its own.

Mentions in the model's text never ping ``@everyone``, ``@here`` or roles: only
users, and the learner being replied to.

``nonce`` is Discord's send deduplication: with ``enforce_nonce`` (which
discord.py sets), a second message with the same nonce from the bot within a
few minutes returns the first instead of posting again, so a retry after a lost
answer shows one message.  It must be at most 25 characters; the idempotency key
is hashed to 24.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import discord

from gateway.core.messages import RenderedPart

MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True)


def nonce_for(idempotency_key: str) -> str:
    return hashlib.blake2b(idempotency_key.encode(), digest_size=12).hexdigest()


@dataclass
class Outgoing:
    content: str
    files: list[discord.File] = field(default_factory=list)
    embeds: list[discord.Embed] = field(default_factory=list)

    def send_kwargs(self) -> dict:
        kwargs: dict = {"content": self.content or None, "allowed_mentions": MENTIONS}
        if self.files:
            kwargs["files"] = self.files
        if self.embeds:
            kwargs["embeds"] = self.embeds
        return kwargs


def outgoing(part: RenderedPart) -> Outgoing:
    out = Outgoing(content=part.text)
    links: list[str] = []
    for attachment in part.attachments:
        if attachment.path:  # its size was checked against media_max_bytes by the delivery's budget, once
            out.files.append(discord.File(attachment.path, filename=attachment.name or os.path.basename(attachment.path)))
        elif attachment.url and attachment.kind == "image" and len(out.embeds) < 10:
            out.embeds.append(discord.Embed().set_image(url=attachment.url))
        elif attachment.url:
            links.append(attachment.url)
    if links:
        out.content = "\n".join(filter(None, [out.content, *links]))
    return out
