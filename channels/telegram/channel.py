"""TelegramChannel: a bot account on the Telegram Bot API, by long polling or by webhook.

Inbound, in either mode, an update is confirmed to Telegram only after
``await sink.accept(...)`` returned: the poll offset is stored and sent past
an update only then, and a webhook is answered 200 only then.  Files are not
downloaded on that path: the pipeline fetches them after the ack through
:meth:`TelegramChannel.fetch_media` (getFile, then a streamed download).  A crash in
between makes Telegram hand the same update (same ``update_id``) out again,
and the gateway's dedup answers it once.  Updates are fetched as raw JSON and
parsed one by one, so a single update python-telegram-bot cannot parse is
recorded as invalid and confirmed instead of blocking the queue forever.

Outbound, Telegram takes no idempotency key.  Within one process a part that
needs several messages (text, then files) remembers what it already sent, so
a retry after a later failure does not repeat the text; a send whose answer
was lost may still show twice (see docs/adr/0010-telegram-channel.md).
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
from telegram import Bot, BotCommand, Update, User

from channels._kit.longpoll import Batch, poll
from channels._kit.signatures import verify_shared_secret
from channels.base import Channel, ChannelContext, MediaStream
from channels.telegram.config import TelegramConfig
from channels.telegram.decode import decode
from channels.telegram.media import fetch
from channels.telegram.moves import ChatMoves
from channels.telegram.outbound import Where, draft_id_for, edit_text, send_attachment, send_draft, send_text
from channels.telegram.probe import check_settings, probe_bot
from channels.telegram.shape import check_shape
from channels.telegram.transport import PLATFORM, ChatMoved, call, new_bot
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import InvalidEvent, PermanentError, Unsupported
from gateway.core.messages import (
    Address,
    ChatId,
    ConversationKind,
    InboundMessage,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
)
from gateway.core.probes import ProbeResult, Problem
from gateway.jsonbody import decode_json

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message"]
DRAFT = "draft:"
WEBHOOK_CHECK_S = 30.0
DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
"""Per read and per connect; the pipeline bounds the whole fetch (``media_fetch_timeout_s``)."""
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
PROGRESS_KEPT = 1000
"""Parts remembered as half on screen at most; beyond, the oldest (long given up by the outbound path) goes."""


class TelegramChannel(Channel[TelegramConfig]):
    name: ClassVar[str] = "telegram"
    config_model = TelegramConfig

    def __init__(self, context: ChannelContext[TelegramConfig]) -> None:
        super().__init__(context)
        self._bot: Bot | None = None
        self._me: User | None = None
        self._ready_lock = asyncio.Lock()
        self._drafts = self.settings.drafts
        self._heartbeat: Heartbeat | None = None
        self._http: httpx.AsyncClient | None = None
        """File downloads, apart from PTB's pools: a slow download never holds up a send or the long poll."""
        self._progress: dict[str, dict[str, int]] = {}
        self._moves = ChatMoves(context.cursors)
        """Idempotency key -> the messages of that part already on screen (text, each attachment)."""

    async def _ready(self) -> tuple[Bot, User]:
        """The initialized bot and who it is (getMe; a wrong token fails here as AuthFailed)."""
        async with self._ready_lock:
            if self._bot is None:
                self._bot = new_bot(self.settings, poll_timeout=self.settings.poll_timeout)
            if self._me is None:
                await call("getMe", self._bot.initialize())
                self._me = self._bot.bot
        return self._bot, self._me

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: TelegramConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        problems = self.check(self.settings)
        if problems:
            return ProbeResult(checked=f"Telegram at {self.settings.api_url}", problems=tuple(problems))
        bot = new_bot(self.settings, poll_timeout=self.settings.poll_timeout)  # its own: a running account's stays as it is
        try:
            return await probe_bot(bot, self.settings)
        finally:
            try:
                await bot.shutdown()
            except Exception as error:  # nothing to release after a failed initialize
                log.debug("telegram probe bot shutdown account=%s error=%s", self.account, error)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        bot, _ = await self._ready()
        self._heartbeat = heartbeat
        if self.settings.commands:
            commands = [BotCommand(name, text) for name, text in self.settings.commands.items()]
            await call("setMyCommands", bot.set_my_commands(commands))
        if self.settings.mode == "webhook":
            await self._serve_webhook(bot, heartbeat)
        else:
            await self._poll(bot, heartbeat)

    async def _poll(self, bot: Bot, heartbeat: Heartbeat) -> None:
        await call("deleteWebhook", bot.delete_webhook(drop_pending_updates=False))  # polling and a webhook exclude each other
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("telegram polling account=%s bot=%s", self.account, bot.bot.username)
        timeout = self.settings.poll_timeout

        async def fetch(cursor: str | None) -> Batch:
            offset = int(cursor or 0)
            with warnings.catch_warnings():  # raw JSON on purpose (see the module docstring), so PTB's hint is moot
                warnings.simplefilter("ignore")
                updates = await call("getUpdates", bot.do_api_request(
                    "getUpdates", api_kwargs={"offset": offset or None, "timeout": timeout, "allowed_updates": ALLOWED_UPDATES},
                    read_timeout=timeout + 10))
            heartbeat.beat()
            ids = [u["update_id"] for u in updates if isinstance(u, dict) and isinstance(u.get("update_id"), int)]
            return Batch(await self._decode(bot, updates), str(max(offset, max(ids) + 1)) if ids else None)

        await poll(fetch, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat, what="telegram getUpdates")

    async def _serve_webhook(self, bot: Bot, heartbeat: Heartbeat) -> None:
        url, configured = self.settings.webhook_url, self.settings.webhook_secret
        assert url is not None and configured is not None, "TelegramConfig refuses webhook mode without both"
        secret = configured.get_secret_value()
        await call("setWebhook", bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES))
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("telegram webhook set account=%s bot=%s", self.account, bot.bot.username)
        while True:  # Telegram pushes; we only prove the account is alive, and notice a lost webhook
            info = await call("getWebhookInfo", bot.get_webhook_info())
            if info.url != url:
                await call("setWebhook", bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES))
            heartbeat.beat()
            await asyncio.sleep(WEBHOOK_CHECK_S)

    async def _decode(self, bot: Bot, updates: list[Any]) -> list[InboundMessage]:
        """Decode a batch; the caller makes it durable, and only then may Telegram forget it.  Files wait
        for the pipeline (``fetch_media``), so a batch of them is acknowledged as fast as a batch of words."""
        batch: list[InboundMessage] = []
        me = bot.bot  # who getMe said the bot is (``_ready`` initialized it)
        for raw in updates:
            try:
                if not isinstance(raw, dict):
                    raise InvalidEvent(f"telegram update is not an object: {str(raw)[:100]}")
                check_shape(raw)
                if await self._learned_a_move(raw):
                    continue
                message = await self._filed(decode(Update.de_json(raw, bot), account=self.account, me=me))
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
                continue
            except Exception as error:  # PTB could not parse it: record why and move on, never block the queue
                self.context.sink.invalid(f"telegram update {raw.get('update_id')} could not be parsed: "
                                          f"{type(error).__name__}: {str(error)[:200]}")
                continue
            batch.append(message)
        return batch

    async def _learned_a_move(self, raw: dict[str, Any]) -> bool:
        """Whether ``raw`` is the service message of a group's upgrade to a supergroup (recorded, not a turn)."""
        message = raw.get("message")
        if not isinstance(message, dict) or not isinstance(chat := (message.get("chat") or {}).get("id"), int):
            return False
        if isinstance(new := message.get("migrate_to_chat_id"), int):
            await self._moves.record(chat, new)
            return True
        if isinstance(old := message.get("migrate_from_chat_id"), int):
            await self._moves.record(old, chat)
            return True
        return False

    async def _filed(self, message: InboundMessage) -> InboundMessage:
        """A message from a supergroup that was a group is filed under the group's conversation (see moves)."""
        chat = int(message.address.conversation.chat)
        original = await self._moves.original(chat)
        if original == chat:
            return message
        conversation = message.address.conversation.model_copy(update={"chat": ChatId(str(original))})
        return message.model_copy(update={"address": message.address.model_copy(update={"conversation": conversation})})

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        secret = self.settings.webhook_secret
        if self.settings.mode != "webhook" or secret is None:
            raise Unsupported(PLATFORM, "this account polls; it has no webhook")
        verify_shared_secret(request.headers, SECRET_HEADER, secret.get_secret_value())
        update = decode_json(await request.body(), what="telegram webhook body")
        bot, _ = await self._ready()
        batch = await self._decode(bot, [update])
        if batch:
            await self.context.sink.accept(batch)
        if self._heartbeat is not None:
            self._heartbeat.event()
        return JSONResponse({"ok": True})

    def media_limit(self) -> int:
        return self.settings.max_download_bytes

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        bot, _ = await self._ready()
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, trust_env=False)
        async with fetch(bot, self._http, ref, limit=limit) as stream:
            yield stream

    # ------------------------------------------------------------------ outbound

    async def _where(self, target: Address, reply_to: MessageId | None = None) -> Where:
        thread = target.conversation.thread
        return Where(await self._moves.current(int(target.conversation.chat)), int(thread) if thread else None,
                     int(reply_to) if reply_to and reply_to.isdigit() else None)

    async def _moved(self, where: Where, moved: ChatMoved) -> Where:
        """Record the upgrade a send was refused for, and aim at the supergroup: the one retry to the new chat."""
        await self._moves.record(where.chat, moved.new_chat)
        return Where(moved.new_chat, where.thread, where.reply_to)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        bot, _ = await self._ready()
        where = await self._where(target, referrer.message if part.index == 0 else None)
        if not part.final and self._drafts and target.conversation.kind is ConversationKind.DIRECT:
            draft = draft_id_for(idempotency_key)
            try:
                await send_draft(bot, where, draft, part.text)
                # The id carries what the final message answers: edit() is not handed the referrer.
                return SentMessage(message=MessageId(f"{DRAFT}{draft}:{where.reply_to or ''}"))
            except Unsupported as error:
                self._drafts = False
                log.info("telegram drafts unavailable, previews are edited messages account=%s reason=%s", self.account, error)
        try:
            return await self._send_part(bot, where, part, idempotency_key)
        except ChatMoved as moved:
            return await self._send_part(bot, await self._moved(where, moved), part, idempotency_key)

    async def _send_part(self, bot: Bot, where: Where, part: RenderedPart, key: str) -> SentMessage:
        done = self._progress.setdefault(key, {})
        if len(self._progress) > PROGRESS_KEPT:  # parts whose retries ran out: the oldest goes
            self._progress.pop(next(iter(self._progress)))
        try:
            if part.text.strip() and "text" not in done:
                done["text"] = (await send_text(bot, where, part.text)).message_id
                where.reply_to = None  # the files follow the text; only the first message answers
            for index, attachment in enumerate(part.attachments):
                step = f"file{index}"
                if step not in done:
                    done[step] = (await send_attachment(bot, where, attachment)).message_id
        except ChatMoved:
            raise  # sent again to the supergroup at once: what is on screen already stays remembered
        except PermanentError:
            self._progress.pop(key, None)  # no retry comes for this part: nothing to remember
            raise
        self._progress.pop(key, None)
        first = done.get("text") or next(iter(done.values()), None)
        if first is None:
            raise Unsupported(PLATFORM, "a part with neither text nor attachments cannot be sent")
        log.info("telegram sent account=%s chat=%s message=%s part=%d", self.account, where.chat, first, part.index)
        return SentMessage(message=MessageId(str(first)))

    async def edit(self, target: Address, message: MessageId, part: RenderedPart, *, final: bool) -> None:
        bot, _ = await self._ready()
        if message.startswith(DRAFT):
            draft, _, reply_to = message.removeprefix(DRAFT).partition(":")
            where = await self._where(target, MessageId(reply_to) if reply_to else None)
            if not final:
                await send_draft(bot, where, int(draft), part.text)
            else:  # a draft is ephemeral: the final text becomes a real message now
                await self._send_part(bot, where, part, f"final:{message}:{target.conversation.key}")
            return
        where = await self._where(target)
        if part.text.strip():
            await edit_text(bot, where.chat, int(message), part.text)
        if final and part.attachments:
            await self._send_part(bot, where, part.model_copy(update={"text": ""}), f"edit:{message}:{target.conversation.key}")

    async def typing(self, target: Address) -> None:
        bot, _ = await self._ready()
        where = await self._where(target)
        try:
            await call("sendChatAction", bot.send_chat_action(where.chat, "typing", message_thread_id=where.thread))
        except ChatMoved as moved:
            where = await self._moved(where, moved)
            await call("sendChatAction", bot.send_chat_action(where.chat, "typing", message_thread_id=where.thread))

    async def close(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
        if self._bot is not None:
            bot, self._bot = self._bot, None
            try:
                await bot.shutdown()
            except Exception as error:  # closing must not raise over the supervisor's own shutdown
                log.debug("telegram bot shutdown account=%s error=%s", self.account, error)
