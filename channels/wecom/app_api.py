"""The wire to WeCom's API for a self-built app: ``access_token``, ``message/send``, errors translated once.

``cgi-bin/gettoken?corpid=&corpsecret=`` hands out an ``access_token`` good for
``expires_in`` seconds (7,200).  The kit's :class:`~channels._kit.tencent_api.TencentApi`
keeps it until a minute before it ends and fetches it again once, at most, when
WeCom says it is no longer good (40014 not a token, 42001 expired, 40001 bad
credential); this module holds what is WeCom's own: the token query, the
errcode table and the calls.

WeCom answers 200 with ``{"errcode": N, "errmsg": ...}`` on failure; the kit's
:class:`~channels._kit.http_errors.BodyCodes` translates the codes::

    45009 API quota reached, 45033 too many at once                    -> RateLimited
    40001, 42001, 40014 (after the one refresh), 40013 bad corpid,
    40056 bad agentid, 60020 caller's IP not trusted                   -> AuthFailed
    81013 the member is not in the app's visible range                 -> NotFound
    -1 system busy, HTTP 5xx                                           -> PeerUnavailable
    45002 content too long, 44004 empty, any other code                -> BadRequest

``enable_duplicate_check`` stays 0: WeCom's check drops a message whose
*content* repeats within the interval, with no key of the sender's, so it
cannot carry the reply's idempotency key and would drop a tutor's honest second
"Yes, exactly." to the same learner (ADR 0034).

Files go both ways by ``media_id`` (valid three days): ``cgi-bin/media/upload?type=image|file``
takes one multipart field ``media`` and answers the id ``message/send`` then names; ``cgi-bin/media/get``
hands a learner's file back as bytes, or a 200 with an errcode (40007: no such or expired id), which
the kit's download reads as that error.

The secret and the token are in query strings, so no URL is ever logged or put
in an error message: errors name the API path only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

from channels._kit.http_errors import ErrorKind
from channels._kit.tencent_api import TencentApi, TokenFetch, errcodes
from channels.wecom.config import AppMode
from gateway.core.channel import MediaStream
from gateway.core.errors import NotFound, PeerUnavailable

PLATFORM = "wecom"
CODES = errcodes({
    "45009": ErrorKind.RATE_LIMITED, "45033": ErrorKind.RATE_LIMITED,
    "40013": ErrorKind.AUTH_FAILED, "40056": ErrorKind.AUTH_FAILED, "60020": ErrorKind.AUTH_FAILED,
    "81013": ErrorKind.NOT_FOUND, "-1": ErrorKind.UNAVAILABLE,
})


class AppApi(TencentApi):
    """One app's calls to WeCom, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, mode: AppMode, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.mode = mode
        fetch = TokenFetch(path="cgi-bin/gettoken", params={"corpid": mode.corpid}, secret_param="corpsecret",
                           secret=mode.corpsecret, account=f"corpid={mode.corpid}")
        super().__init__(PLATFORM, mode.api_base, fetch, CODES, client, clock=clock)

    async def send_text(self, userid: str, content: str) -> str:
        """One text app message to the member (``cgi-bin/message/send``); WeCom's ``msgid`` for it."""
        said = await self.call("cgi-bin/message/send", {
            "touser": userid, "msgtype": "text", "agentid": self.mode.agentid, "text": {"content": content},
            "safe": 0, "enable_duplicate_check": 0})
        if said.get("invaliduser"):
            raise NotFound(PLATFORM, "cgi-bin/message/send: the member is not in the app's visible range")
        return str(said.get("msgid") or "")

    async def upload(self, kind: str, name: str, data: bytes, mime: str) -> str:
        """Upload one file as temporary material (``cgi-bin/media/upload``); the ``media_id`` WeCom gave it.

        Nothing is sent yet: a failed upload leaves no message behind, so the part is simply tried again."""
        said = await self.upload_file("cgi-bin/media/upload", {"type": kind}, "media", name, data, mime)
        media_id = said.get("media_id")
        if not isinstance(media_id, str) or not media_id:
            raise PeerUnavailable(PLATFORM, "cgi-bin/media/upload: the answer has no media_id")
        return media_id

    async def send_media(self, userid: str, msgtype: str, media_id: str) -> str:
        """One image or file app message naming an uploaded ``media_id``; WeCom's ``msgid`` for it."""
        return await self._send(userid, msgtype, {"media_id": media_id})

    async def send_news(self, userid: str, title: str, url: str, picurl: str = "") -> str:
        """One news card (图文, ``msgtype: news``): a title that opens ``url``, showing ``picurl`` when
        given -- how a file known only by its URL is shown, since an upload needs the bytes."""
        article = {"title": title, "url": url, **({"picurl": picurl} if picurl else {})}
        return await self._send(userid, "news", {"articles": [article]})

    async def _send(self, userid: str, msgtype: str, content: dict) -> str:
        said = await self.call("cgi-bin/message/send", {
            "touser": userid, "msgtype": msgtype, "agentid": self.mode.agentid, msgtype: content,
            "safe": 0, "enable_duplicate_check": 0})
        if said.get("invaliduser"):
            raise NotFound(PLATFORM, "cgi-bin/message/send: the member is not in the app's visible range")
        return str(said.get("msgid") or "")

    def open_media(self, media_id: str, *, limit: int, declared_type: str = "",
                   name: str = "") -> AbstractAsyncContextManager[MediaStream]:
        """A learner's file by its ``media_id`` (``cgi-bin/media/get``), streamed within ``limit`` bytes."""
        return self.media("cgi-bin/media/get", {"media_id": media_id}, limit=limit, declared_type=declared_type,
                          name=name)
