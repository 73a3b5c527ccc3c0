"""A received mail -> InboundMessage, with the stdlib ``email`` package doing all MIME parsing.

Identity and threading:

- the event id is the ``Message-ID``: the same mail fetched again (a restart,
  a changed UIDVALIDITY, a second copy) keeps it, so the gateway's dedup
  answers it once.  Mail without one gets a hash of its bytes instead;
- the conversation is (sender address, thread root), the root being the first
  ``References`` id, else ``In-Reply-To``, else the mail's own id: every mail
  of a thread lands in one conversation, and two learners never share one;
- the learner's language is the mail's ``Accept-Language`` (RFC 3282: the languages the
  sender would like answers in, weighted), else the ``Content-Language`` of the mail or of the
  text part read (the language the learner wrote in); it becomes ``Sender.locale``;
- what the reply needs (subject, references, the quoted text, the date and
  name for "On <date>, <name> wrote:") rides in the :class:`Referrer` token.

Attachments become Media elements whose reference is the MIME part
(``part:<n>``).  Unlike a chat platform's file id, nothing is left to fetch:
IMAP handed the whole mail over, so the bytes of each part within
``media_max_bytes`` ride along in :attr:`Received.parts` and the channel puts
them straight into the blob store; a larger part is kept as a note
(``Media.missing``) the model reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import getaddresses, parseaddr

from channels._kit.media import media_kind, safe_name
from channels.email.plaintext import html_to_text
from gateway.core.errors import InvalidEvent, TooLarge
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
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)
from gateway.languages import preferred_language

CHANNEL = ChannelName("email")
MSGID = re.compile(r"<[!-;=?-~]+>")
"""A message id: printable ASCII in angle brackets (RFC 5322), as our replies carry it verbatim in headers."""
QUOTE_CHARS = 2000
MAX_REFERENCES = 20
ATTRIBUTION = re.compile(r"^(On .{3,200} wrote:|-+ ?Original Message ?-+)\s*$", re.M)


@dataclass(frozen=True)
class Received:
    """A parsed mail before screening: the sender, and the message it becomes."""

    sender: str
    mail: EmailMessage
    message: InboundMessage
    parts: dict[str, bytes] = field(default_factory=dict)
    """The bytes of each attachment within the limit, by its ``MediaRef.locator``, for the blob store."""


def message_ids(value: object) -> list[str]:
    return MSGID.findall(str(value or ""))


def thread_root(mail: EmailMessage, own_id: str) -> str:
    references = message_ids(mail.get("References"))
    if references:
        return references[0]
    in_reply_to = message_ids(mail.get("In-Reply-To"))
    return in_reply_to[0] if in_reply_to else own_id


def event_id_of(mail: EmailMessage, raw: bytes) -> str:
    ids = message_ids(mail.get("Message-ID"))
    return ids[0] if ids else "sha256:" + hashlib.sha256(raw).hexdigest()


def strip_quoted(text: str) -> str:
    """The new part of a reply: drop the quoted history under an "On ... wrote:" line and trailing '>' lines."""
    match = ATTRIBUTION.search(text)
    if match and match.start() > 0:
        text = text[: match.start()]
    lines = text.rstrip().splitlines()
    while lines and lines[-1].lstrip().startswith(">"):
        lines.pop()
    return "\n".join(lines).strip()


def body_text(mail: EmailMessage) -> str:
    part = mail.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # unknown charset, broken transfer encoding
        payload = part.get_payload(decode=True)  # bytes for the text part get_body chose (never multipart)
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    return html_to_text(content) if part.get_content_type() == "text/html" else content.replace("\r\n", "\n")


def attachments(mail: EmailMessage, max_bytes: int) -> tuple[list[Element], dict[str, bytes]]:
    """Each attachment as a Media element, and the bytes of those within ``max_bytes`` by locator."""
    elements: list[Element] = []
    parts: dict[str, bytes] = {}
    for index, part in enumerate(mail.iter_attachments(), 1):
        name = safe_name(part.get_filename() or "", fallback=f"attachment-{index}")
        content_type = part.get_content_type()
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue  # an attached message/rfc822: its text is not homework we can keep as a file
        ref = MediaRef(locator=f"part:{index}", size=len(payload), mime_type=content_type, name=name)
        media = Media.inbound(media_kind(content_type), ref)
        if len(payload) > max_bytes:
            media = media.model_copy(update={"missing": TooLarge("email", max_bytes, len(payload)).detail})
        else:
            parts[ref.locator] = payload
        elements.append(media)
    return elements, parts


def referrer_for(mail: EmailMessage, event_id: str, name: str, text: str, reply_to: str | None) -> Referrer:
    references = message_ids(mail.get("References")) or message_ids(mail.get("In-Reply-To"))
    if not event_id.startswith("sha256:"):
        references = references + [event_id]
    if len(references) > MAX_REFERENCES:  # keep the root and the most recent ones (RFC 5322 3.6.4)
        references = references[:1] + references[-(MAX_REFERENCES - 1):]
    token = {
        "subject": str(mail.get("Subject", "") or ""),
        "references": references,
        "date": str(mail.get("Date", "") or ""),
        "name": name,
        "reply_to": reply_to,
        "quote": text[:QUOTE_CHARS],
    }
    message = MessageId(event_id) if not event_id.startswith("sha256:") else None
    return Referrer(message=message, token=json.dumps(token, ensure_ascii=False))


def locale_of(mail: EmailMessage) -> str:
    """The language the learner asks for (Accept-Language), else the one they wrote in (Content-Language)."""
    body = mail.get_body(preferencelist=("plain", "html"))
    for header in (mail.get("Accept-Language"), mail.get("Content-Language"),
                   body.get("Content-Language") if body is not None else None):
        found = preferred_language(str(header)) if header is not None else ""
        if found:
            return found
    return ""


def sender_of(mail: EmailMessage) -> tuple[str, str]:
    """(display name, lower-case address) of the From header; InvalidEvent when there is no address."""
    try:
        name, sender = parseaddr(str(mail.get("From", "") or ""))
    except (TypeError, ValueError, IndexError) as error:
        raise InvalidEvent(f"email with an unreadable From header: {error}") from None
    sender = sender.strip().lower()
    if "@" not in sender:
        raise InvalidEvent(f"email without a sender address (From: {str(mail.get('From', ''))[:100]!r})")
    return name, sender


def decode(mail: EmailMessage, raw: bytes, *, account: AccountId, me: str, media_max_bytes: int) -> Received:
    """Decode one parsed mail; raise InvalidEvent with the reason when it cannot be answered at all.

    The attachments' bytes come back for the blob store: screen the sender (:func:`sender_of`) first."""
    name, sender = sender_of(mail)
    event_id = event_id_of(mail, raw)
    root = thread_root(mail, event_id)
    text = strip_quoted(body_text(mail))
    elements: list[Element] = [Text(text=text)] if text else []
    files, parts = attachments(mail, media_max_bytes)
    elements += files
    reply_to = [a for _, a in getaddresses([str(mail.get("Reply-To", "") or "")]) if "@" in a]
    subject = str(mail.get("Subject", "") or "")
    message = InboundMessage(
        event_id=EventId(event_id),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=ChatId(sender), kind=ConversationKind.DIRECT, thread=root, title=subject[:200] or None)),
        sender=Sender(user=UserId(sender), display_name=name, locale=locale_of(mail)),
        elements=tuple(elements),
        referrer=referrer_for(mail, event_id, name or sender, text, reply_to[0] if reply_to else None),
        received_at=datetime.now(UTC),
        addressed=True,
        from_self=sender == me.lower(),
    )
    return Received(sender=sender, mail=mail, message=message, parts=parts)
