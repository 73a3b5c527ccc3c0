"""A loopback OneBot v11 implementation as NapCat serves it, written from the OneBot v11 spec and NapCat's docs.

What it speaks.  Forward websocket: the bot dials ``ws://127.0.0.1:P/``; a
handshake without ``Authorization: Bearer <token>`` (or ``?access_token=``) is
answered HTTP 401.  Once open it pushes ``meta_event`` ``lifecycle/connect``,
then ``heartbeat`` meta events every ``heartbeat_ms``, and each message a
learner says as ``post_type: message`` in the array format (private, or group
with an optional ``at`` of the bot and an optional ``reply`` segment).  Actions
``{"action", "params", "echo"}`` are answered ``{"status", "retcode", "data",
"echo"}``: ``send_private_msg`` / ``send_group_msg`` (``data.message_id``),
``get_login_info`` (``user_id``, ``nickname``); an unknown action 1404.

Reverse websocket: :meth:`NapcatServer.dial` plays NapCat's websocket client,
connecting to the gateway's URL with ``X-Self-ID``, ``X-Client-Role: Universal``
and the bearer, then speaks the same frames.

Like NapCat, nothing is kept for a bot that is not connected: a message said
then is lost (:attr:`lost` counts them).  Faults: :meth:`drop` closes the
socket; :meth:`redeliver` pushes an event again (NapCat does not, but the
dedup is what makes a reconnect safe); :attr:`fail_sends` answers sends with a
failed retcode; :meth:`raw` pushes any frame (malformed ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tests.waits import HANG_S

GROUP_PREFIX = "g"


@dataclass
class Said:
    message_id: int
    event: dict[str, Any]


@dataclass
class Shown:
    """One message the bot sent, as QQ shows it."""

    message_id: int
    chat: str
    text: str
    reply_to: str | None
    segments: list[dict[str, Any]]
    at: float = field(default_factory=time.time)


class NapcatServer:
    def __init__(self, *, token: str, self_id: int = 3456789012, heartbeat_ms: int = 30000) -> None:
        self.token, self.self_id, self.heartbeat_ms = token, self_id, heartbeat_ms
        self.timeline: list[Shown] = []
        self.actions: list[dict[str, Any]] = []
        self.refused = 0
        self.lost = 0
        self.fail_sends: int | None = None
        """A retcode to answer every send with (status ``failed``), or None."""
        self._ids = itertools.count(10001)
        self._sockets: list[ServerConnection | ClientConnection] = []
        self._connected = asyncio.Event()
        self._server: Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    async def __aenter__(self) -> NapcatServer:
        self._server = await serve(self._serve, "127.0.0.1", 0, process_request=self._check, ping_interval=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for socket in list(self._sockets):
            with contextlib.suppress(Exception):
                await socket.close()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ------------------------------------------------------------------ the handshake

    def _authorized(self, headers: Headers, path: str) -> bool:
        given = headers.get("Authorization", "")
        if given == f"Bearer {self.token}":
            return True
        return f"access_token={self.token}" in path.partition("?")[2].split("&")

    def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        if not self._authorized(request.headers, request.path):
            self.refused += 1
            return connection.respond(401, "access token required\n")
        return None

    async def _serve(self, socket: ServerConnection) -> None:
        await self._speak(socket)

    async def dial(self, url: str, *, token: str | None = None, self_id: int | None = None) -> None:
        """Reverse mode: connect to the gateway as NapCat's websocket client; raises what the handshake raised."""
        headers = {"X-Self-ID": str(self_id or self.self_id), "X-Client-Role": "Universal",
                   "Authorization": f"Bearer {token if token is not None else self.token}"}
        socket = await connect(url, additional_headers=headers, ping_interval=None, proxy=None)
        task = asyncio.create_task(self._speak(socket))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _speak(self, socket: ServerConnection | ClientConnection) -> None:
        self._sockets.append(socket)
        self._connected.set()
        beat = asyncio.create_task(self._beat(socket))
        try:
            await socket.send(json.dumps(self._meta("lifecycle", sub_type="connect")))
            async for wire in socket:
                await self._act(socket, json.loads(wire))
        except ConnectionClosed:
            pass
        finally:
            beat.cancel()
            self._sockets.remove(socket)
            if not self._sockets:
                self._connected.clear()

    async def _beat(self, socket: ServerConnection | ClientConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.sleep(self.heartbeat_ms / 1000)
                await socket.send(json.dumps({**self._meta("heartbeat"), "interval": self.heartbeat_ms,
                                              "status": {"online": True, "good": True}}))

    def _meta(self, kind: str, **more: Any) -> dict[str, Any]:
        return {"time": int(time.time()), "self_id": self.self_id, "post_type": "meta_event",
                "meta_event_type": kind, **more}

    # ------------------------------------------------------------------ actions

    async def _act(self, socket: ServerConnection | ClientConnection, request: dict[str, Any]) -> None:
        self.actions.append(request)
        action, params, echo = request.get("action"), request.get("params") or {}, request.get("echo")
        if action in ("send_private_msg", "send_group_msg", "send_msg"):
            if self.fail_sends is not None:
                answer = {"status": "failed", "retcode": self.fail_sends, "data": None,
                          "message": "send failed", "wording": "消息发送失败"}
            else:
                answer = {"status": "ok", "retcode": 0, "data": {"message_id": self._show(action, params)}}
        elif action == "get_login_info":
            answer = {"status": "ok", "retcode": 0, "data": {"user_id": self.self_id, "nickname": "tutor"}}
        else:
            answer = {"status": "failed", "retcode": 1404, "data": None, "message": "API 不存在"}
        await socket.send(json.dumps({**answer, "echo": echo}, ensure_ascii=False))

    def _show(self, action: str, params: dict[str, Any]) -> int:
        group = params.get("group_id") if action == "send_group_msg" or params.get("message_type") == "group" else None
        chat = f"{GROUP_PREFIX}{group}" if group is not None else str(params.get("user_id"))
        message = params.get("message") or []
        text = "".join(s["data"].get("text", "") for s in message if s.get("type") == "text")
        reply = next((str(s["data"]["id"]) for s in message if s.get("type") == "reply"), None)
        message_id = next(self._ids)
        self.timeline.append(Shown(message_id=message_id, chat=chat, text=text, reply_to=reply, segments=message))
        return message_id

    def shown(self, chat: str) -> list[Shown]:
        return [s for s in self.timeline if s.chat == chat]

    # ------------------------------------------------------------------ learners

    async def connected(self) -> None:
        await asyncio.wait_for(self._connected.wait(), HANG_S)

    async def say(self, text: str, *, user: int, group: int | None = None, mention: bool = False,
                  reply_to: int | str | None = None, sent: bool = False) -> Said:
        """A learner says ``text`` (``sent``: the bot's own account said it, a ``message_sent``)."""
        segments: list[dict[str, Any]] = []
        if reply_to is not None:
            segments.append({"type": "reply", "data": {"id": str(reply_to)}})
        if mention:
            segments.append({"type": "at", "data": {"qq": str(self.self_id)}})
            text = " " + text
        segments.append({"type": "text", "data": {"text": text}})
        message_id = next(self._ids)
        event: dict[str, Any] = {
            "time": int(time.time()), "self_id": self.self_id, "post_type": "message_sent" if sent else "message",
            "message_type": "group" if group is not None else "private",
            "sub_type": "normal" if group is not None else "friend", "message_id": message_id,
            "user_id": self.self_id if sent else user, "message": segments, "raw_message": text, "font": 14,
            "sender": {"user_id": user, "nickname": f"learner {user}", "card": ""}}
        if group is not None:
            event["group_id"] = group
        said = Said(message_id=message_id, event=event)
        await self._push(event)
        return said

    async def redeliver(self, said: Said) -> None:
        await self._push(said.event)

    async def raw(self, wire: str) -> None:
        for socket in list(self._sockets):
            await socket.send(wire)

    async def _push(self, event: dict[str, Any]) -> None:
        if not self._sockets:
            self.lost += 1  # OneBot keeps nothing for a bot that is not there
            return
        wire = json.dumps(event, ensure_ascii=False)
        for socket in list(self._sockets):
            with contextlib.suppress(ConnectionClosed):
                await socket.send(wire)

    async def drop(self) -> None:
        for socket in list(self._sockets):
            await socket.close(code=1001, reason="napcat restarting")
