"""An emulated QQ open platform for one bot: the OpenAPI it answers and the webhook it posts, from QQ's documentation.

Written from the bot API's documentation (Q1-Q3), not from the gateway:

- **Token.**  ``POST /app/getAppAccessToken {appId, clientSecret}`` hands out
  ``{"access_token", "expires_in": "7200"}`` (a string, as QQ writes it); a
  wrong secret is ``{"code": 100016}``.  Every OpenAPI call needs
  ``Authorization: QQBot <token>``; another is 401 ``{"code": 11244}``.
- **Who.**  ``GET /users/@me`` and ``GET /gateway/bot`` (with
  ``session_start_limit``), numeric-string ids.
- **Replies.**  ``POST /v2/users/{openid}/messages``,
  ``/v2/groups/{group_openid}/messages``, ``/channels/{channel_id}/messages``
  and ``/dms/{guild_id}/messages`` take a message only with the ``msg_id`` of
  a message QQ delivered (active push ended, Q1), within 60 min of it (5 for
  a group), at most :data:`REPLIES` per message (``22009 msg limit
  exceed``); a second post of one ``msg_id`` + ``msg_seq`` is refused as a
  duplicate (``40054005``), and a text past :data:`TEXT_LIMIT` characters is
  refused.  What was taken is recorded in ``sent``.
- **Webhook.**  :meth:`QQPeer.say` posts ``C2C_MESSAGE_CREATE`` (or a group,
  guild event) as op 0, signed with Ed25519 over timestamp + body, the key
  seeded from the bot secret, and posts it again -- :data:`RETRIES` times,
  ``retry_after_s`` apart -- while the answer is not op 12;
  :meth:`QQPeer.validate` sends op 13 and checks the signature in the answer.
- **Websocket gateway** (:meth:`QQPeer.gateway`, on its own loopback port;
  ``GET /gateway/bot`` names it).  On connect op 10 hello with
  ``heartbeat_interval`` (ms); op 2 identify with a token QQ handed out
  (``QQBot <token>``) gets op 0 ``READY`` with a new ``session_id``; op 6 resume
  of a known session replays every dispatch after its ``seq`` and then sends
  ``RESUMED`` (an unknown one gets op 9); each dispatch carries the session's
  next ``s``, and one said while no socket is open waits for the resume; op 1
  heartbeat gets op 11 unless :attr:`QQPeer.mute`.  On command: op 7 reconnect
  (:meth:`QQPeer.reconnect`), op 9 invalid session (:meth:`QQPeer.invalidate`),
  a close code for the next identify or resume (``close_next``: 4004 invalid
  token, 4914 bot unpublished ...).  While the gateway is served,
  :meth:`QQPeer.say` dispatches there instead of posting to the webhook.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tests.peers.tencent_api import TLS
from tests.waits import HTTP_S, tries

RETRIES = 3
REPLIES = 5
TEXT_LIMIT = 2000
WINDOWS = {"user": 3600.0, "dms": 3600.0, "group": 300.0, "channel": 300.0}
EVENTS = {"user": "C2C_MESSAGE_CREATE", "group": "GROUP_AT_MESSAGE_CREATE", "channel": "AT_MESSAGE_CREATE",
          "dms": "DIRECT_MESSAGE_CREATE"}
CST = timezone(timedelta(hours=8))


def chat_of(kind: str, place: str) -> str:
    """How the tests name a chat: a direct chat by the learner's openid, the others ``kind:id``."""
    return place if kind == "user" else f"{kind}:{place}"


def signing_key(secret: str) -> Ed25519PrivateKey:
    """QQ's documented seed: the secret repeated until it is 32 bytes long, cut there."""
    seed = (secret * (32 // len(secret) + 1))[:32]
    return Ed25519PrivateKey.from_private_bytes(seed.encode())


@dataclass
class Delivery:
    msg_id: str
    attempt: int
    status: int
    body: str
    failed: str = ""


@dataclass
class Delivered:
    """A message QQ delivered: where, when (epoch s), and how many replies it got."""

    place: str
    at: float
    replies: int = 0


@dataclass
class GatewaySession:
    """One session on the websocket gateway: its id, the sequence it is at, every dispatch it carried."""

    id: str
    last_s: int = 0
    dispatches: list[dict] = field(default_factory=list)

    def next_s(self) -> int:
        self.last_s += 1
        return self.last_s


@dataclass
class QQPeer:
    app_id: str = field(default_factory=lambda: str(100_000_000 + secrets.randbelow(899_999_999)))
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    callback_url: str = ""
    retry_after_s: float = 3.0
    bot_openid: str = field(default_factory=lambda: str(secrets.randbelow(10**18)))
    sent: list[dict] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    tokens_issued: int = 0
    _tokens: set[str] = field(default_factory=set)
    _delivered: dict[str, Delivered] = field(default_factory=dict)
    _seqs: set[tuple[str, int]] = field(default_factory=set)
    _faults: list[tuple[int, int]] = field(default_factory=list)
    _lose: int = 0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(int(time.time()) * 1000))
    gateway_url: str = "wss://api.sgroup.qq.com/websocket"
    heartbeat_ms: int = 45_000
    mute: bool = False
    """Stop answering heartbeats (a connection that died without TCP noticing)."""
    close_next: int | None = None
    """Close the next identify or resume with this code instead of answering it."""
    opened: list[dict] = field(default_factory=list)
    """Each gateway connection's first client frame: identify (op 2) or resume (op 6)."""
    beats: list[int | None] = field(default_factory=list)
    """The ``d`` of every heartbeat: the last sequence the client named."""
    pushed: list[tuple[int, str]] = field(default_factory=list)
    """Every dispatch sent on a socket, replays too: (s, message id)."""
    closed_with: list[int] = field(default_factory=list)
    _sessions: dict[str, GatewaySession] = field(default_factory=dict)
    _session: GatewaySession | None = None
    _live: ServerConnection | None = None
    _serving: bool = False
    media: dict[str, bytes] = field(default_factory=dict)
    """What learners attached, by file id, served at ``/download``."""
    downloads: list[str] = field(default_factory=list)
    """Each file id fetched, in order."""

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/app/getAppAccessToken", self._token, methods=["POST"]),
            Route("/users/@me", self._me), Route("/gateway/bot", self._gateway), Route("/download", self._download),
            Route("/v2/users/{place}/messages", self._reply("user"), methods=["POST"]),
            Route("/v2/groups/{place}/messages", self._reply("group"), methods=["POST"]),
            Route("/channels/{place}/messages", self._reply("channel"), methods=["POST"]),
            Route("/dms/{place}/messages", self._reply("dms"), methods=["POST"]),
        ])

    # ------------------------------------------------------------------ the OpenAPI

    def error(self, status: int, code: int, message: str) -> JSONResponse:
        self.refused.append(code)
        return JSONResponse({"code": code, "message": message, "trace_id": secrets.token_hex(8)}, status_code=status)

    def expire_token(self) -> None:
        self._tokens.clear()

    def fail_next(self, status: int, code: int) -> None:
        self._faults.append((status, code))

    def lose_next_answer(self) -> None:
        """The next message is taken and shown, but its answer is lost on the way (504)."""
        self._lose += 1

    async def _token(self, request: Request) -> JSONResponse:
        asked = json.loads(await request.body() or b"{}")
        if asked.get("appId") != self.app_id or asked.get("clientSecret") != self.secret:
            return self.error(200, 100016, "invalid appid or secret")
        token = secrets.token_urlsafe(18)
        self._tokens.add(token)
        self.tokens_issued += 1
        return JSONResponse({"access_token": token, "expires_in": "7200"})

    def _refusal(self, request: Request) -> JSONResponse | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme != "QQBot" or token not in self._tokens:
            return self.error(401, 11244, "token not exist or expire")
        if self._faults:
            return self.error(*self._faults.pop(0), "injected")
        return None

    async def _me(self, request: Request) -> JSONResponse:
        return self._refusal(request) or JSONResponse({"id": self.bot_openid, "username": "Tutor Bot", "avatar": ""})

    async def _gateway(self, request: Request) -> JSONResponse:
        return self._refusal(request) or JSONResponse({
            "url": self.gateway_url, "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 86400000, "max_concurrency": 1}})

    def _reply(self, kind: str):
        async def reply(request: Request) -> JSONResponse:
            refused = self._refusal(request)
            if refused is not None:
                return refused
            place, body = request.path_params["place"], json.loads(await request.body())
            msg_id, seq = str(body.get("msg_id") or ""), int(body.get("msg_seq") or 1)
            origin = self._delivered.get(msg_id)
            if origin is None or origin.place != chat_of(kind, place):
                return self.error(400, 40034102, "active messages are not allowed: msg_id required")
            if (msg_id, seq) in self._seqs:
                return self.error(400, 40054005, "消息被去重，请检查请求msgseq")
            if origin.replies >= REPLIES or time.time() > origin.at + WINDOWS[kind]:
                return self.error(400, 22009, "msg limit exceed")
            content = str(body.get("content") or "")
            if not content.strip() or len(content) > TEXT_LIMIT:
                return self.error(400, 50006, "content empty or too long")
            origin.replies += 1
            self._seqs.add((msg_id, seq))
            self.sent.append({"chat": chat_of(kind, place), "content": body["content"], "msg_id": msg_id, "msg_seq": seq})
            self.sent_at.append(time.time())
            if self._lose:
                self._lose -= 1
                return JSONResponse({"message": "gateway timeout"}, status_code=504)
            return JSONResponse({"id": f"R{next(self._ids)}", "timestamp": datetime.now(CST).isoformat()})

        return reply

    def texts_to(self, chat: str) -> list[str]:
        """What ``chat`` (an openid, ``group:<group_openid>`` ...) was shown, in arrival order."""
        return [m["content"] for m in self.sent if m["chat"] == chat]

    # ------------------------------------------------------------------ the webhook

    def signed(self, body: bytes, *, timestamp: str | None = None, key: Ed25519PrivateKey | None = None) -> dict[str, str]:
        stamp = timestamp or str(int(time.time()))
        signature = (key or signing_key(self.secret)).sign(stamp.encode() + body).hex()
        return {"Content-Type": "application/json", "User-Agent": "QQBot-Callback", "X-Bot-Appid": self.app_id,
                "X-Signature-Method": "Ed25519", "X-Signature-Timestamp": stamp, "X-Signature-Ed25519": signature}

    def event(self, kind: str, place: str, user: str, text: str, *, msg_id: str, at: float,
              attachments: list[dict] | None = None) -> bytes:
        """An op 0 payload of the event a learner's ``text`` in ``kind:place`` is, as QQ posts it."""
        return json.dumps(self.payload(kind, place, user, text, msg_id=msg_id, at=at, attachments=attachments),
                          ensure_ascii=False).encode()

    def attach(self, base: str, data: bytes, *, content_type: str, filename: str = "", **extra: object) -> dict:
        """An attachment as QQ names one: the bytes wait on the media host (this peer at ``base``) at a signed URL."""
        key = secrets.token_hex(8)
        self.media[key] = data
        return {"content_type": content_type, "filename": filename, "size": len(data),
                "url": f"{base.rstrip('/')}/download?fileid={key}&rkey={self._rkey(key)}", **extra}

    def _rkey(self, key: str) -> str:
        return hashlib.sha256(f"{self.secret}:{key}".encode()).hexdigest()[:16]

    async def _download(self, request: Request) -> Response:
        key = request.query_params.get("fileid", "")
        if key not in self.media or request.query_params.get("rkey") != self._rkey(key):
            return PlainTextResponse("forbidden", status_code=403)
        self.downloads.append(key)
        return Response(self.media[key], media_type="application/octet-stream")

    def payload(self, kind: str, place: str, user: str, text: str, *, msg_id: str, at: float,
                attachments: list[dict] | None = None) -> dict:
        """The op 0 dispatch of a learner's ``text`` in ``kind:place``, as QQ writes it."""
        author = {"user": {"user_openid": user}, "group": {"member_openid": user},
                  "channel": {"id": user, "username": user}, "dms": {"id": user, "username": user}}[kind]
        data: dict = {"id": msg_id, "content": text, "author": author,
                      "timestamp": datetime.fromtimestamp(at, CST).isoformat()}
        if attachments:
            data["attachments"] = attachments
        if kind == "group":
            data |= {"group_openid": place, "content": " " + text}
        elif kind == "channel":
            data |= {"channel_id": place, "guild_id": "G1", "content": f"<@!{self.bot_openid}> {text}"}
        elif kind == "dms":
            data |= {"guild_id": place, "channel_id": "C1"}
        return {"op": 0, "id": f"{EVENTS[kind]}:{secrets.token_hex(8)}", "d": data, "s": 42, "t": EVENTS[kind]}

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False, verify=TLS) as http:
            return await http.post(self.callback_url, content=body, headers=headers)

    async def say(self, chat: str, text: str, *, user: str = "", msg_id: str | None = None,
                  at: float | None = None, attachments: list[dict] | None = None) -> str:
        """A learner says ``text`` into ``chat`` (an openid, ``group:<group_openid>`` ...); posted, retried, as
        QQ does; its msg_id."""
        kind, _, place = chat.rpartition(":")
        kind = kind or "user"
        msg_id = msg_id or f"ROBOT1.0_{next(self._ids)}"
        when = time.time() if at is None else at
        self._delivered.setdefault(msg_id, Delivered(chat, when))
        if self._serving:
            await self.dispatch(self.payload(kind, place, user or place, text, msg_id=msg_id, at=when,
                                             attachments=attachments))
            return msg_id
        body = self.event(kind, place, user or place, text, msg_id=msg_id, at=when, attachments=attachments)
        for attempt in range(1 + RETRIES):
            began = time.monotonic()
            try:
                async with httpx.AsyncClient(timeout=self.retry_after_s, trust_env=False, verify=TLS) as http:
                    answer = await http.post(self.callback_url, content=body, headers=self.signed(body))
                status, said, failed = answer.status_code, answer.text, ""
            except httpx.TransportError as error:
                status, said, failed = 0, "", type(error).__name__
            self.deliveries.append(Delivery(msg_id, attempt, status, said, failed))
            if status == 200 and _acked(said):
                return msg_id
            await asyncio.sleep(max(0.0, self.retry_after_s - (time.monotonic() - began)))
        return msg_id

    def acknowledged(self) -> set[str]:
        return {d.msg_id for d in self.deliveries if d.status == 200 and _acked(d.body)}

    async def validate(self) -> tuple[httpx.Response, bool]:
        """The open platform's check of a callback address (op 13): the answer, and whether its signature holds."""
        plain, stamp = secrets.token_urlsafe(12), str(int(time.time()))
        body = json.dumps({"op": 13, "d": {"plain_token": plain, "event_ts": stamp}}).encode()
        answer = await self.post(body, self.signed(body))
        try:
            said = answer.json()
            signing_key(self.secret).public_key().verify(bytes.fromhex(said["signature"]), (stamp + plain).encode())
            return answer, said["plain_token"] == plain
        except Exception:  # any wrong answer is a failed validation
            return answer, False


    # ------------------------------------------------------------------ the websocket gateway

    @contextlib.asynccontextmanager
    async def gateway(self) -> AsyncIterator[str]:
        """The websocket gateway on a free loopback port, named by ``GET /gateway/bot``; yields its URL."""
        async with serve(self._connection, "127.0.0.1", 0) as server:
            host, port = next(iter(server.sockets)).getsockname()[:2]
            self.gateway_url, self._serving = f"ws://{host}:{port}/websocket", True
            try:
                yield self.gateway_url
            finally:
                self._serving = False

    def sessions(self) -> int:
        return len(self._sessions)

    async def _send(self, ws: ServerConnection, frame: dict) -> None:
        if frame.get("op") == 0 and frame.get("t") not in ("READY", "RESUMED"):
            self.pushed.append((frame["s"], frame["d"]["id"]))
        await ws.send(json.dumps(frame, ensure_ascii=False))

    async def _connection(self, ws: ServerConnection) -> None:
        try:
            await ws.send(json.dumps({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}}))
            first = json.loads(await ws.recv())
            self.opened.append(first)
            asked = first.get("d") or {}
            scheme, _, token = str(asked.get("token", "")).partition(" ")
            if self.close_next is not None:
                code, self.close_next = self.close_next, None
                self.closed_with.append(code)
                await ws.close(code, "refused")
                return
            if first.get("op") not in (2, 6) or scheme != "QQBot" or token not in self._tokens:
                self.closed_with.append(4004)
                await ws.close(4004, "invalid token")
                return
            self._live = ws
            if first["op"] == 2:
                session = self._session = GatewaySession(secrets.token_hex(8))
                self._sessions[session.id] = session
                await ws.send(json.dumps({"op": 0, "s": session.next_s(), "t": "READY", "d": {
                    "version": 1, "session_id": session.id, "shard": [0, 1],
                    "user": {"id": self.bot_openid, "username": "Tutor Bot", "bot": True}}}))
            else:
                known = self._sessions.get(str(asked.get("session_id")))
                if known is None:
                    await ws.send(json.dumps({"op": 9, "d": False}))
                    await ws.wait_closed()
                    return
                self._session = known
                for frame in [f for f in known.dispatches if f["s"] > int(asked.get("seq") or 0)]:
                    await self._send(ws, frame)
                await ws.send(json.dumps({"op": 0, "s": known.next_s(), "t": "RESUMED", "d": ""}))
            async for raw in ws:
                said = json.loads(raw)
                if said.get("op") == 1:
                    self.beats.append(said.get("d"))
                    if not self.mute:
                        await ws.send(json.dumps({"op": 11}))
        except ConnectionClosed:
            pass
        finally:
            if self._live is ws:
                self._live = None

    async def dispatch(self, payload: dict) -> None:
        """Send ``payload`` on the session's socket with its next ``s``; kept for a resume if no socket is open."""
        await _until(lambda: self._session is not None)  # nothing identified yet: QQ has no session to put it in
        assert self._session is not None
        frame = payload | {"s": self._session.next_s()}
        self._session.dispatches.append(frame)
        if self._live is not None:
            with contextlib.suppress(ConnectionClosed):
                await self._send(self._live, frame)

    async def _socket(self) -> ServerConnection:
        await _until(lambda: self._live is not None)
        assert self._live is not None
        return self._live

    async def _command(self, frame: dict) -> None:
        await (await self._socket()).send(json.dumps(frame))

    async def reconnect(self) -> None:
        """Op 7: the client should reconnect and resume."""
        await self._command({"op": 7})

    async def invalidate(self) -> None:
        """Op 9: the session is gone (resuming it is refused); the client must identify afresh."""
        if self._session is not None:
            self._sessions.pop(self._session.id, None)
        await self._command({"op": 9, "d": False})

    async def close_live(self, code: int, reason: str = "") -> None:
        live = await self._socket()
        self.closed_with.append(code)
        await live.close(code, reason)


async def _until(check) -> None:
    """Wait for the gateway's state to allow a command, bounded by the tests' hang limit."""
    for _ in tries(0.01):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the QQ gateway emulator waited for a connection that never came")


def _acked(body: str) -> bool:
    try:
        return json.loads(body).get("op") == 12
    except (ValueError, AttributeError):
        return False
