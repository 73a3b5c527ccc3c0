"""An emulated WeCom for a self-built app: the encrypted callbacks WeCom sends, and the ``cgi-bin`` API it serves.

Written from WeCom's documentation of receiving messages, the callback
encryption and sending app messages (W2, W4):

- **Callbacks.**  ``verify_url`` sends the GET the admin console sends when
  the admin saves the API receive settings: ``msg_signature``, ``timestamp``,
  ``nonce`` and an ``echostr`` encrypted with the EncodingAESKey and the
  corpid; it expects the plaintext back.  ``say`` posts a member's text message
  as XML encrypted into ``<Encrypt>``, ``msg_signature`` = SHA-1(sorted
  Token, timestamp, nonce, ciphertext).  Any 200 counts as received; anything
  else -- no answer within ``retry_after_s`` (WeCom's 5 s, shortened by
  tests), nobody listening, an error status -- is tried again with the same
  ``MsgId``, three retries in all.
- **API.**  ``GET /cgi-bin/gettoken`` hands out an ``access_token`` for the
  right corpid and secret (``expires_in`` 7200; else 40001); ``POST
  /cgi-bin/message/send`` takes a text app message for the right ``agentid``,
  refuses content over 2,048 bytes (45002) and records what it took.
- **Faults.**  ``expire_token()`` ends every token handed out (the next send
  gets 42001); ``fail_next(45009)`` makes the next send fail with that code.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import wechat_signature
from channels._kit.wechat_xml import write_fields
from gateway.http.server import serve_http
from tests.waits import HANG_S, HTTP_S

RETRIES = 3
TEXT_LIMIT_BYTES = 2048


@dataclass
class Delivery:
    """One POST of a callback and what the gateway answered (``status`` 0: no answer, see ``failed``)."""

    msg_id: str
    attempt: int
    status: int
    body: str
    failed: str = ""


@dataclass
class WecomApp:
    """One company's self-built app at the emulated WeCom, and the members who write to it."""

    callback_url: str = ""
    corpid: str = field(default_factory=lambda: "ww" + secrets.token_hex(8))
    corpsecret: str = field(default_factory=lambda: secrets.token_hex(16))
    agentid: int = 1000002
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    aes_key: str = field(default_factory=lambda: secrets.token_urlsafe(48).replace("-", "a").replace("_", "b")[:43])
    retry_after_s: float = 5.0
    sent: list[dict] = field(default_factory=list)
    """Every app message WeCom took, as posted."""
    refused: list[int] = field(default_factory=list)
    """Every errcode a send was answered with."""
    deliveries: list[Delivery] = field(default_factory=list)
    tokens_issued: int = 0
    _good_tokens: set[str] = field(default_factory=set)
    _expired: set[str] = field(default_factory=set)
    _faults: list[int] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(int(time.time()) * 1000))

    @property
    def crypto(self) -> WechatCrypto:
        return WechatCrypto(self.aes_key, self.corpid)

    # ------------------------------------------------------------------ faults

    def expire_token(self) -> None:
        self._expired |= self._good_tokens
        self._good_tokens.clear()

    def fail_next(self, errcode: int) -> None:
        self._faults.append(errcode)

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/gettoken", self._gettoken),
                                 Route("/cgi-bin/message/send", self._send, methods=["POST"])])

    def _error(self, code: int, message: str) -> JSONResponse:
        self.refused.append(code)
        return JSONResponse({"errcode": code, "errmsg": message})

    async def _gettoken(self, request: Request) -> JSONResponse:
        query = request.query_params
        if query.get("corpid") != self.corpid:
            return JSONResponse({"errcode": 40013, "errmsg": "invalid corpid"})
        if query.get("corpsecret") != self.corpsecret:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        token = "T" + secrets.token_hex(12)
        self._good_tokens.add(token)
        self.tokens_issued += 1
        return JSONResponse({"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200})

    async def _send(self, request: Request) -> JSONResponse:
        token = request.query_params.get("access_token")
        if token in self._expired:
            return self._error(42001, "access_token expired")
        if token not in self._good_tokens:
            return self._error(40014, "invalid access_token")
        if self._faults:
            code = self._faults.pop(0)
            return self._error(code, f"injected {code}")
        body = json.loads(await request.body())
        if body.get("agentid") != self.agentid:
            return self._error(40056, "invalid agentid")
        content = body.get("text", {}).get("content", "")
        if body.get("msgtype") != "text" or not content:
            return self._error(44004, "empty content")
        if len(content.encode()) > TEXT_LIMIT_BYTES:
            return self._error(45002, "content size out of limit")
        self.sent.append(body)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})

    def texts_to(self, userid: str) -> list[str]:
        return [m["text"]["content"] for m in self.sent if m["touser"] == userid]

    # ------------------------------------------------------------------ callbacks

    def _query(self, encrypted: str, *, timestamp: int | None = None, token: str | None = None) -> dict:
        stamp, nonce = str(int(time.time()) if timestamp is None else timestamp), secrets.token_hex(5)
        return {"msg_signature": wechat_signature(token or self.token, stamp, nonce, encrypted),
                "timestamp": stamp, "nonce": nonce}

    def message(self, userid: str, text: str, *, msg_id: str | None = None) -> bytes:
        return write_fields({"ToUserName": self.corpid, "FromUserName": userid, "CreateTime": int(time.time()),
                             "MsgType": "text", "Content": text, "MsgId": msg_id or str(next(self._ids)),
                             "AgentID": self.agentid})

    def envelope(self, plain: bytes, **signing) -> tuple[dict, bytes]:
        """The query and body WeCom would post for ``plain``."""
        encrypted = self.crypto.encrypt(plain)
        body = write_fields({"ToUserName": self.corpid, "AgentID": self.agentid, "Encrypt": encrypted})
        return self._query(encrypted, **signing), body

    async def post(self, query: dict, body: bytes) -> httpx.Response:
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
            return await http.post(self.callback_url, params=query, content=body, headers={"Content-Type": "text/xml"})

    async def say(self, userid: str, text: str, *, msg_id: str | None = None, attempts: int = 1) -> str:
        """A member writes: the callback posted, and retried as WeCom retries it; returns its MsgId.

        ``attempts`` above one posts again after a 200, as WeCom does when that 200 was lost on the way."""
        msg_id = msg_id or str(next(self._ids))
        plain = self.message(userid, text, msg_id=msg_id)
        answered = 0
        for attempt in range(1 + RETRIES):
            query, body = self.envelope(plain)
            began = time.monotonic()
            try:
                async with httpx.AsyncClient(timeout=self.retry_after_s, trust_env=False) as http:
                    answer = await http.post(self.callback_url, params=query, content=body)
                status, said, failed = answer.status_code, answer.text, ""
            except httpx.TransportError as error:
                status, said, failed = 0, "", type(error).__name__
            self.deliveries.append(Delivery(msg_id, attempt, status, said, failed))
            if status == 200:
                answered += 1
                if answered >= attempts:
                    break
                continue
            await asyncio.sleep(max(0.0, self.retry_after_s - (time.monotonic() - began)))
        return msg_id

    async def verify_url(self, *, token: str | None = None) -> httpx.Response:
        echostr = secrets.token_hex(8)
        encrypted = self.crypto.encrypt(echostr)
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
            answer = await http.get(self.callback_url, params={**self._query(encrypted, token=token), "echostr": encrypted})
        answer.extensions["echostr"] = echostr
        return answer


@contextlib.asynccontextmanager
async def serving(app: WecomApp) -> AsyncIterator[str]:
    """The emulated ``qyapi.weixin.qq.com`` on a free loopback port; yields its base URL (ending in ``/``)."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(app.app(), "127.0.0.1", 0, on_ready=ready.set_result, shutdown_timeout=1))
    try:
        yield (await asyncio.wait_for(ready, HANG_S)).rstrip("/") + "/"
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
