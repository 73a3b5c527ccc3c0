"""discord.py's parsed ``Message``, and an interaction in its JSON's shape -> InboundMessage.

An interaction reaches us two ways, parsed by discord.py off the Gateway or as
the raw JSON Discord POSTs to the interactions endpoint; both become one
:class:`InteractionPayload` and take one decode.

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
from pydantic import AliasPath, BaseModel, Field

from channels._kit.media import media_kind, safe_name
from gateway.core.errors import InvalidEvent
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
APPLICATION_COMMAND = 2
COMMANDS = ("ask", "stop", "link")
THREAD_TYPES = (10, 11, 12)
"""Channel types: announcement, public and private thread; 1 is a DM, 3 a group DM."""
DIRECT_TYPES = (1, 3)


class ChannelRef(BaseModel):
    """Where an event was said, as the interaction JSON's ``channel`` has it (or read off discord.py's object)."""

    id: str
    type: int | None = None
    parent_id: str | None = None
    name: str | None = None

    @classmethod
    def of(cls, channel: object) -> ChannelRef:
        kind = getattr(channel, "type", None)
        parent = getattr(channel, "parent_id", None)
        return cls(id=str(getattr(channel, "id", "")), type=getattr(kind, "value", kind), name=getattr(channel, "name", None),
                   parent_id=str(parent) if parent else None)

    def conversation(self) -> Conversation:
        if self.type in THREAD_TYPES and self.parent_id:
            return Conversation(chat=ChatId(self.parent_id), kind=ConversationKind.GROUP, thread=self.id, title=self.name)
        if self.type in DIRECT_TYPES:
            return Conversation(chat=ChatId(self.id), kind=ConversationKind.DIRECT)
        return Conversation(chat=ChatId(self.id), kind=ConversationKind.GROUP, title=self.name)


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
    conversation = ChannelRef.of(message.channel).conversation()
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


class UserRef(BaseModel):
    id: str
    username: str = ""
    global_name: str | None = None


class OptionRef(BaseModel):
    name: str
    value: str | int | float | bool


class CommandData(BaseModel):
    name: str
    options: list[OptionRef] = []


class InteractionPayload(BaseModel):
    """The fields of an interaction the gateway reads, the same from the Gateway and the HTTP endpoint."""

    id: str
    type: int
    token: str
    application_id: str
    channel: ChannelRef | None = None
    member_user: UserRef | None = Field(default=None, validation_alias=AliasPath("member", "user"))
    """The invoker in a server; in a DM it is ``user``."""
    user: UserRef | None = None
    data: CommandData | None = None
    locale: str = ""

    @classmethod
    def of(cls, interaction: discord.Interaction) -> InteractionPayload:
        """What discord.py parsed from the Gateway's INTERACTION_CREATE, in the JSON's shape."""
        who = interaction.user
        return cls(id=str(interaction.id), type=interaction.type.value, token=interaction.token,
                   application_id=str(interaction.application_id), channel=ChannelRef.of(interaction.channel),
                   data=interaction.data,  # type: ignore[arg-type]  # the raw dict; pydantic validates it
                   user=UserRef(id=str(who.id), username=who.name, global_name=who.global_name), locale=interaction.locale.value)


def decode_interaction(payload: InteractionPayload, *, account: AccountId, token_lifetime_s: float) -> InboundMessage:
    """A slash command as text (``command_text``); anything but ``/ask``, ``/stop``, ``/link`` is an InvalidEvent."""
    who = payload.member_user or payload.user
    if payload.type != APPLICATION_COMMAND or payload.data is None or payload.data.name not in COMMANDS:
        raise InvalidEvent(f"interaction {payload.id}: type {payload.type} "
                           f"{payload.data.name if payload.data else ''!r} is not a command the gateway answers")
    if who is None or payload.channel is None:
        raise InvalidEvent(f"interaction {payload.id} names no user or no channel")
    received = discord.utils.snowflake_time(int(payload.id)).astimezone(UTC)
    expires = received + timedelta(seconds=token_lifetime_s)
    options = {o.name: str(o.value) for o in payload.data.options}
    return InboundMessage(
        event_id=EventId(payload.id),
        address=Address(channel=CHANNEL, account=account, conversation=payload.channel.conversation()),
        sender=Sender(user=UserId(who.id), display_name=who.global_name or who.username, locale=payload.locale),
        elements=(Text(text=command_text(payload.data.name, options)),),
        referrer=Referrer(token=f"{INTERACTION}{int(expires.timestamp())}:{payload.token}"),
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
