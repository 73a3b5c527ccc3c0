"""IlinkChannel: a personal WeChat account through the iLink bot API (``kind: ilink``).

Inbound is the kit's long poll on ``ilink/bot/getupdates``: the opaque
``get_updates_buf`` the platform hands back is stored only once the batch is
durable, so a crash makes the platform hand the same messages out again and
the dedup key (the platform's ``message_id``) answers each once.

Outbound, every message carries the ``context_token`` of the learner's message
(in the referrer, with its end from ``reply_window_s``).  A reply without one
-- a teacher's report, a reminder -- takes the learner's latest token, which
the channel keeps in the store as it reads messages; the outbound path has
already refused it if the window is over.  The platform's own word that a
token is stale is :class:`~gateway.core.errors.ReplyWindowClosed`, recorded
and reported to the teacher by the outbound path.  The budget (about ten
replies per learner message) and the pacing are platforms.toml's, enforced
by that path; a file is a part of its own and counts against the budget.
Images and videos go as themselves, anything else (a voice note too) as a
file, each uploaded to the CDN encrypted (:mod:`channels.weixin.ilink.upload`).
Typing goes through the ticket ``getconfig`` hands out, kept per learner
while the channel runs.

The bot token is the QR login's (:mod:`channels.weixin.ilink.session`); an
expired session (or none yet) parks the account in ``action_required`` with
the command that logs in again, and the account resumes by itself once that
login is stored.  While it waits, the gateway serves a login page with the QR
code at ``/channels/weixin/<account>/login`` behind a fresh token that the log
line and ``partners channels login`` print (:mod:`channels.weixin.ilink.page`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import httpx

from channels._kit.longpoll import Batch, poll
from channels._kit.media import read_attachment
from channels.base import ChannelContext, MediaStream
from channels.weixin.account import WeixinChannel
from channels.weixin.config import IlinkConfig, WeixinConfig
from channels.weixin.ilink import session as sessions
from channels.weixin.ilink.decode import Skipped, decode
from channels.weixin.ilink.media import fetch
from channels.weixin.ilink.page import LoginPage
from channels.weixin.ilink.transport import PLATFORM, IlinkApi, login_command
from channels.weixin.ilink.upload import item as media_item
from channels.weixin.ilink.upload import sent_as, upload
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, InvalidEvent, PermanentError, ReplyWindowClosed, Unsupported
from gateway.core.messages import Address, Attachment, InboundMessage, MediaRef, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem

if TYPE_CHECKING:  # pragma: no cover - typing only; starlette loads with the routes
    from starlette.routing import BaseRoute

log = logging.getLogger(__name__)
DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
"""Per read and per connect; the pipeline bounds the whole fetch (``media_fetch_timeout_s``)."""
RELOGIN_CHECK_S = 1.0
"""How often an account waiting for a login looks for one in the store (a read of one row)."""
LATEST = "context:"
"""Store entries ``context:<user>``: the learner's latest context token, for a reply that names no message."""


class IlinkChannel(WeixinChannel):
    """Made by ``WeixinChannel(context)`` for an account with ``kind: ilink`` (or no kind)."""

    def __init__(self, context: ChannelContext[WeixinConfig]) -> None:
        super().__init__(context)
        if not isinstance(self.settings, IlinkConfig):
            raise Unsupported(PLATFORM, f"kind {self.settings.kind} is not personal WeChat")
        self.ilink: IlinkConfig = self.settings
        self._api: IlinkApi | None = None
        self._tickets: dict[str, str] = {}
        self._latest: dict[str, str] = {}
        self._http: httpx.AsyncClient | None = None
        """CDN downloads and uploads, apart from the API's client: a slow file never holds up the poll."""
        self.page = LoginPage(self.ilink, context.cursors, str(self.account))

    async def _ready(self) -> IlinkApi:
        """The API with the stored login's token; AuthFailed with the login command when there is none."""
        if self._api is None:
            found = await sessions.load(self.context.cursors)
            if found is None:
                raise AuthFailed(PLATFORM, f"not logged in: scan the QR code with the WeChat that will speak: "
                                           f"{login_command(self.account)}")
            if self.ilink.bot_id and found.bot_id and found.bot_id != self.ilink.bot_id:
                raise AuthFailed(PLATFORM, f"the stored login is bot {found.bot_id}, the config says {self.ilink.bot_id}; "
                                           f"scan again with the right WeChat: {login_command(self.account)}")
            self._api = IlinkApi(found.base_url or self.ilink.base_url, found.token.get_secret_value(),
                                 account=str(self.account))
        return self._api

    def login_page(self) -> str | None:
        """The QR login page with its token, while the account waits for a scan."""
        return self.page.path if self.page.waiting and self.page.token else None

    def http_routes(self) -> list[BaseRoute]:
        """The login page (``/channels/weixin/<account>/login``), answering only while the account waits for one."""
        return self.page.routes()

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: WeixinConfig) -> list[Problem]:
        return []

    async def probe(self) -> ProbeResult:
        return ProbeResult(checked=f"personal WeChat at {self.ilink.base_url}: the login is checked when the account "
                                   f"starts (an expired one asks for {login_command(self.account)})")

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        """Poll while the login holds; without one, wait in ``action_required`` until the teacher scans again."""
        while True:
            try:
                api = await self._ready()
                heartbeat.set_state(ChannelState.RUNNING)
                log.info("weixin ilink polling account=%s", self.account)
                await self._poll(api, heartbeat)
            except AuthFailed as error:  # no login, another bot's, or the session expired (SessionExpired)
                await self._wait_for_login(heartbeat, str(error))

    async def _poll(self, api: IlinkApi, heartbeat: Heartbeat) -> None:
        timeout = self.ilink.poll_timeout_s

        async def fetch(cursor: str | None) -> Batch:
            said = await api.get_updates(cursor or "", timeout=timeout)
            heartbeat.beat()
            following = said.get("get_updates_buf")
            return Batch(await self._decode(said.get("msgs")), following if isinstance(following, str) and following else None)

        await poll(fetch, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat,
                   cursor_name=sessions.CURSOR, what="weixin getupdates")

    async def _wait_for_login(self, heartbeat: Heartbeat, reason: str) -> None:
        """Park in ``action_required`` with ``reason`` (it names the login command) until a new login is stored.

        The login command writes the session into this account's store entry, so a scan brings the
        account back without a restart; until then the supervisor leaves a unit in this state alone."""
        stale = await sessions.load(self.context.cursors)
        seen = stale.token.get_secret_value() if stale is not None else None
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
        self._tickets.clear()  # typing tickets were the old session's
        heartbeat.set_state(ChannelState.ACTION_REQUIRED, reason)
        log.warning("weixin ilink needs a login account=%s reason=%s", self.account, reason)
        log.warning("weixin ilink login page account=%s: open the gateway's address followed by %s",
                    self.account, await self.page.open())
        try:
            while True:
                await asyncio.sleep(RELOGIN_CHECK_S)
                found = await sessions.load(self.context.cursors)
                if found is not None and found.token.get_secret_value() != seen:
                    log.info("weixin ilink login found account=%s bot=%s", self.account, found.bot_id)
                    return
        finally:
            await self.page.close()

    async def _decode(self, raw: Any) -> list[InboundMessage]:
        """A batch, each undecodable message recorded (and so passed over); the caller makes it durable."""
        batch: list[InboundMessage] = []
        for item in raw if isinstance(raw, list) else []:
            try:
                message = decode(item, account=self.account, window_s=self.declared.reply_window_s)
            except Skipped as skipped:
                self.context.sink.refused("weixin-type", f"{item.get('from_user_id', '')}: {skipped}")
                continue
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
                continue
            if message.referrer.token and not message.from_self:
                await self._remember(str(message.address.conversation.chat), message.referrer)
            batch.append(message)
        return batch

    async def _remember(self, user: str, referrer: Referrer) -> None:
        if referrer.token is None or self._latest.get(user) == referrer.token:
            return
        self._latest[user] = referrer.token
        await self.context.cursors.put(LATEST + user, json.dumps({"token": referrer.token}))

    async def _token_for(self, user: str, referrer: Referrer) -> str:
        if referrer.token:
            return referrer.token
        if user not in self._latest and (raw := await self.context.cursors.get(LATEST + user)):
            token = json.loads(raw).get("token")
            if isinstance(token, str) and token:
                self._latest[user] = token
        if user not in self._latest:
            raise ReplyWindowClosed(PLATFORM, "personal WeChat answers only a learner who wrote: "
                                              "this learner has not written to the account yet")
        return self._latest[user]

    def _cdn(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, trust_env=False)
        return self._http

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """An image or file from the CDN, decrypted with the key its message carried (media.py)."""
        return fetch(self._cdn(), self.ilink.cdn_base_url, ref, limit=limit)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One message carrying the learner's context token: a text, or one uploaded file (upload.py).

        The platform hands back no id, so the part's key stands for it (and is its ``client_id``).  A file
        is read, sealed and uploaded before the message names it; a failure on the way is the outbound
        path's to retry, and nothing was sent before ``sendmessage``."""
        user = str(target.conversation.chat)
        attachment = part.attachment
        if attachment is None and not part.text.strip():
            raise Unsupported(PLATFORM, "a part with neither text nor one attachment cannot be sent")
        api = await self._ready()
        token = await self._token_for(user, referrer)
        if attachment is None:
            await api.send_text(user, token, part.text, client_id=idempotency_key)
        else:
            await api.send_item(user, token, await self._uploaded(api, user, attachment), client_id=idempotency_key)
        log.info("weixin ilink sent account=%s chat=%s part=%d kind=%s", self.account, user, part.index,
                 attachment.kind if attachment is not None else "text")
        return SentMessage(message=MessageId(idempotency_key))

    async def _uploaded(self, api: IlinkApi, user: str, attachment: Attachment) -> dict[str, Any]:
        """The message item for ``attachment``, its bytes on the CDN (a URL's fetched first, within the limit).

        A file by URL that cannot be had for good (404, over the limit, refused) goes as its link, the way
        a platform without files shows one; a fetch that may work later is the outbound path's to retry."""
        http = self._cdn()
        try:
            got = await read_attachment(http, attachment, limit=self.declared.media_max_bytes, platform=PLATFORM)
        except PermanentError as error:
            if not attachment.url:
                raise
            log.warning("weixin ilink attachment sent as its link account=%s chat=%s reason=%s", self.account, user, error)
            link = f"{attachment.name}: {attachment.url}" if attachment.name else attachment.url
            return {"type": 1, "text_item": {"text": link}}
        kind = sent_as(attachment.kind)
        uploaded = await upload(api, http, self.ilink.cdn_base_url, to=user, data=got.data, kind=kind)
        return media_item(kind, uploaded, name=got.name)

    async def typing(self, target: Address) -> None:
        user = str(target.conversation.chat)
        api = await self._ready()
        ticket = self._tickets.get(user)
        if ticket is None:
            ticket = await api.typing_ticket(user, self._latest.get(user))
            if ticket is None:
                return
            self._tickets[user] = ticket
        await api.send_typing(user, ticket)

    async def close(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
