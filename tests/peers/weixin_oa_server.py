"""An emulated WeChat Official Account platform: the callbacks WeChat sends, and the ``cgi-bin`` API it serves.

Written from WeChat's documentation of the Official Account server
configuration, message encryption and customer-service messages (X1, X2, X3):

- **Callbacks.**  ``verify_url`` sends the GET the admin console sends when the
  teacher saves the server configuration (``signature``, ``timestamp``,
  ``nonce``, ``echostr``) and expects ``echostr`` back.  ``say`` posts a
  learner's text message as XML, signed with ``signature`` =
  SHA-1(sorted token, timestamp, nonce); in safe mode the XML is encrypted
  into ``<Encrypt>`` with the EncodingAESKey and the appid, and
  ``msg_signature`` covers the ciphertext too; compatible mode sends both
  copies.  An answer that is not 200 with ``success``, an empty body or a
  reply XML counts as none; a reply XML (sealed in safe mode, its
  ``MsgSignature`` checked) is a *passive reply*, shown to the learner and
  recorded in ``passive``; and WeChat tries the same ``MsgId`` again, three
  retries in all (tests/peers/tencent_api.py) -- whether that one timed out,
  found nobody listening (a gateway that is down) or got a wrong answer.  A
  message whose retries all failed is lost, as on WeChat; ``acknowledged``
  tells them apart.
- **API.**  ``GET /cgi-bin/token`` hands out an ``access_token`` for the
  right appid and secret (``expires_in`` 7200); ``POST
  /cgi-bin/message/custom/send`` takes a text message to a learner who wrote in
  the last 48 hours, at most five per learner message, and records it.
  Errors are 200s with ``errcode``: 40001 (token not good), 40125 (bad
  secret), 45015 (out of the window), 45047 (quota used up).
- **Faults.**  ``expire_token()`` ends the current token (the next send gets
  40001 once the token it carries is the old one); ``fail_next(45015)`` makes
  the next send fail with that code (45009 quota, -1 system busy: any code);
  ``send_latency_s`` answers a send late, after taking it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import ClassVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import wechat_signature
from channels._kit.wechat_xml import opened, read_fields, write_fields
from tests.peers.tencent_api import TOKEN_LIFE_S, TencentPeer, encoding_aes_key

WINDOW_S = 48 * 3600
QUOTA = 5
STALE = (40001, "invalid credential, access_token is invalid or not latest")


@dataclass
class WechatOA(TencentPeer):
    """One Official Account at the emulated WeChat, and the learners who write to it."""

    EXPIRED: ClassVar[tuple[int, str]] = STALE
    NOT_A_TOKEN: ClassVar[tuple[int, str]] = STALE

    mode: str = "safe"
    appid: str = field(default_factory=lambda: "wx" + secrets.token_hex(8))
    appsecret: str = field(default_factory=lambda: secrets.token_hex(16))
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    aes_key: str = field(default_factory=encoding_aes_key)
    passive: list[dict] = field(default_factory=list)
    """Every passive reply WeChat took from a callback's answer, as its fields."""
    _last_said: dict[str, tuple[float, int]] = field(default_factory=dict)
    """OpenID -> when they last wrote, and the customer-service messages sent since."""
    send_latency_s: float = 0.0
    """How long ``message/custom/send`` takes to answer once it has taken the message."""

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/token", self._token), Route("/cgi-bin/message/custom/send",
                                                                            self._send, methods=["POST"])])

    async def _token(self, request: Request) -> JSONResponse:
        query = request.query_params
        if query.get("appid") != self.appid or query.get("secret") != self.appsecret:
            return JSONResponse({"errcode": 40125, "errmsg": "invalid appsecret"})
        return JSONResponse({"access_token": self.issue_token(), "expires_in": TOKEN_LIFE_S})

    async def _send(self, request: Request) -> JSONResponse:
        self.send_calls += 1
        refused = self.refusal(request)
        if refused is not None:
            return refused
        body = json.loads(await request.body())
        to = body.get("touser", "")
        said_at, used = self._last_said.get(to, (None, 0))
        if said_at is None or time.time() > said_at + WINDOW_S:
            return self.error(45015, "response out of time limit or subscription is canceled")
        if used >= QUOTA:
            return self.error(45047, "out of response count limit")
        if body.get("msgtype") != "text" or not body.get("text", {}).get("content"):
            return self.error(44003, "empty news data")
        self._last_said[to] = (said_at, used + 1)
        self.took(body)
        await asyncio.sleep(self.send_latency_s)
        return JSONResponse({"errcode": 0, "errmsg": "ok"})

    def cs_texts_to(self, openid: str) -> list[str]:
        return [m["text"]["content"] for m in self.sent if m["touser"] == openid and m.get("via") != "passive"]

    def read_answer(self, body: bytes) -> dict[str, str]:
        """A passive reply's fields, opened as WeChat opens it in this account's mode."""
        outer = read_fields(body)
        if "Encrypt" in outer:
            return opened(body, WechatCrypto(self.aes_key, self.appid), self.token)
        if self.mode == "safe":
            raise AssertionError("a safe-mode account answered in plaintext")
        return outer

    # ------------------------------------------------------------------ callbacks

    def _query(self, encrypted: str | None = None, *, timestamp: int | None = None, token: str | None = None) -> dict:
        stamp, nonce = str(int(time.time()) if timestamp is None else timestamp), secrets.token_hex(5)
        key = token or self.token
        query = {"signature": wechat_signature(key, stamp, nonce), "timestamp": stamp, "nonce": nonce,
                 "openid": "o-learner"}
        if encrypted is not None:
            query |= {"encrypt_type": "aes", "msg_signature": wechat_signature(key, stamp, nonce, encrypted)}
        return query

    def message(self, openid: str, text: str, *, msg_id: str | None = None, create_time: int | None = None) -> bytes:
        return write_fields({"ToUserName": "gh_account", "FromUserName": openid,
                             "CreateTime": int(time.time()) if create_time is None else create_time,
                             "MsgType": "text", "Content": text, "MsgId": msg_id or self.next_msg_id()})

    def envelope(self, plain: bytes, **signing) -> tuple[dict, bytes]:
        """The query and body WeChat would post for ``plain`` in this account's mode."""
        if self.mode == "plaintext":
            return self._query(**signing), plain
        encrypted = WechatCrypto(self.aes_key, self.appid).encrypt(plain)
        if self.mode == "safe":
            body = write_fields({"ToUserName": "gh_account", "Encrypt": encrypted})
        else:  # compatible: the plain fields and their encrypted copy
            body = plain.replace(b"</xml>", b"<Encrypt><![CDATA[" + encrypted.encode() + b"]]></Encrypt></xml>")
        return self._query(encrypted, **signing), body

    def accepted(self, to: str, status: int, body: str) -> bool:
        """``success``, an empty body, or a passive reply -- which WeChat shows the learner."""
        if status == 200 and body.startswith("<xml>"):
            fields = self.read_answer(body.encode())
            assert fields["ToUserName"] == to and fields["MsgType"] == "text", fields
            self.passive.append(fields)
            self.took({"touser": to, "msgtype": "text", "text": {"content": fields["Content"]}, "via": "passive"})
            return True
        return status == 200 and body in ("success", "")

    async def say(self, openid: str, text: str, *, msg_id: str | None = None, create_time: int | None = None) -> str:
        """A learner writes: the callback posted, and retried as WeChat retries it; returns its MsgId."""
        msg_id = msg_id or self.next_msg_id()
        plain = self.message(openid, text, msg_id=msg_id, create_time=create_time)
        self._last_said[openid] = (float(create_time if create_time is not None else time.time()), 0)
        await self.deliver(openid, msg_id, lambda: self.envelope(plain))
        return msg_id

    def acknowledged(self) -> set[str]:
        """The MsgIds some callback of which got a valid answer: the ones WeChat will not send again."""
        return {d.msg_id for d in self.deliveries if d.status == 200 and (d.body in ("success", "") or d.body.startswith("<xml>"))}

    async def verify_url(self, *, token: str | None = None) -> httpx.Response:
        echostr = secrets.token_hex(8)
        return await self.get_callback({**self._query(token=token), "echostr": echostr}, echostr)
