"""A loopback emulator of DingTalk's Stream mode and robot API, written from DingTalk's documentation.

What it speaks (open.dingtalk.com, Stream 模式 / 机器人 / AI 卡片):

- ``POST /v1.0/gateway/connections/open`` with ``{clientId, clientSecret, subscriptions}``
  answers ``{"endpoint": "ws://.../connect", "ticket": "..."}`` (a wrong secret: 401); the
  websocket ``/connect?ticket=`` takes each ticket once.
- On the socket, JSON frames ``{specVersion, type, headers{messageId, topic, ...}, data}``: a
  robot message is a CALLBACK on ``/v1.0/im/bot/messages/get`` whose ``data`` (a JSON string)
  carries ``msgId``, ``conversationType`` ("1"/"2"), ``conversationId``, ``senderStaffId``,
  ``text.content`` and a ``sessionWebhook`` good until ``sessionWebhookExpiredTime`` (ms).
  SYSTEM ``ping`` frames; every frame is acked ``{"code": 200, "headers": {"messageId"}}``.
- ``POST /v1.0/oauth2/accessToken`` ``{appKey, appSecret}`` -> ``{accessToken, expireIn}``.
- ``POST /v1.0/robot/oToMessages/batchSend`` (to staff ids) and ``/v1.0/robot/groupMessages/send``
  (to ``openConversationId``), header ``x-acs-dingtalk-access-token``, ``msgKey sampleMarkdown``.
- The session webhook: ``{"msgtype": "markdown", "markdown": {title, text}}`` -> ``{"errcode": 0}``;
  past its time ``{"errcode": 300001, "errmsg": "session expired"}``.
- ``POST /v1.0/card/instances/createAndDeliver`` and ``PUT /v1.0/card/streaming`` (AI cards).
- Files a learner sends (``picture``, ``file``, ``audio``, ``video``, ``richText``): each carries a
  ``content.downloadCode``, exchanged by ``POST /v1.0/robot/messageFiles/download {downloadCode,
  robotCode}`` for ``{downloadUrl}``, a signed URL fetched without the token.
- HTTP mode instead of the stream: with :attr:`callback_url` set, a learner's message is POSTed
  there as the robot message JSON, headers ``timestamp`` (ms) and ``sign`` = Base64
  HMAC-SHA256(secret, ``timestamp + "\n" + secret``) (K2); an answer other than 200 is posted again
  (:attr:`callback_answers` records each status).

Faults a test asks for: :meth:`drop` closes the socket; :attr:`expire_webhooks` hands out
webhooks already past their time; :meth:`send_raw` pushes any text; callbacks not acked are pushed
again on the next connection (DingTalk redelivers unacked frames), which a crash test needs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import WSMsgType, web

from tests.waits import HANG_S

BOT_TOPIC = "/v1.0/im/bot/messages/get"
WEBHOOK_LIFE_MS = 90 * 60 * 1000


@dataclass
class Shown:
    """One message as the learner's DingTalk shows it: Markdown (``via`` webhook or robot) or an AI card."""

    id: str
    chat: str
    text: str
    via: str
    updates: list[str] = field(default_factory=list)
    finished: bool = True
    finished_at: float = field(default_factory=time.time)


@dataclass
class Said:
    msg_id: str
    chat: str
    frame: dict[str, Any]


class DingtalkServer:
    """One app (client id and secret) and the learners who talk to its robot; ``async with`` serves it."""

    def __init__(self, client_id: str = "dingtestapp", secret: str = "Zq8vKd2Lm4Rt6Wx") -> None:
        self.client_id, self.secret = client_id, secret
        self.expire_webhooks = False
        self.url = ""
        self.shown: list[Shown] = []
        self.cards: dict[str, Shown] = {}
        self.acks: list[str] = []
        self.tickets_opened = 0
        self.subscriptions: list[Any] = []
        self.tokens_issued = 0
        self._tickets: set[str] = set()
        self._unacked: dict[str, str] = {}
        """messageId -> the frame as sent, until acked."""
        self._socket: web.WebSocketResponse | None = None
        self._connected = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)
        self._token = ""
        self._sessions: dict[str, tuple[str, int]] = {}
        self.callback_url = ""
        """HTTP mode: where learners' messages are POSTed instead of pushed on the stream."""
        self.callback_answers: list[int] = []
        self.callback_attempts = 3
        self.files: dict[str, bytes] = {}
        """downloadCode -> the bytes a learner sent."""
        self.downloads: list[str] = []
        """Each downloadCode exchanged for a URL, in order."""
        self.refuse_downloads = False
        """Answer every ``messageFiles/download`` as DingTalk does for a code it no longer knows."""

    async def __aenter__(self) -> DingtalkServer:
        app = web.Application()
        app.router.add_post("/v1.0/gateway/connections/open", self._open)
        app.router.add_get("/connect", self._connect)
        app.router.add_post("/v1.0/oauth2/accessToken", self._access_token)
        app.router.add_post("/v1.0/robot/oToMessages/batchSend", self._robot_send)
        app.router.add_post("/v1.0/robot/groupMessages/send", self._robot_send)
        app.router.add_post("/robot/sendBySession", self._webhook)
        app.router.add_post("/v1.0/card/instances/createAndDeliver", self._card_create)
        app.router.add_put("/v1.0/card/streaming", self._card_stream)
        app.router.add_post("/v1.0/robot/messageFiles/download", self._file_url)
        app.router.add_get("/files/{code}", self._file)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    async def connected(self) -> None:
        """Wait until a client holds the stream (bounded by HANG_S)."""
        await asyncio.wait_for(self._connected.wait(), HANG_S)

    # ------------------------------------------------------------------ the stream

    async def _open(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clientId") != self.client_id or body.get("clientSecret") != self.secret:
            return web.json_response({"code": "invalidClientIdOrSecret", "message": "bad credentials"}, status=401)
        self.tickets_opened += 1
        self.subscriptions = body.get("subscriptions") or []
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return web.json_response({"endpoint": self.url.replace("http", "ws", 1) + "/connect", "ticket": ticket})

    async def _connect(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=403, text="ticket unknown or used")
        self._tickets.discard(ticket)
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._socket = socket
        self._connected.set()
        for wire in list(self._unacked.values()):  # DingTalk pushes what was not acked again
            await socket.send_str(wire)
        async for message in socket:
            if message.type is WSMsgType.TEXT:
                with contextlib.suppress(ValueError, AttributeError):
                    said = json.loads(message.data)
                    if said.get("code") == 200:
                        mid = str(said["headers"]["messageId"])
                        self.acks.append(mid)
                        self._unacked.pop(mid, None)
        if self._socket is socket:
            self._socket = None
            self._connected.clear()
        return socket

    async def _push(self, frame: dict[str, Any]) -> None:
        wire = json.dumps(frame, ensure_ascii=False)
        self._unacked[frame["headers"]["messageId"]] = wire
        if self._socket is not None and not self._socket.closed:
            with contextlib.suppress(ConnectionError):
                await self._socket.send_str(wire)

    async def say(self, text: str, *, user: str = "learner1", group: str | None = None, nick: str = "Learner") -> Said:
        """A learner says ``text`` to the robot: in a direct chat, or as an @-message in ``group``."""
        return await self.post_message({"msgtype": "text", "text": {"content": f" {text}"}},
                                       user=user, group=group, nick=nick)

    async def say_file(self, msgtype: str, data: bytes, *, name: str = "", text: str = "", recognition: str = "",
                       user: str = "learner1", group: str | None = None) -> Said:
        """A learner sends a file: ``picture``, ``file``, ``audio``, ``video``, or ``richText`` (``text``
        then the picture).  The bytes wait behind a ``downloadCode`` for ``messageFiles/download``."""
        code = f"dl-{uuid.uuid4().hex}"
        self.files[code] = data
        content: dict[str, Any] = {"downloadCode": code}
        if msgtype == "picture":
            content["pictureDownloadCode"] = f"pic-{code}"
        if name:
            content["fileName"] = name
        if recognition:
            content["recognition"] = recognition
        if msgtype == "richText":
            content = {"richText": [{"text": text}, {"type": "picture", "downloadCode": code}]}
        return await self.post_message({"msgtype": msgtype, "content": content}, user=user, group=group)

    async def post_message(self, body: dict[str, Any], *, user: str = "learner1", group: str | None = None,
                           nick: str = "Learner") -> Said:
        """A robot message of any type (``body``: ``msgtype`` and its fields), pushed or POSTed."""
        msg_id = f"msg{next(self._ids)}"
        session = uuid.uuid4().hex
        life = -60_000 if self.expire_webhooks else WEBHOOK_LIFE_MS
        expires = int(time.time() * 1000) + life
        chat = group or user
        self._sessions[session] = (chat, expires)
        data = {"msgId": msg_id, "conversationType": "2" if group else "1",
                "conversationId": group or f"cid-{user}", "senderStaffId": user, "senderId": f"$:{user}",
                "senderNick": nick, "isInAtList": bool(group), "chatbotUserId": "robot", "robotCode": self.client_id,
                **body, "createAt": int(time.time() * 1000),
                "sessionWebhook": f"{self.url}/robot/sendBySession?session={session}",
                "sessionWebhookExpiredTime": expires}
        if self.callback_url:
            said = Said(msg_id, chat, {"data": json.dumps(data, ensure_ascii=False)})
            await self.post_callback(said.frame["data"])
            return said
        frame = {"specVersion": "1.0", "type": "CALLBACK", "data": json.dumps(data, ensure_ascii=False),
                 "headers": {"appId": self.client_id, "connectionId": "c1", "contentType": "application/json",
                             "messageId": f"frame-{msg_id}-{next(self._ids)}", "time": str(int(time.time() * 1000)),
                             "topic": BOT_TOPIC}}
        await self._push(frame)
        return Said(msg_id, chat, frame)

    def sign(self, timestamp: str, secret: str | None = None) -> str:
        key = (secret if secret is not None else self.secret).encode()
        return base64.b64encode(hmac.new(key, f"{timestamp}\n{key.decode()}".encode(), hashlib.sha256).digest()).decode()

    async def post_callback(self, body: str, *, headers: dict[str, str] | None = None) -> int:
        """POST one robot message to :attr:`callback_url`, signed now unless ``headers`` say otherwise; a
        status other than 200 is posted again (freshly signed), up to :attr:`callback_attempts` times."""
        status = 0
        async with httpx.AsyncClient(trust_env=False, timeout=HANG_S) as client:
            for _ in range(self.callback_attempts):
                stamp = str(int(time.time() * 1000))
                sent = headers if headers is not None else {"timestamp": stamp, "sign": self.sign(stamp)}
                answer = await client.post(self.callback_url, content=body.encode(),
                                           headers={"Content-Type": "application/json; charset=utf-8", **sent})
                status = answer.status_code
                self.callback_answers.append(status)
                if status == 200 or headers is not None:
                    break
        return status

    async def redeliver(self, said: Said) -> None:
        """The same robot message pushed again (a new frame id, the same msgId); in HTTP mode, posted again."""
        if self.callback_url:
            await self.post_callback(said.frame["data"])
            return
        frame = {**said.frame, "headers": {**said.frame["headers"], "messageId": f"again-{next(self._ids)}"}}
        await self._push(frame)

    async def ping(self) -> str:
        """A SYSTEM ping; returns its messageId (acked once the client answers)."""
        mid = f"ping{next(self._ids)}"
        await self._push({"specVersion": "1.0", "type": "SYSTEM", "data": json.dumps({"opaque": mid}),
                          "headers": {"messageId": mid, "topic": "ping", "contentType": "application/json"}})
        return mid

    async def send_raw(self, wire: str) -> None:
        assert self._socket is not None
        await self._socket.send_str(wire)

    async def drop(self) -> None:
        socket, self._socket = self._socket, None
        self._connected.clear()
        if socket is not None:
            await socket.close()

    def holding(self) -> bool:
        """Whether a client holds the stream now."""
        return self._socket is not None and not self._socket.closed

    def unacked(self) -> list[str]:
        return list(self._unacked)

    # ------------------------------------------------------------------ the API

    async def _access_token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("appKey") != self.client_id or body.get("appSecret") != self.secret:
            return web.json_response({"code": "invalidClientIdOrSecret", "message": "bad appKey or appSecret"}, status=400)
        self.tokens_issued += 1
        self._token = uuid.uuid4().hex
        return web.json_response({"accessToken": self._token, "expireIn": 7200})

    def _authorized(self, request: web.Request) -> bool:
        return bool(self._token) and request.headers.get("x-acs-dingtalk-access-token") == self._token

    async def _robot_send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token invalid"}, status=401)
        body = await request.json()
        if body.get("robotCode") != self.client_id or body.get("msgKey") != "sampleMarkdown":
            return web.json_response({"code": "invalidParameter", "message": "robotCode or msgKey"}, status=400)
        param = json.loads(body["msgParam"])
        chat = body.get("openConversationId") or body["userIds"][0]
        self.shown.append(Shown(f"robot{next(self._ids)}", str(chat), str(param["text"]), "robot", [param["text"]]))
        return web.json_response({"processQueryKey": uuid.uuid4().hex, "invalidStaffIdList": [],
                                  "flowControlledStaffIdList": []})

    async def _webhook(self, request: web.Request) -> web.Response:
        chat, expires = self._sessions.get(request.query.get("session", ""), ("", 0))
        if not chat or time.time() * 1000 > expires:
            return web.json_response({"errcode": 300001, "errmsg": "session expired"})
        body = await request.json()
        text = str(body["markdown"]["text"])
        self.shown.append(Shown(f"hook{next(self._ids)}", chat, text, "webhook", [text]))
        return web.json_response({"errcode": 0, "errmsg": "ok"})

    async def _card_create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token invalid"}, status=401)
        body = await request.json()
        track, space = str(body["outTrackId"]), str(body["openSpaceId"])
        if track not in self.cards:
            chat = space.split(".", 2)[-1]
            card = self.cards[track] = Shown(track, chat, "", "card", [], finished=False, finished_at=0.0)
            self.shown.append(card)
        return web.json_response({"success": True, "result": {"outTrackId": track}})

    async def _card_stream(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token invalid"}, status=401)
        body = await request.json()
        card = self.cards.get(str(body.get("outTrackId")))
        if card is None:
            return web.json_response({"code": "param.cardNotExist", "message": "card not found"}, status=400)
        card.text = str(body["content"]) if body.get("isFull") else card.text + str(body["content"])
        card.updates.append(card.text)
        if body.get("isFinalize") and not card.finished:
            card.finished, card.finished_at = True, time.time()
        return web.json_response({"success": True})

    async def _file_url(self, request: web.Request) -> web.Response:
        """``{downloadCode, robotCode}`` -> ``{downloadUrl}``, a short-lived URL that is its own credential."""
        if not self._authorized(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token invalid"}, status=401)
        body = await request.json()
        code = str(body.get("downloadCode", ""))
        if body.get("robotCode") != self.client_id or code not in self.files or self.refuse_downloads:
            return web.json_response({"code": "invalidParameter", "message": "downloadCode or robotCode"}, status=400)
        self.downloads.append(code)
        signed = hmac.new(self.secret.encode(), code.encode(), hashlib.sha256).hexdigest()
        return web.json_response({"downloadUrl": f"{self.url}/files/{code}?Signature={signed}"})

    async def _file(self, request: web.Request) -> web.Response:
        code = request.match_info["code"]
        signed = hmac.new(self.secret.encode(), code.encode(), hashlib.sha256).hexdigest()
        if code not in self.files or not hmac.compare_digest(request.query.get("Signature", ""), signed):
            return web.Response(status=403, text="<Error><Code>AccessDenied</Code></Error>", content_type="application/xml")
        return web.Response(body=self.files[code], content_type="application/octet-stream")

    # ------------------------------------------------------------------ what the learner sees

    def in_chat(self, chat: str) -> list[Shown]:
        return [s for s in self.shown if s.chat == chat]

    def answers(self, chat: str) -> list[Shown]:
        return [s for s in self.in_chat(chat) if s.finished]
