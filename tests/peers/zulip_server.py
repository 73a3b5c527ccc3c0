"""A loopback Zulip for tests: the REST API a bot uses, written from zulip.com/api, in one aiohttp app.

Routes (all under ``/api/v1``, HTTP Basic auth with the bot's email and API key,
parameters form-encoded with lists as JSON, answers ``{"result": "success", "msg": "", ...}``):

- ``GET /users/me``; ``GET /server_settings`` (no auth);
- ``POST /register`` -> ``queue_id``, ``last_event_id`` (-1) and, with ``fetch_event_types``
  naming ``message``, ``max_message_id``;
- ``GET /events?queue_id&last_event_id``: a long poll; events up to ``last_event_id`` are taken as
  confirmed and dropped, the rest handed out; with nothing new a ``heartbeat`` event comes after
  ``heartbeat_s``; an unknown queue is 400 ``BAD_EVENT_QUEUE_ID``;
- ``GET /messages?anchor&include_anchor&num_before&num_after&narrow``: the bot's messages after the
  anchor, oldest first, each with its ``flags`` (``mentioned`` when it names the bot), and ``found_newest``;
- ``POST /messages`` (``type`` private/direct or stream/channel, ``to``, ``topic``, ``content``) -> ``id``;
  content over 10,000 bytes or a topic over 60 characters is 400 ``BAD_REQUEST``;
- ``PATCH /messages/{id}`` (``content``), the bot's own messages only; ``POST /typing``.

Every answer carries ``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset``; a 429 says ``retry-after``
in its body and in ``Retry-After``, code ``RATE_LIMIT_HIT``.  A message the bot sends is also an
event on its queues, as Zulip delivers a sender its own messages.

Test knobs: :meth:`fail_next_send`, ``down`` (every route 503), :meth:`expire_queues` (as Zulip's
garbage collection or a restart does), :meth:`redeliver` (the same message as a second event).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_ID, BOT_NAME, BOT_EMAIL = 100, "Tutor Bot", "tutor-bot@school.zulip.test"
KEY = "zk" + "3ZpQ8wX1vB7nM4cR6tY9uI2oP5aS0dFg"
CONTENT_MAX_BYTES, TOPIC_MAX_CHARS = 10000, 60


@dataclass
class Queue:
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.changed.set()


@dataclass(frozen=True)
class Said:
    chat: str
    message: dict[str, Any]


@dataclass
class Sent:
    """A message the bot sent, as the people in its conversation now see it."""

    chat: str
    id: int
    content: str
    topic: str | None
    edits: int = 0
    at: float = field(default_factory=time.time)
    """When the emulator took the send (wall clock, for bench/channels.py)."""


class ZulipServer:
    def __init__(self, *, key: str = KEY, heartbeat_s: float = 1.0) -> None:
        self.key, self.heartbeat_s = key, heartbeat_s
        self.app = web.Application(middlewares=[self._gate])
        for method, path, handler in (
            ("GET", "/api/v1/server_settings", self._server_settings), ("GET", "/api/v1/users/me", self._me),
            ("POST", "/api/v1/register", self._register), ("GET", "/api/v1/events", self._events),
            ("GET", "/api/v1/messages", self._messages), ("POST", "/api/v1/messages", self._send),
            ("PATCH", "/api/v1/messages/{id}", self._edit), ("POST", "/api/v1/typing", self._typing)):
            self.app.router.add_route(method, path, handler)
        self.queues: dict[str, Queue] = {}
        self.messages: list[dict[str, Any]] = []
        self.sent: list[Sent] = []
        self.streams: dict[str, int] = {}
        self.users: dict[int, str] = {BOT_ID: BOT_NAME}
        self.down = False
        self.registers = self.polls = self.catch_ups = self.send_requests = self.rate_limited_sends = 0
        self.typings = 0
        self._faults: list[tuple[int, float]] = []
        self._ids = itertools.count(1001)
        self._event_ids = itertools.count(0)
        self._queue_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ZulipServer:
        self._runner = web.AppRunner(self.app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for queue in self.queues.values():
            queue.changed.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ the platform's people

    def user(self, name: str) -> int:
        for uid, known in self.users.items():
            if known == name:
                return uid
        uid = 200 + len(self.users)
        self.users[uid] = name
        return uid

    def stream(self, name: str) -> int:
        return self.streams.setdefault(name, 10 + len(self.streams))

    async def say(self, text: str, *, user: str = "Ada Learner", stream: str | None = None, topic: str = "homework",
                  mention: bool = False, with_users: tuple[str, ...] = ()) -> Said:
        """A person writes to the bot (a DM), to a group DM ``with_users``, or in a stream's topic."""
        sender = self.user(user)
        content = f"@**{BOT_NAME}** {text}" if mention else text
        message: dict[str, Any] = {"id": next(self._ids), "sender_id": sender, "sender_full_name": user,
                                   "sender_email": f"u{sender}@school.zulip.test", "content": content,
                                   "timestamp": int(time.time()), "content_type": "text/x-markdown"}
        if stream is not None:
            message.update(type="stream", stream_id=self.stream(stream), display_recipient=stream, subject=topic)
            chat = f"stream:{self.stream(stream)}"
        else:
            people = sorted({sender, BOT_ID, *(self.user(u) for u in with_users)})
            message.update(type="private", subject="", display_recipient=[
                {"id": p, "full_name": self.users[p], "email": f"u{p}@school.zulip.test"} for p in people])
            chat = str(sender) if len(people) == 2 else "dm:" + ",".join(map(str, people))
        self._deliver(message)
        return Said(chat, message)

    async def say_as_bot(self, text: str, *, chat: str) -> None:
        """The bot's own account writes (someone using its key elsewhere): delivered to its queues, not
        counted among what the gateway sent."""
        self._post(chat, text, None, record=False)

    async def redeliver(self, said: Said) -> None:
        for queue in self.queues.values():
            queue.push(self._event(said.message))

    def _flags(self, message: dict[str, Any]) -> list[str]:
        flags = ["read"] if message["sender_id"] == BOT_ID else []
        if f"@**{BOT_NAME}**" in message["content"]:
            flags.append("mentioned")
        return flags

    def _event(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "message", "id": next(self._event_ids), "message": message, "flags": self._flags(message)}

    def _deliver(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        for queue in self.queues.values():
            queue.push(self._event(message))

    def shown(self, chat: str) -> list[Sent]:
        return [s for s in self.sent if s.chat == chat]

    def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self._faults.append((status, retry_after))

    def expire_queues(self) -> None:
        for queue in self.queues.values():
            queue.changed.set()
        self.queues.clear()

    # ------------------------------------------------------------------ the wire

    @staticmethod
    def _ok(**body: Any) -> web.Response:
        return web.json_response({"result": "success", "msg": "", **body})

    @staticmethod
    def _error(status: int, code: str, msg: str, **more: Any) -> web.Response:
        return web.json_response({"result": "error", "msg": msg, "code": code, **more}, status=status)

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.down:
            return web.Response(status=503, text="<html>502 Bad Gateway</html>", content_type="text/html")
        if request.path != "/api/v1/server_settings" and not self._authorized(request):
            return self._error(401, "UNAUTHORIZED", "Invalid API key")
        response = await handler(request)
        response.headers.update({"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": "199",
                                 "X-RateLimit-Reset": str(int(time.time()) + 60)})
        return response

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            email, _, key = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return False
        return email == BOT_EMAIL and key == self.key

    async def _server_settings(self, request: web.Request) -> web.Response:
        return self._ok(zulip_version="9.0", zulip_feature_level=270, realm_uri=self.url)

    async def _me(self, request: web.Request) -> web.Response:
        return self._ok(user_id=BOT_ID, full_name=BOT_NAME, email=BOT_EMAIL, is_bot=True)

    async def _register(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.registers += 1
        queue_id = f"{int(time.time())}:{next(self._queue_ids)}"
        self.queues[queue_id] = Queue()
        body: dict[str, Any] = {"queue_id": queue_id, "last_event_id": -1, "zulip_feature_level": 270}
        if "message" in json.loads(str(form.get("fetch_event_types", "[]"))):
            body["max_message_id"] = self.messages[-1]["id"] if self.messages else -1
        return self._ok(**body)

    async def _events(self, request: web.Request) -> web.Response:
        self.polls += 1
        queue_id = request.query.get("queue_id", "")
        queue = self.queues.get(queue_id)
        if queue is None:
            return self._error(400, "BAD_EVENT_QUEUE_ID", f"Bad event queue ID: {queue_id}", queue_id=queue_id)
        try:
            last = int(request.query.get("last_event_id", "-1"))
        except ValueError:
            return self._error(400, "BAD_REQUEST", "Invalid last_event_id")
        queue.events = [e for e in queue.events if e["id"] > last]  # confirmed by the poll that names a later id
        if not queue.events:
            queue.changed.clear()
            try:
                await asyncio.wait_for(queue.changed.wait(), self.heartbeat_s)
            except TimeoutError:
                pass
            if queue_id not in self.queues:
                return self._error(400, "BAD_EVENT_QUEUE_ID", f"Bad event queue ID: {queue_id}", queue_id=queue_id)
            if not queue.events:
                queue.push({"type": "heartbeat", "id": next(self._event_ids)})
        return self._ok(events=list(queue.events), queue_id=queue_id)

    async def _messages(self, request: web.Request) -> web.Response:
        self.catch_ups += 1
        query = request.query
        anchor, after = int(query.get("anchor", "0")), int(query.get("num_after", "0"))
        include = query.get("include_anchor", "true") == "true"
        later = [m for m in self.messages if m["id"] > anchor or (include and m["id"] == anchor)]
        page = [{**m, "flags": self._flags(m)} for m in later[:after]]
        return self._ok(messages=page, found_newest=len(later) <= after, found_anchor=False, anchor=anchor)

    async def _send(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.send_requests += 1
        if self._faults:
            status, retry_after = self._faults.pop(0)
            if status == 429:
                self.rate_limited_sends += 1
                response = self._error(429, "RATE_LIMIT_HIT", "API usage exceeded rate limit", **{"retry-after": retry_after})
                response.headers["Retry-After"] = str(retry_after)
                return response
            if status >= 500:
                return web.Response(status=status, text="<html>upstream error</html>", content_type="text/html")
            return self._error(status, "UNAUTHORIZED" if status == 401 else "BAD_REQUEST", "fault")
        content, kind, topic = str(form.get("content", "")), str(form.get("type", "")), form.get("topic")
        if not content.strip():
            return self._error(400, "BAD_REQUEST", "Message must not be empty")
        if len(content.encode()) > CONTENT_MAX_BYTES:
            return self._error(400, "BAD_REQUEST", "Message too long")
        try:
            to = json.loads(str(form.get("to", "")))
        except ValueError:
            to = str(form.get("to", ""))
        if kind in ("stream", "channel"):
            if not isinstance(topic, str) or len(topic) > TOPIC_MAX_CHARS:
                return self._error(400, "BAD_REQUEST", "Invalid topic")
            stream_id = to if isinstance(to, int) else self.streams.get(str(to))
            if stream_id not in self.streams.values():
                return self._error(400, "STREAM_DOES_NOT_EXIST", f"Channel '{to}' does not exist")
            chat = f"stream:{stream_id}"
        elif kind in ("private", "direct") and isinstance(to, list) and all(isinstance(p, int) for p in to):
            people = sorted({BOT_ID, *to})
            others = [p for p in people if p != BOT_ID]
            chat = str(others[0]) if len(others) == 1 else "dm:" + ",".join(map(str, people))
        else:
            return self._error(400, "BAD_REQUEST", "Invalid message type or recipients")
        sent = self._post(chat, content, topic if isinstance(topic, str) else None)
        return self._ok(id=sent.id)

    def _post(self, chat: str, content: str, topic: str | None, *, record: bool = True) -> Sent:
        sent = Sent(chat, next(self._ids), content, topic)
        if record:
            self.sent.append(sent)
        message: dict[str, Any] = {"id": sent.id, "sender_id": BOT_ID, "sender_full_name": BOT_NAME,
                                   "sender_email": BOT_EMAIL, "content": content, "timestamp": int(time.time())}
        if chat.startswith("stream:"):
            stream_id = int(chat.removeprefix("stream:"))
            name = next(n for n, i in self.streams.items() if i == stream_id)
            message.update(type="stream", stream_id=stream_id, display_recipient=name, subject=topic or "")
        else:
            people = [int(p) for p in chat.removeprefix("dm:").split(",")] if chat.startswith("dm:") else [int(chat)]
            message.update(type="private", subject="", display_recipient=[
                {"id": p, "full_name": self.users.get(p, ""), "email": ""} for p in sorted({BOT_ID, *people})])
        self._deliver(message)
        return sent

    async def _edit(self, request: web.Request) -> web.Response:
        form = await request.post()
        target = next((s for s in self.sent if str(s.id) == request.match_info["id"]), None)
        if target is None:
            return self._error(400, "BAD_REQUEST", "Invalid message(s)")
        content = str(form.get("content", ""))
        if len(content.encode()) > CONTENT_MAX_BYTES:
            return self._error(400, "BAD_REQUEST", "Message too long")
        target.content, target.edits = content, target.edits + 1
        return self._ok()

    async def _typing(self, request: web.Request) -> web.Response:
        self.typings += 1
        return self._ok()
