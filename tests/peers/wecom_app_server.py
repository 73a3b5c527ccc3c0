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
- **Media.**  ``POST /cgi-bin/media/upload?type=image|file`` takes one
  multipart field ``media`` (more than 5 bytes; an image at most 10 MB, a file
  20 MB) and answers a ``media_id``; ``message/send`` takes msgtype ``image`` or
  ``file`` naming one.  ``GET /cgi-bin/media/get?media_id=`` serves a file a
  member sent (``say_file`` posts its callback: image with ``PicUrl`` and
  ``MediaId``, voice with ``Format``) with its type and a
  ``Content-disposition`` name, or a 200 with errcode 40007 for an unknown id.
  A ``news`` message (1-8 articles, each a title of at most 128 bytes and a
  ``url``, an optional ``picurl``) is taken as it is.
- **Faults.**  ``expire_token()`` ends every token handed out (the next send
  gets 42001); ``fail_next(45009)`` makes the next send fail with that code;
  ``fail_upload(503)`` answers the next upload with that HTTP status.
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
from email.parser import BytesParser
from email.policy import HTTP

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import wechat_signature
from channels._kit.wechat_xml import write_fields
from gateway.http.server import serve_http
from tests.waits import HANG_S, HTTP_S

RETRIES = 3
TEXT_LIMIT_BYTES = 2048
UPLOAD_LIMITS = {"image": 10 * 1024 * 1024, "voice": 2 * 1024 * 1024, "video": 10 * 1024 * 1024, "file": 20 * 1024 * 1024}
MEDIA_MSGTYPES = ("image", "file", "voice", "video")


@dataclass(frozen=True)
class Material:
    """A file WeCom keeps under a ``media_id``: uploaded by the app, or sent by a member."""

    kind: str
    name: str
    content_type: str
    data: bytes


def multipart_file(content_type: str, body: bytes) -> tuple[str, str, str, bytes] | None:
    """``(field, filename, type, bytes)`` of the first file in a multipart/form-data body."""
    parsed = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    for part in parsed.iter_parts() if parsed.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        if filename is not None:
            return str(name), filename, part.get_content_type(), part.get_payload(decode=True) or b""
    return None


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
    uploads: list[Material] = field(default_factory=list)
    """Every file the app uploaded, in order (a failed upload is not one)."""
    upload_attempts: int = 0
    materials: dict[str, Material] = field(default_factory=dict)
    _upload_faults: list[int] = field(default_factory=list)
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

    def fail_upload(self, status: int) -> None:
        self._upload_faults.append(status)

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/gettoken", self._gettoken),
                                 Route("/cgi-bin/message/send", self._send, methods=["POST"]),
                                 Route("/cgi-bin/media/upload", self._upload, methods=["POST"]),
                                 Route("/cgi-bin/media/get", self._media_get)])

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
        if body.get("msgtype") == "news":
            articles = (body.get("news") or {}).get("articles") or []
            if not 1 <= len(articles) <= 8 or not all(a.get("title") and a.get("url") for a in articles):
                return self._error(41016, "invalid news articles")
            if any(len(a["title"].encode()) > 128 for a in articles):
                return self._error(45002, "content size out of limit")
            self.sent.append(body)
            return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})
        if body.get("msgtype") in MEDIA_MSGTYPES:
            media_id = (body.get(body["msgtype"]) or {}).get("media_id")
            if media_id not in self.materials:
                return self._error(40007, "invalid media_id")
            self.sent.append(body)
            return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})
        content = body.get("text", {}).get("content", "")
        if body.get("msgtype") != "text" or not content:
            return self._error(44004, "empty content")
        if len(content.encode()) > TEXT_LIMIT_BYTES:
            return self._error(45002, "content size out of limit")
        self.sent.append(body)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})

    def texts_to(self, userid: str) -> list[str]:
        return [m["text"]["content"] for m in self.sent if m["touser"] == userid and m["msgtype"] == "text"]

    def files_to(self, userid: str) -> list[tuple[str, Material]]:
        """Every image or file message to ``userid``: its msgtype and the material it named."""
        return [(m["msgtype"], self.materials[m[m["msgtype"]]["media_id"]]) for m in self.sent
                if m["touser"] == userid and m["msgtype"] in MEDIA_MSGTYPES]

    # ------------------------------------------------------------------ media

    def _token_refusal(self, request: Request) -> JSONResponse | None:
        token = request.query_params.get("access_token")
        if token in self._expired:
            return self._error(42001, "access_token expired")
        if token not in self._good_tokens:
            return self._error(40014, "invalid access_token")
        return None

    async def _upload(self, request: Request) -> Response:
        self.upload_attempts += 1
        if (refused := self._token_refusal(request)) is not None:
            return refused
        if self._upload_faults:
            return Response(b"<html>busy</html>", status_code=self._upload_faults.pop(0), media_type="text/html")
        kind = request.query_params.get("type", "")
        if kind not in UPLOAD_LIMITS:
            return self._error(40004, "invalid media type")
        found = multipart_file(request.headers.get("content-type", ""), await request.body())
        if found is None or found[0] != "media":
            return self._error(41001, "missing media")
        _, filename, content_type, data = found
        if len(data) <= 5 or len(data) > UPLOAD_LIMITS[kind]:
            return self._error(40006, "invalid file size")
        material = Material(kind, filename, content_type, data)
        media_id = "M" + secrets.token_hex(16)
        self.materials[media_id] = material
        self.uploads.append(material)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "type": kind, "media_id": media_id,
                             "created_at": str(int(time.time()))})

    async def _media_get(self, request: Request) -> Response:
        if (refused := self._token_refusal(request)) is not None:
            return refused
        material = self.materials.get(request.query_params.get("media_id", ""))
        if material is None:
            return self._error(40007, "invalid media_id")
        return Response(material.data, media_type=material.content_type,
                        headers={"Content-disposition": f'attachment; filename="{material.name}"'})

    def keep(self, kind: str, data: bytes, content_type: str, name: str) -> str:
        """A file a member sent, kept at WeCom under a new ``media_id`` (three days, at the real one)."""
        media_id = "S" + secrets.token_hex(16)
        self.materials[media_id] = Material(kind, name, content_type, data)
        return media_id

    def file_message(self, userid: str, kind: str, media_id: str, *, msg_id: str | None = None,
                     voice_format: str = "amr") -> bytes:
        """The plaintext callback of a member's image or voice message (video: like voice, no Format)."""
        fields = {"ToUserName": self.corpid, "FromUserName": userid, "CreateTime": int(time.time()), "MsgType": kind}
        if kind == "image":
            fields["PicUrl"] = f"https://wework.qpic.cn/wwpic/{media_id}/0"
        fields["MediaId"] = media_id
        if kind == "voice":
            fields["Format"] = voice_format
        fields |= {"MsgId": msg_id or str(next(self._ids)), "AgentID": self.agentid}
        return write_fields(fields)

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
        return await self.deliver(self.message(userid, text, msg_id=msg_id), msg_id, attempts=attempts)

    async def say_file(self, userid: str, kind: str, data: bytes, content_type: str, name: str, *,
                       msg_id: str | None = None) -> str:
        """A member sends an image (or a voice message, a video): kept at WeCom, its callback posted."""
        msg_id = msg_id or str(next(self._ids))
        media_id = self.keep(kind, data, content_type, name)
        return await self.deliver(self.file_message(userid, kind, media_id, msg_id=msg_id), msg_id)

    async def deliver(self, plain: bytes, msg_id: str, *, attempts: int = 1) -> str:
        """Post one callback's plaintext, encrypted, and retry it as WeCom does; returns ``msg_id``."""
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
