"""The message vocabulary every channel and the brain speak.

This is a leaf module: it imports nothing from the rest of the project, so a
channel can depend on it without knowing the brain, and the brain without
knowing any platform.

Content is a sequence of *elements* from a small closed vocabulary.  Each
element kind has a written degradation rule (see ``gateway.render.degrade``)
for platforms that cannot show it, so a channel never has to invent one.

A platform hands us an *event*; the pair (channel, account, event id) is the
dedup key.  Every inbound message carries an opaque :class:`Referrer` --
whatever that platform needs to answer (message id, reply token, session
webhook) and when that stops working -- which rides untouched to the reply.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from enum import Enum
from typing import Annotated, Literal, NewType

from pydantic import BaseModel, ConfigDict, Field

ChannelName = NewType("ChannelName", str)
"""A platform id and config key: ``telegram``, ``email``, ``webchat``."""
AccountId = NewType("AccountId", str)
"""Which bot, app or inbox of that channel (a gateway runs many)."""
ChatId = NewType("ChatId", str)
UserId = NewType("UserId", str)
MessageId = NewType("MessageId", str)
EventId = NewType("EventId", str)
PartnerId = NewType("PartnerId", str)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- who and where


class ConversationKind(str, Enum):
    DIRECT = "direct"
    GROUP = "group"


class Conversation(_Frozen):
    """Where a message was said: a chat, optionally narrowed to a thread or topic."""

    chat: ChatId
    kind: ConversationKind
    thread: str | None = None
    title: str | None = None

    @property
    def key(self) -> str:
        """Stable key within one channel account; a thread is its own conversation."""
        return self.chat if self.thread is None else f"{self.chat}/{self.thread}"


class Sender(_Frozen):
    user: UserId
    display_name: str = ""
    is_bot: bool = False
    locale: str = ""
    """The language the platform says the sender uses (a BCP-47 tag such as ``zh-CN``), empty when it
    does not say; it picks the language of the gateway's own notices (:mod:`gateway.core.phrases`)."""


class Address(_Frozen):
    """A channel account plus a conversation: everything needed to say where."""

    channel: ChannelName
    account: AccountId
    conversation: Conversation

    @property
    def conversation_key(self) -> str:
        return f"{self.channel}:{self.account}:{self.conversation.key}"


# --------------------------------------------------------------------------- elements


class Style(str, Enum):
    BOLD = "bold"
    ITALIC = "italic"
    STRIKE = "strike"
    CODE = "code"


class Text(_Frozen):
    """Plain text with optional inline styles that apply to the whole run."""

    kind: Literal["text"] = "text"
    text: str
    styles: frozenset[Style] = frozenset()


class Mention(_Frozen):
    kind: Literal["mention"] = "mention"
    user: UserId
    display_name: str = ""
    is_self: bool = False
    """True when this mentions the bot's own account (the addressing signal)."""


class Link(_Frozen):
    kind: Literal["link"] = "link"
    url: str
    text: str = ""


MediaKind = Literal["image", "audio", "video", "file"]
"""What a file is, for the channels that send each kind differently (a photo, a voice note, a document)."""


class MediaRef(_Frozen):
    """Where the platform keeps an inbound file, and what it declared about it, before anything is fetched.

    A channel decodes this and nothing more: the event is made durable and acknowledged first, and a
    pipeline step fetches the file afterwards through the channel (``Channel.fetch_media``) into the blob
    store.  ``locator`` is the channel's own: a Telegram ``file_id``, a Matrix ``mxc://`` URL, a Slack
    ``url_private``.  The declared size and type are the sender's word, checked against what arrives."""

    locator: str
    size: int | None = None
    mime_type: str = ""
    name: str = ""


class Media(_Frozen):
    """An image, audio clip, video or file.

    Inbound, ``ref`` says where the platform keeps it; once fetched, ``blob`` is its key in the blob store
    (``gateway.blobs``) and ``size``/``mime_type`` are what arrived; a file that could not be fetched keeps
    no blob and says why in ``missing``, which the model reads as a note (:func:`plain_text`).  Outbound
    (a degraded attachment), ``url`` is where it can be seen."""

    kind: MediaKind
    url: str | None = None
    ref: MediaRef | None = None
    blob: str | None = None
    missing: str = ""
    """Why the file is not in the blob store ("too large (25.0 MB > 20.0 MB)"); empty when it is, or not yet tried."""
    name: str = ""
    mime_type: str = ""
    size: int | None = None
    caption: str = ""

    @classmethod
    def inbound(cls, kind: MediaKind, ref: MediaRef, *, caption: str = "") -> Media:
        """A file the platform announced: what it declared, nothing fetched yet."""
        return cls(kind=kind, ref=ref, name=ref.name, mime_type=ref.mime_type, size=ref.size, caption=caption)

    @property
    def awaiting_fetch(self) -> bool:
        """Announced by the platform, neither fetched nor given up on yet."""
        return self.ref is not None and self.blob is None and not self.missing


class Quote(_Frozen):
    """A reply to (or quote of) an earlier message."""

    kind: Literal["quote"] = "quote"
    message: MessageId
    text: str = ""
    author: UserId | None = None
    is_self: bool = False
    """True when the quoted message is the bot's own (a reply to the bot)."""


class Emoji(_Frozen):
    """A platform emoji or sticker; ``fallback`` is what to show where it cannot be."""

    kind: Literal["emoji"] = "emoji"
    name: str
    fallback: str = ""
    platform_ref: str | None = None


Element = Annotated[Text | Mention | Link | Media | Quote | Emoji, Field(discriminator="kind")]
ELEMENT_KINDS: tuple[str, ...] = ("text", "mention", "link", "image", "audio", "video", "file", "quote", "emoji")


_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Mn", "Me"})
_BLANK_GLYPHS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"})
_SEPARATOR = re.compile(r"^\s*(?:[,:](?=\s|$))?\s*")
"""What may stand between a leading "@bot" and what is said to it: "@bot hi", "@bot, hi", "Tutor: hi"."""


def has_visible(text: str) -> bool:
    """Whether ``text`` shows a reader anything at all.

    ``str.strip()`` is not that test: it keeps U+200B, U+FEFF, U+2060 and every
    other format character, which chat apps show as an empty bubble or refuse.
    Invisible here: whitespace and separators (Z*), controls (Cc), format
    characters (Cf: zero-width space and joiners, BOM, bidi marks and isolates,
    tag characters), surrogates, combining marks (Mn, Me: with no base letter a
    dotted circle at best), and the letters that render as blank space (the
    Hangul fillers, the braille blank).  Private-use and unassigned code points
    count as visible: they draw a glyph or a box.
    """
    return any(ch not in _BLANK_GLYPHS and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES for ch in text)


def without_bot_mention(elements: tuple[Element, ...]) -> tuple[Element, ...]:
    """The elements without a leading mention of the bot and the separator after it.

    Channels decode faithfully ("@tutor_bot /export" is a mention, then " /export");
    what was *said* to the bot -- the command, the model's input -- is "/export", on
    every channel alike.  Quotes come first in some decodes and are not text, so the
    mention is looked for after them.  A mention elsewhere stays ("ask @tutor_bot
    about it"), and a message that is only the mention keeps it: a bare "@tutor_bot"
    is a call for attention, not an empty message.
    """
    start = next((i for i, e in enumerate(elements) if not isinstance(e, Quote)), len(elements))
    rest = list(elements[start:])
    if not (rest and isinstance(rest[0], Mention) and rest[0].is_self):
        return elements
    while rest and isinstance(rest[0], Mention) and rest[0].is_self:
        rest = rest[1:]
        while rest and isinstance(rest[0], Text):
            text = _SEPARATOR.sub("", rest[0].text, count=1)
            if text:
                rest[0] = Text(text=text)
                break
            rest = rest[1:]
    if not any(isinstance(e, Media) for e in rest) and not has_visible(plain_text(rest)):
        return elements
    return (*elements[:start], *rest)


_A_KIND: dict[str, str] = {"image": "an image", "audio": "an audio clip", "video": "a video", "file": "a file"}


def missing_note(media: Media) -> str:
    """What the model reads about a file it cannot see: "the learner sent an image (cat.jpg) that could
    not be fetched: too large (25.0 MB > 20.0 MB)", so the partner can say so instead of pretending."""
    named = f" ({media.name})" if media.name else ""
    return f"the learner sent {_A_KIND[media.kind]}{named} that could not be fetched: {media.missing}"


def plain_text(elements: tuple[Element, ...] | list[Element]) -> str:
    """What a reader would see if every element were flattened to text."""
    parts: list[str] = []
    for element in elements:
        if isinstance(element, Text):
            parts.append(element.text)
        elif isinstance(element, Mention):
            parts.append(f"@{element.display_name or element.user}")
        elif isinstance(element, Link):
            parts.append(element.text or element.url)
        elif isinstance(element, Media):
            parts.append(element.caption or f"[{element.kind}{': ' + element.name if element.name else ''}]")
            if element.missing:
                parts.append(f" [{missing_note(element)}]")
        elif isinstance(element, Emoji):
            parts.append(element.fallback or f":{element.name}:")
    return "".join(parts)


# --------------------------------------------------------------------------- inbound


class Referrer(_Frozen):
    """Whatever the platform needs to answer this message, opaque to the core.

    ``token`` is a JSON-safe string the channel alone interprets (a reply token,
    a session webhook URL, a context token).  ``expires_at`` is when answering
    through it stops working; the outbound path reads it to refuse a late send
    with a clear reason instead of a platform error.
    """

    message: MessageId | None = None
    token: str | None = None
    expires_at: datetime | None = None


class InboundMessage(_Frozen):
    """One normalized message a platform handed us."""

    event_id: EventId
    address: Address
    sender: Sender
    elements: tuple[Element, ...] = ()
    referrer: Referrer = Referrer()
    received_at: datetime
    addressed: bool = False
    """The channel's verdict that the bot was addressed (mention, reply to it, command)."""
    from_self: bool = False
    """The bot's own message echoed back by the platform; never answered."""
    source: str = ""
    """Where the sender is on the network, for a channel whose sender ids cost nothing to make (web chat:
    a keyed hash of the client address, never the address).  Pending pairing codes are bounded per
    source, so one visitor minting identities cannot use up every code; empty: the whole account."""

    @property
    def text(self) -> str:
        """What was said to the bot, flattened: a leading mention of it is set aside (:func:`without_bot_mention`)."""
        return plain_text(without_bot_mention(self.elements))

    @property
    def dedup_key(self) -> tuple[str, str, str]:
        return (self.address.channel, self.address.account, self.event_id)


# --------------------------------------------------------------------------- outbound


class Attachment(_Frozen):
    kind: MediaKind
    url: str | None = None
    path: str | None = None
    name: str = ""
    mime_type: str = ""


class StreamState(str, Enum):
    """Where a reply is in its life: a growing preview, or the final text."""

    STREAMING = "streaming"
    FINAL = "final"


class ReplyAuthor(str, Enum):
    """Whose words a reply carries: the console's transcript names them, the platform never sees it."""

    PARTNER = "partner"
    """The partner's answer (a turn, its greeting, a reminder it set)."""
    TEACHER = "teacher"
    """What a teacher wrote to the learner during a takeover."""
    GATEWAY = "gateway"
    """The gateway's own notice (a refusal, the hand-back, a confirmation to a teacher)."""


class OutboundReply(_Frozen):
    """A reply as the brain wrote it: Markdown plus attachments, not yet rendered."""

    idempotency_key: str
    target: Address
    referrer: Referrer = Referrer()
    markdown: str
    attachments: tuple[Attachment, ...] = ()
    state: StreamState = StreamState.FINAL
    in_reply_to: tuple[EventId, ...] = ()
    """The inbound events this reply answers (one reply may answer a coalesced burst)."""
    language: str = ""
    """The catalogue language of the conversation (:func:`gateway.core.phrases.language_for`), for what
    delivery itself may have to say in the reply's place (its apology).  It rides in the outbox row's
    payload with the rest of the reply; empty (a writer that does not know, a row written before it
    existed) means delivery asks the partner bound there, and falls back to English."""
    author: ReplyAuthor = ReplyAuthor.PARTNER
    """Whose words these are; a row written before it existed was the partner's or a notice."""


class RenderedPart(_Frozen):
    """One platform-ready piece of a reply: text in the channel's dialect, within its limit, or one file.

    ``text`` is the dialect markup; ``plain`` is what a reader sees of it, rendered from the same
    Markdown tree in the same pass (never re-parsed from the markup): the body for a client that
    shows no markup (Matrix ``body``, email's ``text/plain``) and the fallback when a platform
    refuses the markup.  An *attachment part* carries one file in ``attachments`` and no text;
    each is a part of its own, with its own index and so its own idempotency key.  Only a
    platform that carries files inside the text message (email's MIME parts,
    ``ChannelCapabilities.media_with_text``) gets them on the last text part instead.
    """

    index: int
    text: str
    plain: str = ""
    attachments: tuple[Attachment, ...] = ()
    final: bool = True
    """False for a streamed preview that later edits will replace."""

    @property
    def attachment(self) -> Attachment | None:
        """The file of an attachment part (a part with no text and one file), else None."""
        return self.attachments[0] if len(self.attachments) == 1 and not self.text else None


class SentMessage(_Frozen):
    """What a platform said about a message we sent: its id, and the channel's handle for later edits.

    ``handle`` is opaque to everyone but the channel that made it: the outbox stores it and hands it
    back to :meth:`channels.base.Channel.edit` (or to a stream's ``finish``) -- so nothing a channel
    needs later is packed into ``message``.  Empty means "the message id is the handle"."""

    message: MessageId
    handle: str = ""

    @property
    def ref(self) -> str:
        """The handle to store: the channel's own, else the message id."""
        return self.handle or self.message


class StreamHandle(_Frozen):
    """A native stream the channel opened (``Channel.start``): where it is and the channel's handle.

    ``handle`` is opaque and JSON-safe; the outbox stores it, so a turn re-run after a crash
    finishes the same stream."""

    target: Address
    referrer: Referrer = Referrer()
    handle: str


class StreamChunk(_Frozen):
    """What a native stream is handed at each step: the Markdown added since the last step, and the
    whole answer so far rendered as the first part (for platforms whose primitive takes the whole text).
    ``delta`` is empty when the answer so far does not extend what was already appended."""

    delta: str
    so_far: RenderedPart
