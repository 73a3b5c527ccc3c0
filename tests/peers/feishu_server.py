"""A loopback emulator of Feishu's open platform, written from Feishu's documentation (open.feishu.cn).

What it speaks:

- ``POST /open-apis/auth/v3/tenant_access_token/internal`` ``{app_id, app_secret}`` -> ``{"code": 0,
  "tenant_access_token": "t-...", "expire": 7200}`` (a wrong secret: code 10014); every other
  ``/open-apis`` call needs ``Authorization: Bearer t-...`` (else code 99991663).
- ``GET /open-apis/bot/v3/info`` -> ``{"code": 0, "bot": {"open_id"}}``.
- The long connection: ``POST /callback/ws/endpoint`` ``{AppID, AppSecret}`` -> the socket URL and a
  ``ClientConfig``; on ``/ws`` protobuf frames (the SDK's own ``pbbp2.Frame``): a control ``ping`` is
  answered ``pong``; an event goes as a data frame (``type=event``, ``message_id``, ``sum=1``, ``seq=0``)
  with the event JSON as payload, and the client acks it on the same frame with ``{"code": 200}``.
- ``POST /open-apis/im/v1/messages?receive_id_type=chat_id`` and ``.../messages/{id}/reply``: a
  message shown in the chat; a second request with the same ``uuid`` is answered with the first's id.
- CardKit: ``POST /open-apis/cardkit/v1/cards``, ``PUT .../cards/{id}/elements/{el}/content``
  (``sequence`` must grow, else code 300317), ``PATCH .../cards/{id}/settings``.
- Files: ``POST /open-apis/im/v1/images`` / ``files`` (multipart) and
  ``GET /open-apis/im/v1/messages/{id}/resources/{key}?type=``.

Faults: :meth:`FeishuServer.fail_next_send` (one send answered with a status, 429 with code 99991400),
:meth:`redeliver`, :attr:`hold` (events not acked while no client is connected are sent again at the next
connect: Feishu's at-least-once retries, shortened), :meth:`drop`.  For webhooks, :func:`signed` builds a
request as Feishu sends it (encrypted with the Encrypt Key, signed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from channels._kit.msgcrypt import feishu_encrypt
from channels._kit.signatures import feishu_signature

BOT_OPEN_ID = "ou_bot0tutor"


@dataclass
class Shown:
    """One bot message as the chat shows it now: rich text, an image/file, or a card (its text now)."""

    id: str
    chat: str
    msg_type: str
    content: dict[str, Any]
    reply_to: str | None = None
    in_thread: bool = False
    card: str | None = None
    shown_at: float = 0.0

    def text(self, cards: dict[str, Card]) -> str:
        if self.card is not None:
            return cards[self.card].text
        if self.msg_type == "post":
            tags = [t for para in self.content["zh_cn"]["content"] for t in para]
            return "".join(str(t.get("text") or "") for t in tags)
        return json.dumps(self.content)


@dataclass
class Card:
    id: str
    body: dict[str, Any]
    text: str = ""
    streaming: bool = True
    sequence: int = 0
    updates: list[str] = field(default_factory=list)
    closed_at: float = 0.0


@dataclass(frozen=True)
class Said:
    event_id: str
    message_id: str
    chat: str
    event: dict[str, Any]


def event_of(text: str, *, user: str, chat: str, group: bool, mention: bool, message_type: str = "text",
             content: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ``im.message.receive_v1`` event as Feishu documents it."""
    mentions = [{"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "Tutor"}] if mention else []
    body = content if content is not None else {"text": ("@_user_1 " if mention else "") + text}
    message_id = f"om_{uuid.uuid4().hex[:16]}"
    return {"schema": "2.0",
            "header": {"event_id": uuid.uuid4().hex, "event_type": "im.message.receive_v1", "create_time": str(int(time.time() * 1000)),
                       "token": "", "app_id": "", "tenant_key": "tk"},
            "event": {"sender": {"sender_id": {"open_id": user}, "sender_type": "user", "tenant_key": "tk"},
                      "message": {"message_id": message_id, "chat_id": chat, "chat_type": "group" if group else "p2p",
                                  "message_type": message_type, "content": json.dumps(body), "mentions": mentions}}}


def signed(event: dict[str, Any], encrypt_key: str, *, token: str = "") -> tuple[dict[str, str], bytes]:
    """Headers and body of a webhook POST as Feishu makes it: the event encrypted, the request signed."""
    if token:
        event = {**event, "header": {**event["header"], "token": token}} if "header" in event else {**event, "token": token}
    body = json.dumps({"encrypt": feishu_encrypt(encrypt_key, json.dumps(event))}).encode()
    timestamp, nonce = str(int(time.time())), uuid.uuid4().hex[:12]
    return ({"X-Lark-Request-Timestamp": timestamp, "X-Lark-Request-Nonce": nonce,
             "X-Lark-Signature": feishu_signature(timestamp, nonce, encrypt_key, body), "Content-Type": "application/json"},
            body)


def _bind() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _ok(data: dict[str, Any] | None = None) -> JSONResponse:
    return JSONResponse({"code": 0, "msg": "success", "data": data or {}})


def _fail(code: int, msg: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"code": code, "msg": msg}, status_code=status)


class FeishuServer:
    """The platform, served by uvicorn on the current event loop."""

    def __init__(self, *, app_id: str | None = None, secret: str | None = None) -> None:
        self.app_id = app_id or f"cli_{uuid.uuid4().hex[:16]}"
        self.secret = secret or uuid.uuid4().hex
        self.tokens: set[str] = set()
        self.messages: list[Shown] = []
        self.cards: dict[str, Card] = {}
        self.by_uuid: dict[str, str] = {}
        self.uploads: dict[str, bytes] = {}
        self.resources: dict[str, bytes] = {}
        self.pending: dict[str, Said] = {}
        self.acked: list[str] = []
        self.hold = False
        self.sends = self.rate_limited = 0
        self._fail: tuple[int, float] | None = None
        self._sockets: list[WebSocket] = []
        self._seq = itertools.count(1)
        self._connected = asyncio.Event()
        self.port, self._server, self._task = 0, None, None
        self._frame_class: Any = None
        self._asked: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ what tests do

    async def __aenter__(self) -> FeishuServer:
        import uvicorn

        sock = _bind()
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.005)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.drop()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task

    async def connected(self, timeout: float = 120.0) -> None:
        await asyncio.wait_for(self._connected.wait(), timeout)

    async def say(self, text: str, *, user: str = "ou_learner1", chat: str | None = None, group: bool = False,
                  mention: bool = False, message_type: str = "text", content: dict[str, Any] | None = None) -> Said:
        chat = chat or f"oc_dm_{user}"
        event = event_of(text, user=user, chat=chat, group=group, mention=mention, message_type=message_type, content=content)
        said = Said(event["header"]["event_id"], event["event"]["message"]["message_id"], chat, event)
        self.pending[said.event_id] = said
        self._asked[said.message_id] = chat
        await self._push(said)
        return said

    async def redeliver(self, said: Said) -> None:
        await self._push(said)

    def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self._fail = (status, retry_after)

    async def drop(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        self._sockets.clear()
        self._connected.clear()

    def shown(self, chat: str) -> list[Shown]:
        return [m for m in self.messages if m.chat == chat]

    def text_of(self, shown: Shown) -> str:
        return shown.text(self.cards)

    def finished(self, shown: Shown) -> bool:
        return shown.card is None or not self.cards[shown.card].streaming

    # ------------------------------------------------------------------ the long connection

    def _frame(self) -> Any:
        if self._frame_class is None:
            from lark_oapi.ws.pb.pbbp2_pb2 import Frame

            self._frame_class = Frame
        return self._frame_class()

    async def _push(self, said: Said) -> None:
        if not self._sockets:
            return
        frame = self._frame()
        frame.SeqID, frame.LogID, frame.service, frame.method = next(self._seq), 0, 7, 1
        for key, value in (("type", "event"), ("message_id", said.event_id), ("sum", "1"), ("seq", "0"),
                           ("trace_id", uuid.uuid4().hex[:8])):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = json.dumps(said.event).encode()
        with contextlib.suppress(Exception):
            await self._sockets[-1].send_bytes(frame.SerializeToString())

    async def _endpoint(self, request: Request) -> Response:
        said = await request.json()
        if said.get("AppID") != self.app_id or said.get("AppSecret") != self.secret:
            return JSONResponse({"code": 514, "msg": "auth failed"})
        return JSONResponse({"code": 0, "msg": "ok", "data": {
            "URL": f"ws://127.0.0.1:{self.port}/ws?device_id=d{uuid.uuid4().hex[:6]}&service_id=7",
            "ClientConfig": {"ReconnectCount": 1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 30}}})

    async def _ws(self, ws: WebSocket) -> None:
        await ws.accept()
        self._sockets.append(ws)
        self._connected.set()
        if self.hold:
            for said in list(self.pending.values()):
                await self._push(said)
        try:
            while True:
                frame = self._frame()
                frame.ParseFromString(await ws.receive_bytes())
                headers = {h.key: h.value for h in frame.headers}
                if frame.method == 0 and headers.get("type") == "ping":
                    pong = self._frame()
                    pong.CopyFrom(frame)
                    pong.headers[0].value = "pong" if pong.headers[0].key == "type" else pong.headers[0].value
                    await ws.send_bytes(pong.SerializeToString())
                elif frame.method == 1 and json.loads(frame.payload or b"{}").get("code") == 200:
                    self.acked.append(headers.get("message_id", ""))
                    self.pending.pop(headers.get("message_id", ""), None)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            if not self._sockets:
                self._connected.clear()

    # ------------------------------------------------------------------ REST

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("Authorization", "").removeprefix("Bearer ") in self.tokens

    async def _token(self, request: Request) -> Response:
        said = await request.json()
        if said.get("app_id") != self.app_id or said.get("app_secret") != self.secret:
            return JSONResponse({"code": 10014, "msg": "app secret invalid"})
        token = f"t-{uuid.uuid4().hex}"
        self.tokens.add(token)
        return JSONResponse({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})

    async def _rest(self, request: Request) -> Response:
        if not self._authorized(request):
            return _fail(99991663, "Invalid access token for authorization", 400)
        path, method = request.url.path.removeprefix("/open-apis/"), request.method
        if path == "bot/v3/info":
            return JSONResponse({"code": 0, "msg": "ok", "bot": {"open_id": BOT_OPEN_ID, "app_name": "Tutor"}})
        if path.startswith("im/v1/messages") and path.endswith(("messages", "/reply")) and method == "POST":
            return await self._send(request, path)
        if path == "cardkit/v1/cards":
            said = await request.json()
            card = Card(id=f"card_{uuid.uuid4().hex[:12]}", body=json.loads(said["data"]))
            card.text = next((e.get("content", "") for e in card.body["body"]["elements"] if e.get("element_id")), "")
            self.cards[card.id] = card
            return _ok({"card_id": card.id})
        if path.startswith("cardkit/v1/cards/"):
            return await self._card(request, path.split("/"))
        if path in ("im/v1/images", "im/v1/files"):
            form = await request.form()
            upload: Any = form.get("image") or form.get("file")
            key = f"{'img' if path.endswith('images') else 'file'}_{uuid.uuid4().hex[:12]}"
            self.uploads[key] = await upload.read()
            return _ok({"image_key" if path.endswith("images") else "file_key": key})
        if "/resources/" in path:
            data = self.resources.get(path.rsplit("/", 1)[-1])
            return Response(data, media_type="image/png") if data is not None else _fail(234003, "file not found", 400)
        return _fail(1254000, f"no such path {path}", 404)

    async def _send(self, request: Request, path: str) -> Response:
        self.sends += 1
        if self._fail is not None:
            (status, pause), self._fail = self._fail, None
            if status == 429:
                self.rate_limited += 1
                return JSONResponse({"code": 99991400, "msg": "request trigger frequency limit"}, status_code=429,
                                    headers={"x-ogw-ratelimit-reset": str(int(pause))})
            return _fail({401: 99991663, 400: 230001}.get(status, 1500), "fault", status)
        said = await request.json()
        if said.get("uuid") in self.by_uuid:
            return _ok({"message_id": self.by_uuid[said["uuid"]]})
        content = json.loads(said["content"])
        reply_to = path.split("/")[3] if path.endswith("/reply") else None
        chat = said.get("receive_id") or self._asked.get(reply_to or "")
        shown = Shown(id=f"om_{uuid.uuid4().hex[:16]}", chat=str(chat), msg_type=said["msg_type"], content=content,
                      reply_to=reply_to, in_thread=bool(said.get("reply_in_thread")),
                      card=content.get("data", {}).get("card_id") if said["msg_type"] == "interactive" else None,
                      shown_at=time.time())
        self.messages.append(shown)
        if said.get("uuid"):
            self.by_uuid[said["uuid"]] = shown.id
        return _ok({"message_id": shown.id, "chat_id": shown.chat})

    async def _card(self, request: Request, parts: list[str]) -> Response:
        card = self.cards.get(parts[3])
        if card is None:
            return _fail(300301, "card not found", 400)
        said = await request.json()
        sequence = int(said.get("sequence") or 0)
        if sequence <= card.sequence:
            return _fail(300317, "sequence number compare failed", 400)
        card.sequence = sequence
        if parts[-1] == "content":
            if not card.streaming:
                return _fail(300309, "streaming mode is closed", 400)
            card.text = said["content"]
            card.updates.append(card.text)
        elif parts[-1] == "settings":
            card.streaming = bool(json.loads(said["settings"]).get("config", {}).get("streaming_mode", False))
            card.closed_at = time.time()
        return _ok()

    def _app(self) -> Starlette:
        return Starlette(routes=[
            Route("/open-apis/auth/v3/tenant_access_token/internal", self._token, methods=["POST"]),
            Route("/callback/ws/endpoint", self._endpoint, methods=["POST"]),
            WebSocketRoute("/ws", self._ws),
            Route("/open-apis/{path:path}", self._rest, methods=["GET", "POST", "PUT", "PATCH"]),
        ])
