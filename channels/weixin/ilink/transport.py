"""The wire to the iLink bot API: JSON over HTTP POST, the bot token as a bearer, errors translated once.

Every call is a POST of a JSON body carrying ``base_info`` (the client's
version) with ``Authorization: Bearer <bot_token>`` and
``AuthorizationType: ilink_bot_token``; the QR login calls before there is a
token are GETs.  The platform answers 200 with ``ret`` (and sometimes
``errcode``) 0 on success.  Translation, most specific first::

    ret/errcode -14, session expired (the QR login ended)   -> SessionExpired (an AuthFailed: scan again)
    ret -2 on sendmessage (the context token is stale)       -> ReplyWindowClosed
    401                                                      -> AuthFailed
    429, 5xx, a socket that fails                            -> RateLimited / PeerUnavailable
    any other code                                           -> BadRequest

The bot token is never logged nor put into an error: errors name the API
path only.  Code -2 for a stale context token is not published; it is what a
refused reply looks like in the field and what the test peer answers.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from typing import Any

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from gateway.core.errors import AuthFailed, PeerUnavailable, PeerUnreachable, ReplyWindowClosed
from gateway.endpoints import origin, why_unreachable

PLATFORM = "weixin"
CHANNEL_VERSION = "1.0.0"
"""What this client says it is in ``base_info``."""
SESSION_EXPIRED = "-14"
CONTEXT_STALE = "-2"
KINDS = {SESSION_EXPIRED: ErrorKind.AUTH_FAILED}
RET = BodyCodes(code_field="ret", kinds=KINDS)
ERRCODE = BodyCodes(code_field="errcode", kinds=KINDS)
TIMEOUT = httpx.Timeout(15.0, connect=5.0)
log = logging.getLogger(__name__)


class SessionExpired(AuthFailed):
    """The QR login's session ended: only the teacher scanning again brings the account back."""


def login_command(account: str) -> str:
    """The command that brings an account back, as the teacher types it."""
    return f"partners channels login weixin {account}"


def _uin() -> str:
    """``X-WECHAT-UIN``: a random unsigned 32-bit number, as decimal text in base64, fresh per request."""
    return base64.b64encode(str(secrets.randbits(32)).encode()).decode()


class IlinkApi:
    """One bot's calls to iLink, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, base_url: str, token: str | None, *, account: str, client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._token, self.account = token, account
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None

    def _failed(self, path: str, response: httpx.Response) -> dict[str, Any]:
        parsed = json_body(response.content)
        for codes in (ERRCODE, RET):
            found = codes.failure(parsed)
            if found is None:
                continue
            if found[0] == SESSION_EXPIRED:
                raise SessionExpired(PLATFORM, f"{path}: the WeChat login session expired; scan again: "
                                               f"{login_command(self.account)}", code=SESSION_EXPIRED)
            if found[0] == CONTEXT_STALE and path.endswith("sendmessage"):
                raise ReplyWindowClosed(PLATFORM, f"{path}: the learner's context token is no longer good",
                                        code=CONTEXT_STALE)
            failed = translate(PLATFORM, path, response.status_code, response.headers, parsed, codes=codes)
            if failed is not None:
                raise failed
        failed = translate(PLATFORM, path, response.status_code, response.headers, parsed)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def _request(self, method: str, path: str, *, body: dict[str, Any] | None = None,
                       params: dict[str, str] | None = None, timeout: float | None = None) -> dict[str, Any]:
        headers = {"X-WECHAT-UIN": _uin()}
        if self._token is not None:
            headers |= {"AuthorizationType": "ilink_bot_token", "Authorization": f"Bearer {self._token}"}
        content = None
        if body is not None:
            content = json.dumps({**body, "base_info": {"channel_version": CHANNEL_VERSION}}, ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        wait = httpx.Timeout(timeout + 10.0, connect=5.0) if timeout is not None else TIMEOUT
        try:
            response = await self._client.request(method, self.base_url + path, content=content, params=params,
                                                  headers=headers, timeout=wait)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.base_url), why, check="the network or base_url",
                                      action=path) from None
            raise PeerUnavailable(PLATFORM, f"{path}: {type(error).__name__}") from None
        return self._failed(path, response)

    # ------------------------------------------------------------------ login (no token yet)

    async def qrcode(self) -> tuple[str, str]:
        """A fresh login QR code: its id, and the link it encodes (what a phone scans)."""
        said = await self._request("GET", "ilink/bot/get_bot_qrcode", params={"bot_type": "3"})
        code, link = said.get("qrcode"), said.get("qrcode_img_content")
        if not isinstance(code, str) or not code or not isinstance(link, str) or not link:
            raise PeerUnavailable(PLATFORM, "ilink/bot/get_bot_qrcode: the answer has no qrcode")
        return code, link

    async def qrcode_status(self, code: str, *, timeout: float) -> dict[str, Any]:
        """Where the scan is (``wait``, ``scaned``, ``confirmed``, ``expired``); held open by the platform a while."""
        return await self._request("GET", "ilink/bot/get_qrcode_status", params={"qrcode": code}, timeout=timeout)

    # ------------------------------------------------------------------ the bot

    async def get_updates(self, cursor: str, *, timeout: float) -> dict[str, Any]:
        """One long poll from ``cursor`` (empty: from where the platform starts)."""
        return await self._request("POST", "ilink/bot/getupdates", body={"get_updates_buf": cursor}, timeout=timeout)

    async def send_text(self, to: str, context_token: str, text: str, *, client_id: str) -> None:
        """One finished bot text message answering the learner's message that carried ``context_token``."""
        await self.send_item(to, context_token, {"type": 1, "text_item": {"text": text}}, client_id=client_id)

    async def send_item(self, to: str, context_token: str, item: dict[str, Any], *, client_id: str) -> None:
        """One finished bot message of one ``item_list`` entry (a text, or an uploaded image, video or file)."""
        await self._request("POST", "ilink/bot/sendmessage", body={"msg": {
            "from_user_id": "", "to_user_id": to, "client_id": client_id, "message_type": 2, "message_state": 2,
            "context_token": context_token, "item_list": [item]}})

    async def upload_url(self, ask: dict[str, Any]) -> dict[str, Any]:
        """``getuploadurl``: where the CDN takes one encrypted file (``ask`` is built by the upload module)."""
        return await self._request("POST", "ilink/bot/getuploadurl", body=ask)

    async def typing_ticket(self, user: str, context_token: str | None) -> str | None:
        """The ticket ``sendtyping`` needs for ``user`` (``getconfig``); None when the platform gives none."""
        said = await self._request("POST", "ilink/bot/getconfig",
                                   body={"ilink_user_id": user, **({"context_token": context_token} if context_token else {})})
        ticket = said.get("typing_ticket")
        return ticket if isinstance(ticket, str) and ticket else None

    async def send_typing(self, user: str, ticket: str, *, typing: bool = True) -> None:
        await self._request("POST", "ilink/bot/sendtyping",
                            body={"ilink_user_id": user, "typing_ticket": ticket, "status": 1 if typing else 2})

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
