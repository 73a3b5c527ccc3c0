"""An emulated WeCom for a self-built app: the encrypted callbacks WeCom sends, and the ``cgi-bin`` API it serves.

Written from WeCom's documentation of receiving messages, the callback
encryption and sending app messages (W2, W4):

- **Callbacks.**  ``verify_url`` sends the GET the admin console sends when
  the admin saves the API receive settings: ``msg_signature``, ``timestamp``,
  ``nonce`` and an ``echostr`` encrypted with the EncodingAESKey and the
  corpid; it expects the plaintext back.  ``say`` posts a member's text message
  as XML encrypted into ``<Encrypt>``, ``msg_signature`` = SHA-1(sorted
  Token, timestamp, nonce, ciphertext).  Any 200 counts as received; anything
  else is tried again with the same ``MsgId`` (tests/peers/tencent_api.py).
- **API.**  ``GET /cgi-bin/gettoken`` hands out an ``access_token`` for the
  right corpid and secret (``expires_in`` 7200; else 40001); ``POST
  /cgi-bin/message/send`` takes a text app message for the right ``agentid``,
  refuses content over 2,048 bytes (45002) and records what it took.
- **Faults.**  ``expire_token()`` ends every token handed out (the next send
  gets 42001; a token never handed out gets 40014); ``fail_next(45009)`` makes
  the next send fail with that code.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import wechat_signature
from channels._kit.wechat_xml import write_fields
from tests.peers.tencent_api import TOKEN_LIFE_S, TencentPeer, encoding_aes_key

TEXT_LIMIT_BYTES = 2048


@dataclass
class WecomApp(TencentPeer):
    """One company's self-built app at the emulated WeCom, and the members who write to it."""

    corpid: str = field(default_factory=lambda: "ww" + secrets.token_hex(8))
    corpsecret: str = field(default_factory=lambda: secrets.token_hex(16))
    agentid: int = 1000002
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    aes_key: str = field(default_factory=encoding_aes_key)

    @property
    def crypto(self) -> WechatCrypto:
        return WechatCrypto(self.aes_key, self.corpid)

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/gettoken", self._gettoken),
                                 Route("/cgi-bin/message/send", self._send, methods=["POST"])])

    async def _gettoken(self, request: Request) -> JSONResponse:
        query = request.query_params
        if query.get("corpid") != self.corpid:
            return JSONResponse({"errcode": 40013, "errmsg": "invalid corpid"})
        if query.get("corpsecret") != self.corpsecret:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        return JSONResponse({"errcode": 0, "errmsg": "ok", "access_token": self.issue_token(),
                             "expires_in": TOKEN_LIFE_S})

    async def _send(self, request: Request) -> JSONResponse:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        body = json.loads(await request.body())
        if body.get("agentid") != self.agentid:
            return self.error(40056, "invalid agentid")
        content = body.get("text", {}).get("content", "")
        if body.get("msgtype") != "text" or not content:
            return self.error(44004, "empty content")
        if len(content.encode()) > TEXT_LIMIT_BYTES:
            return self.error(45002, "content size out of limit")
        self.sent.append(body)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})

    # ------------------------------------------------------------------ callbacks

    def _query(self, encrypted: str, *, timestamp: int | None = None, token: str | None = None) -> dict:
        stamp, nonce = str(int(time.time()) if timestamp is None else timestamp), secrets.token_hex(5)
        return {"msg_signature": wechat_signature(token or self.token, stamp, nonce, encrypted),
                "timestamp": stamp, "nonce": nonce}

    def message(self, userid: str, text: str, *, msg_id: str | None = None) -> bytes:
        return write_fields({"ToUserName": self.corpid, "FromUserName": userid, "CreateTime": int(time.time()),
                             "MsgType": "text", "Content": text, "MsgId": msg_id or self.next_msg_id(),
                             "AgentID": self.agentid})

    def envelope(self, plain: bytes, **signing) -> tuple[dict, bytes]:
        """The query and body WeCom would post for ``plain``."""
        encrypted = self.crypto.encrypt(plain)
        body = write_fields({"ToUserName": self.corpid, "AgentID": self.agentid, "Encrypt": encrypted})
        return self._query(encrypted, **signing), body

    def accepted(self, to: str, status: int, body: str) -> bool:
        return status == 200

    async def say(self, userid: str, text: str, *, msg_id: str | None = None, attempts: int = 1) -> str:
        """A member writes: the callback posted, and retried as WeCom retries it; returns its MsgId.

        ``attempts`` above one posts again after a 200, as WeCom does when that 200 was lost on the way."""
        msg_id = msg_id or self.next_msg_id()
        plain = self.message(userid, text, msg_id=msg_id)
        await self.deliver(userid, msg_id, lambda: self.envelope(plain), attempts=attempts)
        return msg_id

    async def verify_url(self, *, token: str | None = None) -> httpx.Response:
        echostr = secrets.token_hex(8)
        encrypted = self.crypto.encrypt(echostr)
        return await self.get_callback({**self._query(encrypted, token=token), "echostr": encrypted}, echostr)
