"""Telegram update -> InboundMessage.

The event id is the update's ``update_id``: Telegram hands an unconfirmed
update out again with the same id, so the gateway's (channel, account, event
id) dedup key catches every redelivery.

A forum topic is its own conversation (``Conversation.thread`` is the
``message_thread_id``), so replies land in the topic they were asked in.

Addressing follows what privacy mode lets a bot see in groups: a mention of
the bot (``@name`` or a text mention), a reply to one of its messages, or a
command (``/help``, or ``/help@this_bot`` -- a command for another bot is
not ours).  In a private chat the bot is always addressed.  Inside a forum
topic every message "replies" to the topic's creation message; that is not a
reply to anyone and is not kept as a quote.

Media arrive as :class:`Media` elements holding a :class:`MediaRef` (the
``file_id`` and what Telegram declared); nothing is downloaded before the ack:
the pipeline fetches them afterwards (:mod:`channels.telegram.media`).
"""

from __future__ import annotations

from telegram import Message, MessageEntity, Update, User

from channels._kit.media import safe_name
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
    Link,
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

CHANNEL = ChannelName("telegram")
_FILE_KINDS: tuple[tuple[str, MediaKind], ...] = (("document", "file"), ("voice", "audio"), ("audio", "audio"), ("video", "video"))
"""Message attributes that carry a file, and what kind of file each is."""


def _slice(text: str, offset: int, length: int) -> str:
    """Entity offsets and lengths are in UTF-16 code units."""
    raw = text.encode("utf-16-le")
    return raw[offset * 2: (offset + length) * 2].decode("utf-16-le")


def _command_for_us(command: str, me: User) -> bool:
    _, _, target = command.partition("@")
    return not target or target.lower() == (me.username or "").lower()


def _elements(text: str, entities: tuple[MessageEntity, ...], me: User) -> tuple[list[Element], bool]:
    """Text and its entities as elements; also whether a mention or command addresses the bot."""
    elements: list[Element] = []
    addressed = False
    position = 0  # in UTF-16 units
    total = len(text.encode("utf-16-le")) // 2
    for entity in sorted(entities, key=lambda e: e.offset):
        if entity.offset < position:
            continue  # nested entities (bold inside a link): the outer one already covered it
        said = _slice(text, entity.offset, entity.length)
        element: Element | None = None
        if entity.type == MessageEntity.MENTION:
            is_self = said[1:].lower() == (me.username or "").lower()
            element = Mention(user=UserId(str(me.id) if is_self else said[1:]), display_name=said[1:], is_self=is_self)
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            is_self = entity.user.id == me.id
            element = Mention(user=UserId(str(entity.user.id)), display_name=said, is_self=is_self)
        elif entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            addressed = addressed or _command_for_us(said, me)
            element = Text(text=said.partition("@")[0])
        elif entity.type == MessageEntity.TEXT_LINK and entity.url:
            element = Link(url=entity.url, text=said)
        if element is None:
            continue
        if entity.offset > position:
            elements.append(Text(text=_slice(text, position, entity.offset - position)))
        elements.append(element)
        addressed = addressed or getattr(element, "is_self", False)
        position = entity.offset + entity.length
    rest = _slice(text, position, total - position)
    # The separator after a leading "@bot" stays: the shared path sets the mention aside
    # (InboundMessage.text), and without it the plain text would read "@botword".
    if rest:
        elements.append(Text(text=rest))
    return elements, addressed


def _media(message: Message) -> list[Media]:
    if message.photo:
        biggest = message.photo[-1]
        return [Media.inbound("image", MediaRef(locator=biggest.file_id, name=f"{biggest.file_unique_id}.jpg",
                                                mime_type="image/jpeg", size=biggest.file_size))]
    found: list[Media] = []
    for attr, kind in _FILE_KINDS:
        item = getattr(message, attr, None)
        if item is not None:
            name = safe_name(given) if (given := getattr(item, "file_name", None)) else ""
            found.append(Media.inbound(kind, MediaRef(locator=item.file_id, name=name, size=item.file_size,
                                                      mime_type=getattr(item, "mime_type", None) or "")))
    return found


def _quote(message: Message, me: User) -> Quote | None:
    quoted = message.reply_to_message
    if quoted is None or quoted.forum_topic_created is not None:
        return None
    author = quoted.from_user
    return Quote(message=MessageId(str(quoted.message_id)), text=quoted.text or quoted.caption or "",
                 author=UserId(str(author.id)) if author else None, is_self=bool(author and author.id == me.id))


def decode(update: Update, *, account: AccountId, me: User) -> InboundMessage:
    """Decode one update; raise InvalidEvent with the reason when it cannot be."""
    message = update.message
    if message is None:
        kinds = sorted(k for k in update.to_dict() if k != "update_id") or ["nothing"]
        raise InvalidEvent(f"telegram update {update.update_id} carries {', '.join(kinds)}, not a new message")
    chat = message.chat
    if chat.type == chat.CHANNEL:
        raise InvalidEvent(f"telegram update {update.update_id} is a channel post; channels are not conversations")
    kind = ConversationKind.DIRECT if chat.type == chat.PRIVATE else ConversationKind.GROUP
    thread = str(message.message_thread_id) if message.is_topic_message and message.message_thread_id else None
    author = message.from_user
    if author is not None:
        sender = Sender(user=UserId(str(author.id)), display_name=author.full_name, is_bot=author.is_bot,
                        locale=author.language_code or "")
    elif message.sender_chat is not None:  # an anonymous group admin, or a linked channel
        sender = Sender(user=UserId(str(message.sender_chat.id)), display_name=message.sender_chat.title or "")
    else:
        raise InvalidEvent(f"telegram update {update.update_id} has a message without a sender")
    text = message.text or message.caption or ""
    entities = tuple(message.entities or message.caption_entities or ())
    elements, addressed = _elements(text, entities, me)
    media = _media(message)
    if not elements and not media:
        raise InvalidEvent(f"telegram update {update.update_id} has nothing the gateway can read (no text, caption or media)")
    quote = _quote(message, me)
    if quote is not None:
        elements.insert(0, quote)
    return InboundMessage(
        event_id=EventId(str(update.update_id)),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=ChatId(str(chat.id)), kind=kind, thread=thread, title=chat.title or chat.full_name)),
        sender=sender,
        elements=(*media, *elements),
        referrer=Referrer(message=MessageId(str(message.message_id))),
        received_at=message.date,
        addressed=kind is ConversationKind.DIRECT or addressed or bool(quote and quote.is_self),
        from_self=author is not None and author.id == me.id,
    )
