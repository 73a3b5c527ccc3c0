"""A loopback Mochat for tests: Socket.IO (msgpack) pushes and the claw REST routes, in one aiohttp app.

Mochat's backend is closed; this speaks what its agents' clients do (the
Socket.IO ``auth={"token": claw_token}`` connect, ``com.claw.im.subscribeSessions``
with per-session cursors whose ack carries the missed events, ``com.claw.im.subscribePanels``,
pushes of ``claw.session.events`` and ``notify:chat.message.add``, and ``POST /api/claw/...``
with ``X-Claw-Token`` answering ``{"code": 200, "data": ...}``).  Where Mochat's
documentation is silent the shapes are defined here (ADR 0046): a mention rides
in ``meta.mentions``; ``groups/panels/messages`` lists a panel's latest messages
oldest first; a wrong token is refused at connect with a 401 message and on REST
with HTTP 401.

Test knobs: ``socket_down`` (the Socket.IO path answers 503, so only the REST
routes work), ``send_delay_s`` (a send is taken at once but answered that many
seconds later), :meth:`drop` (close every socket), :meth:`fail_next_send`,
:meth:`push` (any event, malformed ones included), :meth:`redeliver`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import socketio
from aiohttp import web

TOKEN = "claw_" + "7f3kq9w2zx8v"
AGENT = "agent6b1e"


@dataclass(frozen=True)
class Said:
    chat: str
    message_id: str
    event: dict[str, Any]
    panel: bool = False


@dataclass(frozen=True)
class Sent:
    chat: str
    panel: bool
    content: str
    reply_to: str | None
    id: str
    at: float = field(default_factory=time.time)
    """When the emulator took the send (wall clock, for bench/channels.py)."""


@dataclass
class Session:
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class MochatServer:
    def __init__(self, *, token: str = TOKEN, agent: str = AGENT) -> None:
        self.token, self.agent = token, agent
        self.sio = socketio.AsyncServer(async_mode="aiohttp", serializer="msgpack", logger=False, engineio_logger=False)
        self.app = web.Application(middlewares=[self._gate])
        self.sio.attach(self.app)
        self.app.router.add_post("/api/claw/{route:.+}", self._rest)
        self.sessions: dict[str, Session] = {}
        self.panels: dict[str, list[dict[str, Any]]] = {}
        self.sent: list[Sent] = []
        self.socket_down = False
        self.send_delay_s = 0.0
        """How long a send route takes to answer a message it already took (a slow Mochat)."""
        self.subscribes = 0
        self.refused_connects = 0
        self.watches = 0
        self.send_requests = 0
        self.rate_limited_sends = 0
        self._faults: list[tuple[int, float]] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.sio.on("connect", self._connect)
        self.sio.on("com.claw.im.subscribeSessions", self._subscribe_sessions)
        self.sio.on("com.claw.im.subscribePanels", self._subscribe_panels)

    async def __aenter__(self) -> MochatServer:
        self._runner = web.AppRunner(self.app)
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

    # ------------------------------------------------------------------ socket

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> Any:
        if self.socket_down and request.path.startswith("/socket.io"):
            return web.Response(status=503, text="socket unavailable")
        return await handler(request)

    async def _connect(self, sid: str, environ: Any, auth: Any) -> None:
        if not isinstance(auth, dict) or auth.get("token") != self.token:
            self.refused_connects += 1
            raise socketio.exceptions.ConnectionRefusedError("401 invalid claw token")

    async def _subscribe_sessions(self, sid: str, data: Any) -> dict[str, Any]:
        self.subscribes += 1
        ids, cursors = list(data.get("sessionIds", [])), dict(data.get("cursors") or {})
        out = []
        for session in ids:
            await self.sio.enter_room(sid, f"session:{session}")
            after = int(cursors.get(session) or 0)
            events = [e for e in self._session(session).events if e["seq"] > after]
            out.append({"sessionId": session, "cursor": self._cursor(session), "events": events})
        return {"result": True, "data": {"sessions": out}}

    async def _subscribe_panels(self, sid: str, data: Any) -> dict[str, Any]:
        for panel in data.get("panelIds", []):
            await self.sio.enter_room(sid, f"panel:{panel}")
        return {"result": True, "data": {"panelIds": list(data.get("panelIds", []))}}

    async def connected(self, subscribes: int = 1) -> None:
        for _ in range(1200):
            if self.subscribes >= subscribes:
                return
            await asyncio.sleep(0.025)
        raise TimeoutError("no agent subscribed")

    async def drop(self) -> None:
        for sid in list(self.sio.manager.get_participants("/", None)):
            await self.sio.disconnect(sid[0] if isinstance(sid, tuple) else sid)

    async def push(self, event: str, payload: Any, *, room: str | None = None) -> None:
        await self.sio.emit(event, payload, room=room)

    # ------------------------------------------------------------------ what users say

    def _session(self, session: str) -> Session:
        return self.sessions.setdefault(session, Session())

    def _cursor(self, session: str) -> int:
        events = self._session(session).events
        return events[-1]["seq"] if events else 0

    async def say(self, text: Any, *, session: str = "s-learner1", user: str = "u-learner1") -> Said:
        """A person writes in a session: stored with the next seq and pushed to subscribed agents."""
        state = self._session(session)
        message_id = f"m{next(self._ids):06d}{uuid.uuid4().hex[:4]}"
        event = {"seq": self._cursor(session) + 1, "sessionId": session, "type": "message.add",
                 "payload": {"messageId": message_id, "author": user, "content": text,
                             "authorInfo": {"nickname": user}}}
        state.events.append(event)
        state.changed.set()
        state.changed = asyncio.Event()
        await self.push("claw.session.events", {"sessionId": session, "cursor": event["seq"], "events": [event]},
                        room=f"session:{session}")
        return Said(session, message_id, event)

    async def say_in_panel(self, text: str, *, panel: str = "p-class1", user: str = "u-member1", mention: bool = False,
                           group: str = "g-school") -> Said:
        message_id = f"pm{next(self._ids):06d}{uuid.uuid4().hex[:4]}"
        content = f"@{self.agent} {text}" if mention else text
        message = {"_id": message_id, "groupId": group, "converseId": panel, "author": user, "content": content,
                   "meta": {"mentions": [self.agent] if mention else []}}
        self.panels.setdefault(panel, []).append(message)
        await self.push("notify:chat.message.add", message, room=f"panel:{panel}")
        return Said(panel, message_id, message, panel=True)

    async def redeliver(self, said: Said) -> None:
        if said.panel:
            await self.push("notify:chat.message.add", said.event, room=f"panel:{said.chat}")
        else:
            await self.push("claw.session.events", {"sessionId": said.chat, "cursor": said.event["seq"],
                                                    "events": [said.event]}, room=f"session:{said.chat}")

    def shown(self, chat: str) -> list[Sent]:
        return [s for s in self.sent if s.chat == chat]

    def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self._faults.append((status, retry_after))

    # ------------------------------------------------------------------ REST

    async def _rest(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Claw-Token") != self.token:
            return web.json_response({"code": 401, "message": "invalid claw token"}, status=401)
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"code": 400, "message": "body is not JSON"}, status=400)
        route = request.match_info["route"]
        if route == "sessions/watch":
            return self._ok(await self._watch(body))
        if route == "groups/panels/messages":
            panel = str(body.get("panelId"))
            return self._ok({"panelId": panel, "messages": self.panels.get(panel, [])[-int(body.get("limit", 100)):]})
        if route == "sessions/list":
            return self._ok({"sessions": [{"sessionId": s} for s in self.sessions]})
        if route in ("sessions/send", "groups/panels/send"):
            return await self._send(route, body)
        return web.json_response({"code": 404, "message": f"no route {route}"}, status=404)

    @staticmethod
    def _ok(data: dict[str, Any]) -> web.Response:
        return web.json_response({"code": 200, "data": data})

    async def _watch(self, body: dict[str, Any]) -> dict[str, Any]:
        self.watches += 1
        session, after = str(body.get("sessionId")), int(body.get("cursor") or 0)
        state = self._session(session)
        timeout = float(body.get("timeoutMs", 25000)) / 1000
        if not [e for e in state.events if e["seq"] > after]:
            try:
                await asyncio.wait_for(state.changed.wait(), timeout)
            except TimeoutError:
                pass
        events = [e for e in state.events if e["seq"] > after][: int(body.get("limit", 100))]
        return {"sessionId": session, "cursor": events[-1]["seq"] if events else after, "events": events}

    async def _send(self, route: str, body: dict[str, Any]) -> web.Response:
        self.send_requests += 1
        if self._faults:
            status, retry_after = self._faults.pop(0)
            self.rate_limited_sends += status == 429
            headers = {"Retry-After": str(retry_after)} if status == 429 else {}
            return web.json_response({"code": status, "message": "fault"}, status=status, headers=headers)
        content = body.get("content")
        if not isinstance(content, str) or not content:
            return web.json_response({"code": 400, "message": "content is required"}, status=400)
        panel = route.startswith("groups")
        chat = str(body.get("panelId") if panel else body.get("sessionId"))
        sent = Sent(chat, panel, content, body.get("replyTo"), f"out{next(self._ids):06d}")
        self.sent.append(sent)
        if self.send_delay_s:  # posted already; the answer comes late
            await asyncio.sleep(self.send_delay_s)
        return self._ok({"messageId": sent.id, "sessionId": chat, "status": "sent"})
