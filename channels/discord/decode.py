"""discord.py's parsed ``Message`` and ``Interaction`` -> InboundMessage.

The event id is Discord's snowflake (the message's, or the interaction's):
unique and stable, so a dispatch the Gateway replays after a RESUME, or that
arrives twice, hits the gateway's dedup and is answered once.

Where: a DM is a direct conversation; a guild text channel is a group; a
thread is its parent channel narrowed to the thread (``Conversation.thread``),
so the answer is posted in the thread and the thread is its own conversation.

Addressing in a guild: the bot is mentioned (``<@id>`` / ``<@!id>``), or the
message replies to one of the bot's messages.  Discord delivers exactly these
(and every DM) with their content even without the privileged MESSAGE_CONTENT
intent; other guild chatter then arrives with empty content and is not
addressed, so the gateway drops it by its group rule.

Attachments are carried by reference (their CDN URL as the ``MediaRef`` locator),
never downloaded before the event is durable.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import discord

from channels._kit.media import safe_name
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Element,
    EventId,
    InboundMessage,
    Media,
    MediaKind,
    MediaRef,
    Mention,
    MessageId,
    Quote,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("discord")
MENTION_RE = re.compile(r"<@!?(\d+)>")
INTERACTION = "interaction:"
"""Referrer token prefix of a slash command: ``interaction:<expiry epoch>:<interaction token>``."""


def conversation_of(channel: object) -> Conversation:
    if isinstance(channel, discord.Thread):
        return Conversation(chat=ChatId(str(channel.parent_id)), kind=ConversationKind.GROUP, thread=str(channel.id),
                            title=channel.name)
    chat = ChatId(str(getattr(channel, "id", "")))
    if isinstance(channel, (discord.DMChannel, discord.GroupChannel)) or getattr(channel, "type", None) is discord.ChannelType.private:
        return Conversation(chat=chat, kind=ConversationKind.DIRECT)
    return Conversation(chat=chat, kind=ConversationKind.GROUP, title=getattr(channel, "name", None))


def media_kind(content_type: str | None) -> MediaKind:
    major = (content_type or "").split("/")[0]
    return major if major in ("image", "audio", "video") else "file"  # type: ignore[return-value]


def _text(content: str, names: dict[str, str], me: str) -> list[Element]:
    """The content split at each ``<@id>``: text runs and mentions (the bot's own marked ``is_self``)."""
    elements: list[Element] = []
    at = 0
    for match in MENTION_RE.finditer(content):
        if match.start() > at:
            elements.append(Text(text=content[at:match.start()]))
        user = match.group(1)
        elements.append(Mention(user=UserId(user), display_name=names.get(user, ""), is_self=user == me))
        at = match.end()
    if at < len(content):
        elements.append(Text(text=content[at:]))
    return elements


def decode_message(message: discord.Message, *, account: AccountId, me: str) -> InboundMessage:
    conversation = conversation_of(message.channel)
    names = {str(u.id): u.display_name for u in message.mentions}
    elements: list[Element] = []
    resolved = message.reference.resolved if message.reference else None
    if isinstance(resolved, discord.Message):
        author = str(resolved.author.id)
        elements.append(Quote(message=MessageId(str(resolved.id)), text=resolved.content, author=UserId(author),
                              is_self=author == me))
    elements.extend(_text(message.content, names, me))
    if message.mentions and any(str(u.id) == me for u in message.mentions) and not any(
            isinstance(e, Mention) and e.is_self for e in elements) and not isinstance(resolved, discord.Message):
        elements.insert(0, Mention(user=UserId(me), is_self=True))  # mentioned without the token in the text
    elements.extend(Media.inbound(media_kind(a.content_type), MediaRef(
        locator=a.url, name=safe_name(a.filename), mime_type=a.content_type or "", size=a.size))
        for a in message.attachments)
    addressed = conversation.kind is ConversationKind.DIRECT or any(
        isinstance(e, (Mention, Quote)) and e.is_self for e in elements)
    return InboundMessage(
        event_id=EventId(str(message.id)),
        address=Address(channel=CHANNEL, account=account, conversation=conversation),
        sender=Sender(user=UserId(str(message.author.id)), display_name=message.author.display_name,
                      is_bot=message.author.bot),
        elements=tuple(elements),
        referrer=Referrer(message=MessageId(str(message.id))),
        received_at=message.created_at.astimezone(UTC),
        addressed=addressed,
        from_self=str(message.author.id) == me,
    )


def command_text(name: str, options: dict[str, str]) -> str:
    """What a slash command says, as the gateway reads text: ``/ask q`` is q; ``/stop``; ``/link CODE``."""
    if name == "ask":
        return options.get("question", "")
    return " ".join(filter(None, [f"/{name}", *options.values()]))


def decode_interaction(interaction: discord.Interaction, text: str, *, account: AccountId, token_lifetime_s: float) -> InboundMessage:
    received = interaction.created_at.astimezone(UTC)
    expires = received + timedelta(seconds=token_lifetime_s)
    return InboundMessage(
        event_id=EventId(str(interaction.id)),
        address=Address(channel=CHANNEL, account=account, conversation=conversation_of(interaction.channel)),
        sender=Sender(user=UserId(str(interaction.user.id)), display_name=interaction.user.display_name),
        elements=(Text(text=text),),
        referrer=Referrer(token=f"{INTERACTION}{int(expires.timestamp())}:{interaction.token}"),
        received_at=received,
        addressed=True,
    )


def interaction_token(referrer: Referrer, now: datetime) -> str | None:
    """The follow-up token of a slash command's referrer while it is still valid, else None."""
    token = referrer.token or ""
    if not token.startswith(INTERACTION):
        return None
    expiry, _, value = token[len(INTERACTION):].partition(":")
    return value if expiry.isdigit() and now.timestamp() < int(expiry) else None
