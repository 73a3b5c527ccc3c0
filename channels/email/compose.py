"""A rendered part -> the reply mail: headers, text/plain + text/html, the quote, attachments.

- ``Message-ID`` is derived from the idempotency key, so every retry of one
  part carries the same id: a receiving client (and a human) can tell a
  repeated submission from a new message (see ADR 0011).
- The subject is the learner's with one "Re: " in front, however many the
  thread already had; ``In-Reply-To`` and ``References`` keep the thread.
- Message ids in ``In-Reply-To`` and ``References`` stay literal, folded only
  between ids: the email package would otherwise turn an id longer than a line
  (Gmail's often are) into RFC 2047 encoded words, which no client reads as an
  id, so the reply would fall out of the learner's thread.
- ``Auto-Submitted: auto-replied`` (RFC 3834) and ``X-Auto-Response-Suppress``
  tell other robots not to answer us.
- The learner's message is quoted under "On <date>, <name> wrote:", in both
  alternatives, on the first part only.
- Attachments with a file path travel as MIME parts; attachments known only by
  URL travel as ``message/external-body`` parts (RFC 2017), plus a link in the
  text for clients that do not show those.
"""

from __future__ import annotations

import email.policy
import hashlib
import html
import json
import mimetypes
import re
from dataclasses import dataclass
from email.headerregistry import BaseHeader, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from email.policy import Policy
from email.utils import formataddr, formatdate
from pathlib import Path

from channels.email.plaintext import html_to_text
from gateway.core.capabilities import capabilities_of
from gateway.core.messages import Attachment, RenderedPart

REPLY_PREFIX = re.compile(r"^\s*((re|aw|sv|antw)\s*(\[\d+\])?\s*:\s*)+", re.I)
REPLY_MARK = '<div class="partners-reply">'
QUOTE_MARK = '<div class="partners-quote">'



class MessageIdsHeader(UnstructuredHeader, BaseHeader):
    """A header of message ids (``In-Reply-To``, ``References``), folded between ids and never encoded.

    ``BaseHeader`` is named here too, though the registry mixes it in anyway, so that ``name`` and
    ``fold`` are the ones this class really has (the MRO is the same either way)."""

    def fold(self, *, policy: Policy) -> str:
        lines, line, limit = [], f"{self.name}:", policy.max_line_length  # None: a policy that never folds
        for token in str(self).split():
            if limit is not None and line != f"{self.name}:" and len(line) + 1 + len(token) > limit:
                lines.append(line)
                line = ""
            line += f" {token}"
        return policy.linesep.join([*lines, line]) + policy.linesep


_HEADERS = HeaderRegistry()
_HEADERS.map_to_type("in-reply-to", MessageIdsHeader)
_HEADERS.map_to_type("references", MessageIdsHeader)
POLICY = email.policy.default.clone(header_factory=_HEADERS, max_line_length=capabilities_of("email").line_length)
"""The default policy, but message ids stay literal (see the module docstring) and lines are folded at
``line_length`` from platforms.toml (RFC 5322's 78)."""


@dataclass(frozen=True)
class Thread:
    """What the reply needs from the mail it answers (the decoded Referrer token)."""

    message: str | None = None
    subject: str = ""
    references: tuple[str, ...] = ()
    date: str = ""
    name: str = ""
    reply_to: str | None = None
    quote: str = ""

    @classmethod
    def from_referrer(cls, message: str | None, token: str | None) -> Thread:
        data = json.loads(token) if token else {}
        return cls(message=message, subject=data.get("subject", ""), references=tuple(data.get("references", ())),
                   date=data.get("date", ""), name=data.get("name", ""), reply_to=data.get("reply_to"),
                   quote=data.get("quote", ""))


def message_id_for(idempotency_key: str, domain: str) -> str:
    digest = hashlib.blake2b(idempotency_key.encode(), digest_size=16).hexdigest()
    return f"<{digest}.partners@{domain}>"


def reply_subject(subject: str, fallback: str) -> str:
    bare = REPLY_PREFIX.sub("", " ".join((subject or "").split())).strip()  # one line, whatever came in
    return f"Re: {bare}" if bare else fallback


def _quote_html(thread: Thread) -> str:
    said = html.escape(thread.quote).replace("\n", "<br>")
    who = html.escape(f"On {thread.date}, {thread.name} wrote:" if thread.date else f"{thread.name} wrote:")
    return f'{QUOTE_MARK}<p>{who}</p><blockquote type="cite">{said}</blockquote></div>'


def _quote_text(thread: Thread) -> str:
    who = f"On {thread.date}, {thread.name} wrote:" if thread.date else f"{thread.name} wrote:"
    quoted = "\n".join("> " + line if line else ">" for line in thread.quote.splitlines())
    return f"\n\n{who}\n{quoted}"


def _attach(mail: EmailMessage, attachment: Attachment) -> str | None:
    """Attach one file; return a line of text for the body when it goes by reference."""
    if attachment.path:
        path = Path(attachment.path)
        mime = attachment.mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        major, _, minor = mime.partition("/")
        mail.add_attachment(path.read_bytes(), maintype=major, subtype=minor or "octet-stream",
                            filename=attachment.name or path.name)
        return None
    if attachment.url:
        reference = EmailMessage()  # the class of the mail it goes in (MIMEPart.attach takes its own class)
        inner = attachment.mime_type or mimetypes.guess_type(attachment.url)[0] or "application/octet-stream"
        reference["Content-Type"] = f'message/external-body; access-type=URL; URL="{attachment.url}"'
        reference["Content-Disposition"] = f'attachment; filename="{attachment.name or attachment.url.rsplit("/", 1)[-1]}"'
        reference.set_payload(f"Content-Type: {inner}\r\n\r\n")
        if mail.get_content_type() != "multipart/mixed":
            mail.make_mixed()
        mail.attach(reference)
        return attachment.url
    return None


def compose(part: RenderedPart, thread: Thread, *, sender: str, sender_name: str, to: str, bcc: str | None,
            idempotency_key: str, fallback_subject: str) -> EmailMessage:
    mail = EmailMessage(policy=POLICY)
    mail["From"] = formataddr((sender_name, sender)) if sender_name else sender
    mail["To"] = to
    if bcc:
        mail["Bcc"] = bcc  # send_message() uses it as a recipient and never transmits it
    mail["Subject"] = reply_subject(thread.subject, fallback_subject)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = message_id_for(idempotency_key, sender.rsplit("@", 1)[1])
    if thread.message:
        mail["In-Reply-To"] = thread.message
        mail["References"] = " ".join(thread.references or (thread.message,))
    mail["Auto-Submitted"] = "auto-replied"
    mail["X-Auto-Response-Suppress"] = "All"
    quoted = part.index == 0 and bool(thread.quote)
    links = [a.url for a in part.attachments if not a.path and a.url]
    text = html_to_text(part.text)
    if links:
        text += "\n\n" + "\n".join(f"Attachment: {url}" for url in links)
    mail.set_content(text + (_quote_text(thread) if quoted else "") + "\n")
    body = f"{REPLY_MARK}{part.text}</div>" + (_quote_html(thread) if quoted else "")
    mail.add_alternative(f"<!DOCTYPE html><html><body>{body}</body></html>", subtype="html")
    for attachment in part.attachments:
        _attach(mail, attachment)
    return mail
