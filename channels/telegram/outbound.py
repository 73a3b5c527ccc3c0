"""Rendered parts -> Bot API calls: messages, drafts, edits and files.

The parts arrive already rendered to Telegram HTML and split to 4,096 UTF-16
units by the outbound path; this module only decides which calls carry them.

- Text goes with ``parse_mode=HTML``.  If Telegram still refuses the markup
  ("can't parse entities"), the same words go once more as plain text: a
  reply without bold is better than no reply.
- The first part answers the learner's message (``reply_parameters``, allowed
  to go without it if that message was deleted); every part stays in the
  forum topic it was asked in (``message_thread_id``).
- Attachments follow the text as their own messages: sendPhoto, sendVoice, and
  sendDocument for files and videos.  A local file is uploaded; a URL is
  handed to Telegram, which fetches it.
- Previews in private chats are message drafts (sendMessageDraft): ephemeral,
  so a crash can never leave a half-written preview behind.  The draft id is
  derived from the reply's idempotency key, so a resumed turn animates the same
  draft.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import logging
import re
from collections.abc import Awaitable
from pathlib import Path
from typing import TypedDict

from telegram import Bot, InputFile, Message, ReplyParameters

from channels.telegram.transport import PLATFORM, call
from gateway.core.errors import BadRequest
from gateway.core.messages import Attachment

log = logging.getLogger(__name__)

HTML = "HTML"
_TAG = re.compile(r"<[^>]+>")


def plain(markup: str) -> str:
    """What a reader would see of Telegram HTML: tags dropped, entities decoded."""
    return html.unescape(_TAG.sub("", markup))


def draft_id_for(key: str) -> int:
    """A stable, non-zero draft id for one reply (the same after a restart)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % (2**31 - 1) + 1


def unparsable(error: BadRequest) -> bool:
    return "can't parse entities" in error.detail.lower()


class Where:
    """A chat (and forum topic) to say things in, with the message the first part answers."""

    def __init__(self, chat: int, thread: int | None, reply_to: int | None = None) -> None:
        self.chat, self.thread, self.reply_to = chat, thread, reply_to

    def reply(self) -> ReplyParameters | None:
        return ReplyParameters(message_id=self.reply_to, allow_sending_without_reply=True) if self.reply_to else None


async def send_text(bot: Bot, where: Where, text: str) -> Message:
    try:
        return await call("sendMessage", bot.send_message(
            where.chat, text, parse_mode=HTML, message_thread_id=where.thread, reply_parameters=where.reply()))
    except BadRequest as error:
        if not unparsable(error):
            raise
        log.warning("telegram refused our HTML, sending plain text chat=%s reason=%s", where.chat, error.detail)
        return await call("sendMessage", bot.send_message(
            where.chat, plain(text), message_thread_id=where.thread, reply_parameters=where.reply()))


async def edit_text(bot: Bot, chat: int, message: int, text: str) -> None:
    try:
        try:
            await call("editMessageText", bot.edit_message_text(text, chat_id=chat, message_id=message, parse_mode=HTML))
        except BadRequest as error:
            if not unparsable(error):
                raise
            log.warning("telegram refused our HTML, editing to plain text chat=%s reason=%s", chat, error.detail)
            await call("editMessageText", bot.edit_message_text(plain(text), chat_id=chat, message_id=message))
    except BadRequest as error:
        if "message is not modified" not in error.detail.lower():
            raise  # the same text again is what an edit after a lost response looks like: done


class _DraftFields(TypedDict):
    """sendMessageDraft's fields, one shape for PTB's method and for the generic call."""

    chat_id: int
    draft_id: int
    text: str
    message_thread_id: int | None
    parse_mode: str | None


def _draft(bot: Bot, where: Where, draft_id: int, text: str, parse_mode: str | None) -> Awaitable[object]:
    fields = _DraftFields(chat_id=where.chat, draft_id=draft_id, text=text, message_thread_id=where.thread,
                          parse_mode=parse_mode)
    if hasattr(bot, "send_message_draft"):  # python-telegram-bot >= 22.6
        return bot.send_message_draft(**fields)
    return bot.do_api_request("sendMessageDraft", api_kwargs=dict(fields))  # older releases: the generic call


async def send_draft(bot: Bot, where: Where, draft_id: int, text: str) -> None:
    try:
        await call("sendMessageDraft", _draft(bot, where, draft_id, text, HTML))
    except BadRequest as error:
        if not unparsable(error):
            raise
        await call("sendMessageDraft", _draft(bot, where, draft_id, plain(text), None))


def _source(attachment: Attachment) -> str | InputFile:
    if attachment.path:
        path = Path(attachment.path)
        try:  # its size was checked against media_max_bytes by the outbound path (gateway.pipeline.budget)
            data = path.read_bytes()
        except OSError as error:
            raise BadRequest(PLATFORM, f"attachment {path.name} cannot be read: {error.strerror}") from None
        return InputFile(data, filename=attachment.name or path.name)
    if attachment.url:
        return attachment.url
    raise BadRequest(PLATFORM, "attachment has neither a path nor a URL")


async def send_attachment(bot: Bot, where: Where, attachment: Attachment) -> Message:
    source = await asyncio.to_thread(_source, attachment)  # up to 50 MB read from disk: off the event loop
    thread, reply = where.thread, where.reply()
    if attachment.kind == "image":
        return await call("sendPhoto", bot.send_photo(where.chat, source, message_thread_id=thread, reply_parameters=reply))
    if attachment.kind == "audio":
        return await call("sendVoice", bot.send_voice(where.chat, source, message_thread_id=thread, reply_parameters=reply))
    return await call("sendDocument", bot.send_document(where.chat, source, message_thread_id=thread, reply_parameters=reply))
