"""A loopback Mattermost for tests: the REST API v4 routes a bot uses and the websocket, in one aiohttp app.

Written from Mattermost's API reference (api.mattermost.com) and its websocket
documentation; no Mattermost server is packaged to run here.  What it speaks:

- ``Authorization: Bearer <token>`` on every REST call, a wrong one answered 401
  with an ``AppError`` body (``{"id", "message", "status_code"}``).
- ``GET /api/v4/users/me``; ``POST /api/v4/posts`` (``channel_id``, ``message``,
  ``root_id``, ``file_ids``, ``props``) answering 201 with the post; ``PUT
  /api/v4/posts/{id}/patch``; ``POST /api/v4/files`` (multipart ``channel_id`` +
  ``files``) answering ``{"file_infos": [...]}``; ``GET /api/v4/files/{id}``;
  ``GET /api/v4/users/me/channels`` (with ``last_post_at``); ``GET
  /api/v4/channels/{id}/posts?since=`` (every post modified after ``since``,
  as ``{"order", "posts"}``).
- ``/api/v4/websocket``: the server says ``hello``, the client sends
  ``authentication_challenge`` with the token and is answered ``{"status": "OK",
  "seq_reply": n}`` (``FAIL`` for a wrong one); then ``posted`` events whose
  ``data.post`` is the post as a JSON string and ``data.mentions`` a JSON list
  of user ids, each event with the connection's next ``seq``.  ``user_typing``
  actions are recorded and answered.
- When the server's rate limiter is on, a refused call is 429 with
  ``Retry-After`` and ``X-Ratelimit-Limit/Remaining/Reset``.

Like Mattermost, nothing is replayed to a socket that was closed: a post made
then is only in the channel's history, for a catch-up to read.  Test knobs:
:meth:`fail_next_send`, ``reset_only`` (a 429 names its wait only in
``X-Ratelimit-Reset``), ``send_latency``, :meth:`drop` (close every socket),
``down`` (every call 503 and handshakes refused), ``refuse_challenge``,
:meth:`redeliver` (push a post's event again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_ID, BOT_NAME = "bot" + "x" * 23, "tutorbot"


def _id() -> str:
    return uuid.uuid4().hex[:26]


@dataclass
class Post:
    id: str
    channel_id: str
    user_id: str
    message: str
    create_at: int
    root_id: str = ""
    file_ids: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    update_at: int = 0
    edits: int = 0
    type: str = ""
    """A system message's kind (``system_join_channel``); empty for what a person wrote."""
    via_api: bool = False
    """Made by ``POST /posts`` (the gateway's sends), not by a test playing the bot's account."""
    at: float = field(default_factory=time.time)
    """Wall clock when the server took it (bench/channels.py)."""
    made: float = field(default_factory=time.monotonic)

    def json(self, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
        infos = [files[f] for f in self.file_ids if f in files]
        return {"id": self.id, "create_at": self.create_at, "update_at": self.update_at or self.create_at,
                "delete_at": 0, "edit_at": self.update_at if self.edits else 0, "user_id": self.user_id,
                "channel_id": self.channel_id, "root_id": self.root_id, "message": self.message, "type": self.type,
                "props": self.props, "file_ids": self.file_ids, "metadata": {"files": infos} if infos else {}}


@dataclass
class Room:
    id: str
    type: str
    display_name: str
    posts: list[Post] = field(default_factory=list)


class MattermostServer:
    def __init__(self, *, token: str | None = None) -> None:
        self.token = token or uuid.uuid4().hex[:26]
        self.bot_id, self.bot_name = BOT_ID, BOT_NAME
        self.app = web.Application()
        self.rooms: dict[str, Room] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.file_bytes: dict[str, bytes] = {}
        self.typing: list[dict[str, Any]] = []
        self.down = False
        self.authenticated = 0
        self.send_requests = 0
        self.rate_limited_sends = 0
        self.patches = 0
        self.unheard = 0
        self.patched_at: list[float] = []
        """Monotonic times of each patch of a post's message (the edit pace)."""
        self.refuse_challenge = False
        """Answer every authentication_challenge FAIL, even with the right token (a token revoked after login)."""
        self.send_latency = 0.0
        """Seconds ``POST /posts`` takes to answer after the post is made (a slow server)."""
        self.reset_only = False
        """A 429 names its wait only in X-Ratelimit-Reset, with no Retry-After."""
        """Posts made while no authenticated socket was open: only a catch-up can find them."""
        self._faults: list[tuple[int, float]] = []
        self._sockets: dict[web.WebSocketResponse, itertools.count[int]] = {}
        self._clock = 0
        self._runner: web.AppRunner | None = None
        self.url = ""
        r = self.app.router
        r.add_get("/api/v4/websocket", self._websocket)
        r.add_get("/api/v4/users/me", self._me)
        r.add_get("/api/v4/users/me/channels", self._channels)
        r.add_post("/api/v4/posts", self._create)
        r.add_put("/api/v4/posts/{id}/patch", self._patch)
        r.add_post("/api/v4/files", self._upload)
        r.add_get("/api/v4/files/{id}", self._file)
        r.add_get("/api/v4/channels/{id}/posts", self._history)

    async def __aenter__(self) -> MattermostServer:
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

    def _now(self) -> int:
        """Milliseconds, strictly increasing, as create_at is."""
        self._clock = max(self._clock + 1, int(time.time() * 1000))
        return self._clock

    # ------------------------------------------------------------------ the websocket

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            return web.Response(status=503, text="down")
        given = request.headers.get("Authorization")
        if given is not None and given != f"Bearer {self.token}":
            return self._error(401, "api.context.session_expired.app_error", "Invalid or expired session")
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        seq = itertools.count(0)
        await socket.send_json({"event": "hello", "data": {"connection_id": _id(), "server_version": "10.0.0"},
                                "broadcast": {"user_id": self.bot_id}, "seq": next(seq)})
        async for message in socket:
            if message.type is not WSMsgType.TEXT:
                continue
            try:
                body = json.loads(message.data)
            except ValueError:
                continue
            action, data = body.get("action"), body.get("data") or {}
            if action == "authentication_challenge":
                if data.get("token") != self.token or self.refuse_challenge:
                    await socket.send_json({"status": "FAIL", "seq_reply": body.get("seq"),
                                            "error": {"id": "api.web_socket_router.not_authenticated.app_error",
                                                      "message": "websocket: not authenticated"}})
                    await socket.close()
                    break
                self._sockets[socket] = seq
                self.authenticated += 1
                await socket.send_json({"status": "OK", "seq_reply": body.get("seq")})
            elif socket in self._sockets and action == "user_typing":
                self.typing.append(data)
                await socket.send_json({"status": "OK", "seq_reply": body.get("seq")})
        self._sockets.pop(socket, None)
        return socket

    async def connected(self, times: int = 1) -> None:
        for _ in range(1200):
            if self.authenticated >= times and self._sockets:
                return
            await asyncio.sleep(0.025)
        raise TimeoutError("no bot authenticated on the websocket")

    async def drop(self) -> None:
        for socket in list(self._sockets):
            with contextlib.suppress(Exception):
                await socket.close()
        self._sockets.clear()

    async def _broadcast(self, post: Post, room: Room, *, mentions: list[str]) -> None:
        data = {"channel_display_name": room.display_name, "channel_name": room.id, "channel_type": room.type,
                "sender_name": "@" + post.user_id, "team_id": "" if room.type in "DG" else "team1",
                "post": json.dumps(post.json(self.files))}
        if mentions:
            data["mentions"] = json.dumps(mentions)
        for socket, seq in list(self._sockets.items()):
            with contextlib.suppress(Exception):
                await socket.send_json({"event": "posted", "data": data,
                                        "broadcast": {"channel_id": room.id}, "seq": next(seq)})

    # ------------------------------------------------------------------ what users say

    def room(self, channel: str, kind: str = "D") -> Room:
        return self.rooms.setdefault(channel, Room(channel, kind, f"room {channel}"))

    async def say(self, text: str, *, channel: str, user: str, kind: str = "D", mention: bool = False,
                  root_id: str = "", push: bool = True, file_ids: tuple[str, ...] = (), type: str = "") -> Post:
        """A person posts: stored in the channel's history and pushed to every authenticated socket."""
        room = self.room(channel, kind)
        message = f"@{self.bot_name} {text}" if mention else text
        post = Post(_id(), channel, user, message, self._now(), root_id=root_id, file_ids=list(file_ids), type=type)
        room.posts.append(post)
        self.unheard += not (push and self._sockets)
        if push:
            await self._broadcast(post, room, mentions=[self.bot_id] if mention else [])
        return post

    async def redeliver(self, post: Post) -> None:
        await self._broadcast(post, self.rooms[post.channel_id], mentions=[])

    def shown(self, channel: str) -> list[Post]:
        """The gateway's posts in a channel, as people see them now (edits applied)."""
        room = self.rooms.get(channel)
        return [p for p in room.posts if p.via_api] if room else []

    def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self._faults.append((status, retry_after))

    # ------------------------------------------------------------------ REST

    @staticmethod
    def _error(status: int, error_id: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"id": error_id, "message": message, "status_code": status, "request_id": _id()},
                                 status=status, headers=headers)

    def _refused(self, request: web.Request) -> web.Response | None:
        if self.down:
            return self._error(503, "api.server.unavailable", "down")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        return None

    async def _me(self, request: web.Request) -> web.Response:
        return self._refused(request) or web.json_response({"id": self.bot_id, "username": self.bot_name, "is_bot": True})

    async def _channels(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        return web.json_response([{"id": r.id, "type": r.type, "display_name": r.display_name, "name": r.id,
                                   "last_post_at": max([p.create_at for p in r.posts] or [0])}
                                  for r in self.rooms.values()])

    async def _history(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        room = self.rooms.get(request.match_info["id"])
        if room is None:
            return self._error(404, "app.channel.get.existing.app_error", "channel not found")
        since = int(request.query.get("since", "0"))
        posts = [p for p in room.posts if max(p.create_at, p.update_at) > since][:1000]
        return web.json_response({"order": [p.id for p in reversed(posts)],
                                  "posts": {p.id: p.json(self.files) for p in posts}})

    def _fault(self) -> web.Response | None:
        if not self._faults:
            return None
        status, retry_after = self._faults.pop(0)
        headers = {}
        if status == 429:
            self.rate_limited_sends += 1
            headers = {"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "0",
                       "X-Ratelimit-Reset": f"{max(1, round(retry_after))}"}
            if not self.reset_only:
                headers["Retry-After"] = f"{retry_after:g}"
        return self._error(status, "fault", f"fault {status}", headers)

    async def _create(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        self.send_requests += 1
        fault = self._fault()
        if fault:
            return fault
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "api.context.invalid_body_param.app_error", "invalid post")
        channel, message = body.get("channel_id"), body.get("message") or ""
        files = [f for f in body.get("file_ids") or [] if f in self.files]
        if channel not in self.rooms:
            return self._error(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        if not (message or files or (body.get("props") or {}).get("attachments")):
            return self._error(400, "api.post.create_post.message.app_error", "message is required")
        if len(message) > 16383:
            return self._error(400, "model.post.is_valid.message_length.app_error", "message too long")
        post = Post(_id(), channel, self.bot_id, message, self._now(), root_id=str(body.get("root_id") or ""),
                    file_ids=files, props=dict(body.get("props") or {}), via_api=True)
        room = self.rooms[channel]
        room.posts.append(post)
        await self._broadcast(post, room, mentions=[])
        if self.send_latency:
            await asyncio.sleep(self.send_latency)
        return web.json_response(post.json(self.files), status=201)

    async def _patch(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        found = [p for r in self.rooms.values() for p in r.posts if p.id == request.match_info["id"]]
        if not found:
            return self._error(404, "app.post.get.app_error", "post not found")
        body = await request.json()
        post = found[0]
        if post.user_id != self.bot_id:
            return self._error(403, "api.context.permissions.app_error", "not your post")
        if "message" in body:
            post.message, post.update_at, post.edits = str(body["message"]), self._now(), post.edits + 1
            self.patches += 1
            self.patched_at.append(time.monotonic())
        return web.json_response(post.json(self.files))

    async def _upload(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        form = await request.post()
        upload = form.get("files")
        if not isinstance(upload, web.FileField) or form.get("channel_id") not in self.rooms:
            return self._error(400, "api.file.upload_file.bad_request", "channel_id and files are required")
        data = upload.file.read()
        info = {"id": _id(), "name": upload.filename, "mime_type": upload.content_type, "size": len(data)}
        self.files[info["id"]], self.file_bytes[info["id"]] = info, data
        return web.json_response({"file_infos": [info], "client_ids": []}, status=201)

    def add_file(self, name: str, data: bytes, mime_type: str) -> dict[str, Any]:
        info = {"id": _id(), "name": name, "mime_type": mime_type, "size": len(data)}
        self.files[info["id"]], self.file_bytes[info["id"]] = info, data
        return info

    async def _file(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused:
            return refused
        file = request.match_info["id"]
        if file not in self.file_bytes:
            return self._error(404, "app.file_info.get.app_error", "file not found")
        return web.Response(body=self.file_bytes[file], content_type=self.files[file]["mime_type"])
