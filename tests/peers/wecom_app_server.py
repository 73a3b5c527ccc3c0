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
- **Media.**  ``POST /cgi-bin/media/upload?type=image|file`` takes one
  multipart field ``media`` (more than 5 bytes; an image at most 10 MB, a file
  20 MB) and answers a ``media_id``; ``message/send`` takes msgtype ``image`` or
  ``file`` naming one, and ``news`` (1-8 articles, each a title of at most 128
  bytes and a ``url``, an optional ``picurl``).  ``GET /cgi-bin/media/get?media_id=``
  serves a file a member sent (``say_file`` posts its callback: image with
  ``PicUrl`` and ``MediaId``, voice with ``Format``) with its type and a
  ``Content-disposition`` name, or a 200 with errcode 40007 for an unknown id.
- **Faults.**  ``expire_token()`` ends every token handed out (the next send
  gets 42001; a token never handed out gets 40014); ``fail_next(45009)`` makes
  the next send fail with that code; ``fail_upload(503)`` answers the next
  upload with that HTTP status.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
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
from channels._kit.wechat_xml import read_fields, write_fields
from tests.peers.tencent_api import TOKEN_LIFE_S, TencentPeer, encoding_aes_key

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
class WecomApp(TencentPeer):
    """One company's self-built app at the emulated WeCom, and the members who write to it."""

    corpid: str = field(default_factory=lambda: "ww" + secrets.token_hex(8))
    corpsecret: str = field(default_factory=lambda: secrets.token_hex(16))
    agentid: int = 1000002
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    aes_key: str = field(default_factory=encoding_aes_key)
    uploads: list[Material] = field(default_factory=list)
    """Every file the app uploaded, in order (a failed upload is not one)."""
    upload_attempts: int = 0
    materials: dict[str, Material] = field(default_factory=dict)
    _upload_faults: list[int] = field(default_factory=list)
    send_delay_s: float = 0.0
    """How long ``message/send`` takes to answer a text it already took (a slow WeCom)."""

    @property
    def crypto(self) -> WechatCrypto:
        return WechatCrypto(self.aes_key, self.corpid)

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/gettoken", self._gettoken),
                                 Route("/cgi-bin/message/send", self._send, methods=["POST"]),
                                 Route("/cgi-bin/media/upload", self._upload, methods=["POST"]),
                                 Route("/cgi-bin/media/get", self._media_get)])

    def fail_upload(self, status: int) -> None:
        self._upload_faults.append(status)

    async def _gettoken(self, request: Request) -> JSONResponse:
        query = request.query_params
        if query.get("corpid") != self.corpid:
            return JSONResponse({"errcode": 40013, "errmsg": "invalid corpid"})
        if query.get("corpsecret") != self.corpsecret:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        return JSONResponse({"errcode": 0, "errmsg": "ok", "access_token": self.issue_token(),
                             "expires_in": TOKEN_LIFE_S})

    async def _send(self, request: Request) -> JSONResponse:
        self.send_calls += 1
        refused = self.refusal(request)
        if refused is not None:
            return refused
        body = json.loads(await request.body())
        if body.get("agentid") != self.agentid:
            return self.error(40056, "invalid agentid")
        if body.get("msgtype") == "news":
            articles = (body.get("news") or {}).get("articles") or []
            if not 1 <= len(articles) <= 8 or not all(a.get("title") and a.get("url") for a in articles):
                return self.error(41016, "invalid news articles")
            if any(len(a["title"].encode()) > 128 for a in articles):
                return self.error(45002, "content size out of limit")
            return self._took(body)
        if body.get("msgtype") in MEDIA_MSGTYPES:
            if (body.get(body["msgtype"]) or {}).get("media_id") not in self.materials:
                return self.error(40007, "invalid media_id")
            return self._took(body)
        content = body.get("text", {}).get("content", "")
        if body.get("msgtype") != "text" or not content:
            return self.error(44004, "empty content")
        if len(content.encode()) > TEXT_LIMIT_BYTES:
            return self.error(45002, "content size out of limit")
        self.took(body)
        if self.send_delay_s:  # posted already; the answer comes late (a slow WeCom)
            await asyncio.sleep(self.send_delay_s)
        return self._answer()

    def _took(self, body: dict) -> JSONResponse:
        self.took(body)
        return self._answer()

    def _answer(self) -> JSONResponse:
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "m" + secrets.token_hex(6)})

    def texts_to(self, to: str) -> list[str]:
        return [m["text"]["content"] for m in self.sent if m["touser"] == to and m["msgtype"] == "text"]

    def files_to(self, userid: str) -> list[tuple[str, Material]]:
        """Every image or file message to ``userid``: its msgtype and the material it named."""
        return [(m["msgtype"], self.materials[m[m["msgtype"]]["media_id"]]) for m in self.sent
                if m["touser"] == userid and m["msgtype"] in MEDIA_MSGTYPES]

    # ------------------------------------------------------------------ media

    def _token_refusal(self, request: Request) -> JSONResponse | None:
        """A stale or unknown token's refusal (media calls: ``fail_next`` faults are the sends')."""
        token = request.query_params.get("access_token")
        if token in self._expired:
            return self.error(*self.EXPIRED)
        if token not in self._good_tokens:
            return self.error(*self.NOT_A_TOKEN)
        return None

    async def _upload(self, request: Request) -> Response:
        self.upload_attempts += 1
        if (refused := self._token_refusal(request)) is not None:
            return refused
        if self._upload_faults:
            return Response(b"<html>busy</html>", status_code=self._upload_faults.pop(0), media_type="text/html")
        kind = request.query_params.get("type", "")
        if kind not in UPLOAD_LIMITS:
            return self.error(40004, "invalid media type")
        found = multipart_file(request.headers.get("content-type", ""), await request.body())
        if found is None or found[0] != "media":
            return self.error(41001, "missing media")
        _, filename, content_type, data = found
        if len(data) <= 5 or len(data) > UPLOAD_LIMITS[kind]:
            return self.error(40006, "invalid file size")
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
            return self.error(40007, "invalid media_id")
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
        fields |= {"MsgId": msg_id or self.next_msg_id(), "AgentID": self.agentid}
        return write_fields(fields)

    async def say_file(self, userid: str, kind: str, data: bytes, content_type: str, name: str, *,
                       msg_id: str | None = None) -> str:
        """A member sends an image (or a voice message, a video): kept at WeCom, its callback posted."""
        return await self.say_plain(userid, self.file_message(userid, kind, self.keep(kind, data, content_type, name),
                                                              msg_id=msg_id))

    async def say_plain(self, userid: str, plain: bytes) -> str:
        """Post one callback's plaintext, encrypted, retried as WeCom does; returns its MsgId."""
        msg_id = read_fields(plain)["MsgId"]
        await self.deliver(userid, msg_id, lambda: self.envelope(plain))
        return msg_id

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
