"""An emulated iLink bot API (personal WeChat): QR login, a long-poll queue per bot, and the replies it takes.

Written from the public descriptions of the iLink bot protocol:

- **QR login.**  ``GET ilink/bot/get_bot_qrcode?bot_type=3`` hands out a code
  and the link it encodes; ``GET ilink/bot/get_qrcode_status?qrcode=`` answers
  ``wait``, ``scaned`` (sic, the platform's spelling), ``confirmed`` with the
  ``bot_token``, ``ilink_bot_id``, ``ilink_user_id`` and ``baseurl``, or
  ``expired``.  It is held open until the state moves or ``hold_s`` passes.
  The test moves it with :meth:`IlinkPeer.scan` and :meth:`IlinkPeer.confirm`.
- **Messages.**  ``POST ilink/bot/getupdates`` with ``get_updates_buf`` returns
  every message after that position (``""``: from the start) and the position
  after them, held open up to ``hold_s`` when there is none.  A position from
  before is served again, which is how a client that crashed before storing
  its cursor sees the batch twice.  Each message carries a fresh
  ``context_token``.
- **Replies.**  ``POST ilink/bot/sendmessage`` takes a bot text message whose
  ``context_token`` is one it handed out, younger than ``token_ttl_s`` and
  used fewer than ``budget`` times; otherwise ``ret: -2``.  ``getconfig``
  hands out a ``typing_ticket``; ``sendtyping`` records its use.
- **CDN.**  :meth:`IlinkPeer.say_file` sends an image or a file (and
  :meth:`IlinkPeer.say_voice` a voice message) the way the platform does: the bytes AES-128-ECB encrypted (PKCS#7) under a fresh key,
  served by ``GET c2c/download?encrypted_query_param=``; the message carries
  the param and the key (base64 of its hex digits; an image also its hex
  ``aeskey``).
- **Files from the bot.**  ``POST ilink/bot/getuploadurl`` takes a file's
  ``filekey``, ``media_type``, ``to_user_id``, ``rawsize``, ``rawfilemd5``,
  ``filesize`` (the ciphertext's) and ``aeskey`` (hex) and hands out an
  ``upload_param``; ``POST c2c/upload?encrypted_query_param=&filekey=`` takes
  the ciphertext (exactly ``filesize`` bytes) and answers 200 with the
  download parameter in ``x-encrypted-param``.  A ``sendmessage`` whose item
  is an ``image_item``, ``video_item`` or ``file_item`` names that parameter
  and the key (``media.aes_key``, base64 of the hex); the emulator opens the
  ciphertext with that key, checks it against the size and MD5 the bot
  announced, and records the plaintext (:attr:`Sent.data`) -- what the
  learner's phone would show.  :meth:`IlinkPeer.fail_next_upload` answers the
  next upload with a status; :attr:`IlinkPeer.hold_uploads` keeps an upload,
  once stored, from answering until the test lets it (a process that dies
  in between).  ``GET _test/files/<name>`` serves :attr:`IlinkPeer.files`, a
  file a reply names by URL.
- **Control** (a test in another process: ``python -m tests.peers.weixin_ilink_server``):
  ``POST /_test/say`` ``{"learner", "text"}`` says a message, ``GET /_test/sent``
  lists the replies taken, ``GET /_test/refused`` those refused.  In that mode a login is confirmed at once (``auto_scan``).
- **Faults.**  :meth:`IlinkPeer.fail_next` answers the next POST (any call) with
  a status and body, :meth:`IlinkPeer.fail_next_send` the next ``sendmessage``
  only; while :attr:`IlinkPeer.down` every bot call answers 503;
  :attr:`IlinkPeer.send_latency_s` slows ``sendmessage``'s answer.  The
  platform publishes no rate-limit answer: a 429 with ``Retry-After`` is the
  HTTP one a front end gives.
- **Auth.**  Every POST needs ``Authorization: Bearer <bot_token>``
  (``AuthorizationType: ilink_bot_token``); after :meth:`IlinkPeer.expire_session`
  every call answers ``ret: -14`` (session expired).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.http.server import serve_http
from tests.waits import HANG_S

AHEAD = {"wait": "scaned", "scaned": "confirmed"}
EXPIRED = {"ret": -14, "errcode": -14, "errmsg": "session timeout"}


@dataclass
class Sent:
    to: str
    text: str
    context_token: str
    client_id: str
    kind: str = "text"
    """``text``, or the item a file went as: ``image``, ``video``, ``file``."""
    data: bytes = b""
    """A file's plaintext, opened with the key the message named."""
    name: str = ""
    at: float = field(default_factory=time.time)
    """When the platform took it, by this emulator's wall clock (what bench/channels.py times)."""


@dataclass
class Upload:
    """A file announced by ``getuploadurl``: what the bot said it is."""

    filekey: str
    media_type: int
    to: str
    rawsize: int
    md5: str
    filesize: int
    aeskey: str


ITEMS = {2: ("image", "image_item"), 4: ("file", "file_item"), 5: ("video", "video_item")}
MEDIA_TYPE = {"image": 1, "video": 2, "file": 3}


def _open(sealed: bytes, key: bytes) -> bytes:
    opened = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    unpad = padding.PKCS7(128).unpadder()
    return unpad.update(opened.update(sealed) + opened.finalize()) + unpad.finalize()


@dataclass
class Login:
    code: str
    status: str = "wait"


@dataclass
class IlinkPeer:
    bot_id: str = "bot-1@im.bot"
    user_id: str = "teacher@im.wechat"
    budget: int = 10
    token_ttl_s: float = 600.0
    hold_s: float = 0.5
    base_url: str = ""
    token: str = field(default_factory=lambda: "tok-" + secrets.token_hex(16))
    expired: bool = False
    logins: dict[str, Login] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    contexts: dict[str, tuple[str, float]] = field(default_factory=dict)
    """context token -> (learner, when handed out)."""
    used: dict[str, int] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    typing: list[str] = field(default_factory=list)
    faults: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    """Answers (status, body, headers) the next POSTs get instead of their own, first first."""
    send_faults: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    """The same, for the next ``sendmessage`` calls only (the long poll goes on meanwhile)."""
    send_statuses: list[int] = field(default_factory=list)
    """The HTTP status of every ``sendmessage`` answered, in order (a fault's too)."""
    down: bool = False
    """While set, every bot call answers 503 and the long poll holds nothing: the platform is away."""
    send_latency_s: float = 0.0
    """How long ``sendmessage`` takes to answer once it has taken the message."""
    auto_scan: bool = False
    """Each status answer moves the login one state on (wait, scaned, confirmed): a teacher scanning at once."""
    stale_next: int = 0
    """This many next replies are refused as if their context token had gone stale."""
    answered: list[str] = field(default_factory=list)
    """Every QR status answered, in order."""
    polls: list[str] = field(default_factory=list)
    """Every cursor a getupdates named, in order."""
    cdn: dict[str, bytes] = field(default_factory=dict)
    """encrypt_query_param -> the encrypted bytes the CDN serves."""
    announced: dict[str, Upload] = field(default_factory=dict)
    """upload_param -> the file getuploadurl was told of."""
    stored: dict[str, Upload] = field(default_factory=dict)
    """download param -> the announced file whose ciphertext the CDN took under it."""
    uploads: list[int] = field(default_factory=list)
    """The status of every upload the CDN answered (or would have, for a held one), in order."""
    cdn_faults: list[int] = field(default_factory=list)
    """Statuses the next uploads get instead of being stored, first first."""
    hold_uploads: asyncio.Event | None = None
    """While set to an unset event, a stored upload does not answer until the event is set."""
    held: int = 0
    """Uploads stored and waiting on :attr:`hold_uploads`."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Files served at ``_test/files/<name>`` (a reply's attachment by URL)."""
    _ids: itertools.count = field(default_factory=lambda: itertools.count(7_000_000_001))
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    # ------------------------------------------------------------------ what the test does

    async def say(self, learner: str, text: str) -> str:
        """A learner's text message to the bot; returns its ``message_id``."""
        return await self.say_items(learner, [{"type": 1, "text_item": {"text": text}}])

    async def say_items(self, learner: str, items: list[dict[str, Any]]) -> str:
        """A learner's message of these ``item_list`` entries, with a fresh context token; returns its id."""
        ident = next(self._ids)
        context = "ctx-" + secrets.token_hex(8)
        self.contexts[context] = (learner, time.monotonic())
        self.log.append({"message_id": ident, "from_user_id": learner, "to_user_id": self.bot_id,
                         "create_time_ms": int(time.time() * 1000), "message_type": 1, "message_state": 2,
                         "context_token": context, "item_list": items})
        await self._notify()
        return str(ident)

    def _sealed(self, data: bytes) -> tuple[dict[str, Any], bytes]:
        """``data`` on the CDN, encrypted under a fresh key: the ``media`` a message names it by, and the key."""
        key = secrets.token_bytes(16)
        pad = padding.PKCS7(128).padder()
        seal = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        param = "p-" + secrets.token_urlsafe(12)
        self.cdn[param] = seal.update(pad.update(data) + pad.finalize()) + seal.finalize()
        return {"encrypt_query_param": param, "aes_key": base64.b64encode(key.hex().encode()).decode(),
                "encrypt_type": 1}, key

    async def say_file(self, learner: str, data: bytes, *, image: bool = True, name: str = "notes.pdf") -> str:
        """A learner's image (or file) as the platform sends one: encrypted on the CDN, named in the message."""
        media, key = self._sealed(data)
        item = ({"type": 2, "image_item": {"media": media, "aeskey": key.hex()}} if image else
                {"type": 4, "file_item": {"media": media, "file_name": name, "len": str(len(data))}})
        return await self.say_items(learner, [item])

    async def say_voice(self, learner: str, data: bytes, *, transcript: str | None = None, encode_type: int = 6) -> str:
        """A learner's voice message: the recording (SILK by default) on the CDN, a transcript where the platform made one."""
        media, _ = self._sealed(data)
        voice: dict[str, Any] = {"media": media, "encode_type": encode_type, "sample_rate": 16000,
                                 "bits_per_sample": 16, "playtime": 1200}
        if transcript is not None:
            voice["text"] = transcript
        return await self.say_items(learner, [{"type": 3, "voice_item": voice}])

    async def say_again(self, message_id: str) -> None:
        """The platform handing the same message out once more (a redelivery)."""
        [raw] = [m for m in self.log if str(m["message_id"]) == message_id][:1]
        self.log.append(dict(raw))
        await self._notify()

    async def scan(self) -> None:
        await self._move("scaned")

    async def confirm(self) -> None:
        await self._move("confirmed")

    async def expire_qr(self) -> None:
        await self._move("expired")

    async def expire_session(self) -> None:
        self.expired = True
        await self._notify()

    def stale(self, context_token: str) -> None:
        """Age a context token past its life."""
        learner, _ = self.contexts[context_token]
        self.contexts[context_token] = (learner, time.monotonic() - self.token_ttl_s - 1)

    def texts_to(self, learner: str) -> list[str]:
        return [s.text for s in self.sent if s.to == learner and s.kind == "text"]

    def files_to(self, learner: str) -> list[Sent]:
        return [s for s in self.sent if s.to == learner and s.kind != "text"]

    def fail_next_upload(self, status: int) -> None:
        """The next CDN upload is answered ``status`` (and nothing stored)."""
        self.cdn_faults.append(status)

    async def _move(self, status: str) -> None:
        for login in self.logins.values():
            if login.status not in ("confirmed", "expired"):
                login.status = status
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _hold(self, ready: Any) -> None:
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(ready), self.hold_s)

    # ------------------------------------------------------------------ the API

    def app(self) -> Starlette:
        app = Starlette(routes=[
            Route("/ilink/bot/get_bot_qrcode", self._qrcode, methods=["GET"]),
            Route("/ilink/bot/get_qrcode_status", self._qrcode_status, methods=["GET"]),
            Route("/ilink/bot/getupdates", self._faulty(self._getupdates), methods=["POST"]),
            Route("/ilink/bot/sendmessage", self._faulty(self._sendmessage, send=True), methods=["POST"]),
            Route("/ilink/bot/getconfig", self._faulty(self._getconfig), methods=["POST"]),
            Route("/ilink/bot/sendtyping", self._faulty(self._sendtyping), methods=["POST"]),
            Route("/ilink/bot/getuploadurl", self._faulty(self._getuploadurl), methods=["POST"]),
            Route("/c2c/download", self._download, methods=["GET"]),
            Route("/c2c/upload", self._upload, methods=["POST"]),
            Route("/_test/files/{name}", self._test_file, methods=["GET"]),
            Route("/_test/say", self._test_say, methods=["POST"]),
            Route("/_test/sent", self._test_sent, methods=["GET"]),
            Route("/_test/refused", self._test_refused, methods=["GET"]),
        ])

        return app

    async def _test_say(self, request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"message_id": await self.say(str(body["learner"]), str(body["text"]))})

    async def _test_refused(self, request: Request) -> JSONResponse:
        return JSONResponse([{"to": to, "why": why} for to, why in self.refused])

    async def _test_sent(self, request: Request) -> JSONResponse:
        return JSONResponse([{"to": s.to, "text": s.text, "client_id": s.client_id, "kind": s.kind, "name": s.name,
                              "md5": hashlib.md5(s.data).hexdigest() if s.kind != "text" else ""} for s in self.sent])

    async def _test_file(self, request: Request) -> Response:
        data = self.files.get(request.path_params["name"])
        return Response(status_code=404) if data is None else Response(data, media_type="application/octet-stream")

    async def _getuploadurl(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if body is None:
            return JSONResponse({"ret": -14, "errmsg": "unauthorized"}, status_code=401)
        if self.expired:
            return JSONResponse(EXPIRED)
        try:
            upload = Upload(filekey=str(body["filekey"]), media_type=int(body["media_type"]), to=str(body["to_user_id"]),
                            rawsize=int(body["rawsize"]), md5=str(body["rawfilemd5"]), filesize=int(body["filesize"]),
                            aeskey=str(body["aeskey"]))
        except (KeyError, TypeError, ValueError):
            return JSONResponse({"ret": -1, "errmsg": "bad upload request"})
        if len(bytes.fromhex(upload.aeskey)) != 16 or upload.filesize != (upload.rawsize // 16 + 1) * 16:
            return JSONResponse({"ret": -1, "errmsg": "bad key or size"})
        param = "up-" + secrets.token_urlsafe(12)
        self.announced[param] = upload
        return JSONResponse({"ret": 0, "upload_param": param})

    async def _upload(self, request: Request) -> Response:
        upload = self.announced.get(request.query_params.get("encrypted_query_param", ""))
        if upload is None or request.query_params.get("filekey") != upload.filekey:
            self.uploads.append(400)
            return Response(status_code=400, headers={"x-error-message": "unknown upload param"})
        if self.cdn_faults:
            status = self.cdn_faults.pop(0)
            self.uploads.append(status)
            return Response(status_code=status, headers={"x-error-message": "injected"})
        sealed = await request.body()
        if len(sealed) != upload.filesize or request.headers.get("content-type") != "application/octet-stream":
            self.uploads.append(400)
            return Response(status_code=400, headers={"x-error-message": "size or type mismatch"})
        param = "dl-" + secrets.token_urlsafe(12)
        self.cdn[param], self.stored[param] = sealed, upload
        self.uploads.append(200)
        if self.hold_uploads is not None:
            self.held += 1
            await self.hold_uploads.wait()
        return Response(status_code=200, headers={"x-encrypted-param": param})

    def _opened(self, item: dict[str, Any], to: str) -> tuple[str, bytes, str] | str:
        """A media item's kind, plaintext and name; or why the learner's phone could not show it."""
        kind, field_name = ITEMS[int(item.get("type", 0))]
        part = item.get(field_name) or {}
        media = part.get("media") or {}
        upload = self.stored.get(str(media.get("encrypt_query_param", "")))
        if upload is None or upload.to != to or upload.media_type != MEDIA_TYPE[kind]:
            return "media not uploaded for this learner as this kind"
        try:
            key = bytes.fromhex(base64.b64decode(str(media.get("aes_key", ""))).decode())
            plain = _open(self.cdn[str(media["encrypt_query_param"])], key)
        except ValueError:
            return "media does not open with its aes_key"
        if key.hex() != upload.aeskey or len(plain) != upload.rawsize or hashlib.md5(plain).hexdigest() != upload.md5:
            return "media is not the file announced"
        if kind == "file" and (not part.get("file_name") or part.get("len") != str(len(plain))):
            return "file item without its name or length"
        return kind, plain, str(part.get("file_name", ""))

    async def _download(self, request: Request) -> Response:
        sealed = self.cdn.get(request.query_params.get("encrypted_query_param", ""))
        if sealed is None:
            return Response(status_code=404)
        return Response(sealed, media_type="application/octet-stream")

    async def _qrcode(self, request: Request) -> JSONResponse:
        if request.query_params.get("bot_type") != "3":
            return JSONResponse({"ret": 1, "errmsg": "bad bot_type"})
        code = secrets.token_hex(8)
        self.logins[code] = Login(code)
        return JSONResponse({"ret": 0, "qrcode": code, "qrcode_img_content": f"https://liteapp.weixin.qq.com/q/{code}"})

    async def _qrcode_status(self, request: Request) -> JSONResponse:
        login = self.logins.get(request.query_params.get("qrcode", ""))
        if login is None:
            return JSONResponse({"ret": 0, "status": "expired"})
        before = login.status
        if not self.auto_scan:
            await self._hold(lambda: login.status != before)
        self.answered.append(login.status)
        if self.auto_scan and login.status in AHEAD:
            status, login.status = login.status, AHEAD[login.status]
            return JSONResponse({"ret": 0, "status": status})
        if login.status != "confirmed":
            return JSONResponse({"ret": 0, "status": login.status})
        self.expired = False
        return JSONResponse({"ret": 0, "status": "confirmed", "bot_token": self.token, "ilink_bot_id": self.bot_id,
                             "ilink_user_id": self.user_id, "baseurl": self.base_url})

    def _faulty(self, handler: Any, *, send: bool = False) -> Any:
        """``handler``, unless the platform is down or a fault is queued: then that answer."""
        async def answer(request: Request) -> Response:
            if self.down:
                response: Response = JSONResponse({"ret": -1, "errmsg": "service unavailable"}, status_code=503)
            elif send and self.send_faults:
                status, body, headers = self.send_faults.pop(0)
                response = JSONResponse(body, status_code=status, headers=headers)
            elif self.faults:
                status, body, headers = self.faults.pop(0)
                response = JSONResponse(body, status_code=status, headers=headers)
            else:
                response = await handler(request)
            if send:
                self.send_statuses.append(response.status_code)
                await asyncio.sleep(self.send_latency_s)  # taken (or refused) at once, answered late
            return response

        return answer

    def fail_next_send(self, status: int, body: dict[str, Any] | None = None,
                       headers: dict[str, str] | None = None) -> None:
        """The next ``sendmessage`` is answered ``status`` with ``body``; the long poll is left alone."""
        self.send_faults.append((status, body or {}, headers or {}))

    def fail_next(self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        """The next POST is answered ``status`` with ``body`` (a 429, a 503, a ``ret`` code in a 200)."""
        self.faults.append((status, body or {}, headers or {}))

    async def _body(self, request: Request) -> dict[str, Any] | None:
        """The JSON body of an authorized call, or None when the bearer or headers are not the bot's."""
        if request.headers.get("AuthorizationType") != "ilink_bot_token" or not request.headers.get("X-WECHAT-UIN"):
            return None
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return None
        body = await request.json()
        return body if isinstance(body, dict) and isinstance(body.get("base_info"), dict) else None

    async def _getupdates(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if body is None:
            return JSONResponse({"ret": -14, "errmsg": "unauthorized"}, status_code=401)
        if self.expired:
            return JSONResponse(EXPIRED)
        cursor = str(body.get("get_updates_buf", ""))
        self.polls.append(cursor)
        start = int(base64.b64decode(cursor).decode()) if cursor else 0
        await self._hold(lambda: len(self.log) > start or self.expired)
        if self.expired:
            return JSONResponse(EXPIRED)
        return JSONResponse({"ret": 0, "msgs": self.log[start:],
                             "get_updates_buf": base64.b64encode(str(len(self.log)).encode()).decode()})

    async def _sendmessage(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if body is None:
            return JSONResponse({"ret": -14, "errmsg": "unauthorized"}, status_code=401)
        if self.expired:
            return JSONResponse(EXPIRED)
        msg = body.get("msg") or {}
        context, to = str(msg.get("context_token", "")), str(msg.get("to_user_id", ""))
        [item] = msg.get("item_list") or [{}]
        text = str((item.get("text_item") or {}).get("text", ""))
        media: tuple[str, bytes, str] | str = ("text", b"", "")
        if int(item.get("type", 1)) in ITEMS:
            media = self._opened(item, to)
            if isinstance(media, str):
                self.refused.append((to, media))
                return JSONResponse({"ret": -1, "errmsg": media})
        handed = self.contexts.get(context)
        if handed is None or handed[0] != to or time.monotonic() - handed[1] > self.token_ttl_s or self.stale_next > 0:
            self.stale_next = max(0, self.stale_next - 1)
            self.refused.append((to, "stale context token"))
            return JSONResponse({"ret": -2, "errmsg": "context token invalid"})
        if self.used.get(context, 0) >= self.budget:
            self.refused.append((to, "budget"))
            return JSONResponse({"ret": -2, "errmsg": "reply limit reached for this context"})
        self.used[context] = self.used.get(context, 0) + 1
        kind, data, name = media
        self.sent.append(Sent(to, text, context, str(msg.get("client_id", "")), kind=kind, data=data, name=name))
        return JSONResponse({"ret": 0})

    async def _getconfig(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if body is None or self.expired:
            return JSONResponse(EXPIRED)
        return JSONResponse({"ret": 0, "typing_ticket": "ticket-" + str(body.get("ilink_user_id", ""))})

    async def _sendtyping(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if body is None or self.expired:
            return JSONResponse(EXPIRED)
        if body.get("typing_ticket") != "ticket-" + str(body.get("ilink_user_id", "")):
            return JSONResponse({"ret": 1, "errmsg": "bad ticket"})
        self.typing.append(str(body.get("ilink_user_id", "")))
        return JSONResponse({"ret": 0})


@contextlib.asynccontextmanager
async def serving(peer: IlinkPeer) -> AsyncIterator[str]:
    """The emulated iLink API on a free loopback port; yields its base URL (ending in ``/``), also the ``baseurl`` login returns."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(peer.app(), "127.0.0.1", 0, on_ready=ready.set_result, shutdown_timeout=1))
    try:
        url = (await asyncio.wait_for(ready, HANG_S)).rstrip("/") + "/"
        peer.base_url = peer.base_url or url
        yield url
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server


def main(argv: list[str] | None = None) -> None:
    """Serve the emulator in its own process (a crash test kills the gateway, never this)."""
    import argparse
    import socket

    import uvicorn

    parser = argparse.ArgumentParser(description="An emulated iLink bot API for loopback tests.")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(1024)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    peer = IlinkPeer(auto_scan=True, base_url=base)
    print(f"ilink api listening on {base}", flush=True)
    uvicorn.Server(uvicorn.Config(peer.app(), log_level="warning", timeout_graceful_shutdown=1)).run(sockets=[sock])


if __name__ == "__main__":
    main()
