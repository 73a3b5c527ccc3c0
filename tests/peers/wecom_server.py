"""A loopback emulator of WeCom's AI-bot long connection, written from WeCom's documentation.

What it speaks (developer.work.weixin.qq.com, 智能机器人 → 长连接): JSON text
frames on one websocket.  The bot's first frame is ``aibot_subscribe`` with
``body {bot_id, secret}``; the answer is ``{"headers": {"req_id"}, "errcode": 0,
"errmsg": "ok"}`` (a wrong secret: a non-zero errcode, then the socket closes).
``ping`` is answered the same way.  A message said to the bot arrives as
``aibot_msg_callback`` with a fresh ``req_id`` and a body carrying ``msgid``,
``aibotid``, ``chattype`` (``single``/``group``), ``chatid`` (groups), ``from.userid``,
``msgtype`` and ``text.content`` (in a group, the AI bot only hears its
@-messages, which start ``@<bot name>``).  The bot answers with
``aibot_respond_msg`` under the callback's ``req_id`` -- for text a ``stream``
``{id, content, finish}`` whose content replaces what the stream showed -- and
each answer is acked under that ``req_id``; ``aibot_send_msg`` pushes markdown to
a chat unasked.

Faults a test asks for: :meth:`WecomServer.drop` closes the bot's socket;
:meth:`WecomServer.redeliver` sends a callback again under a new ``req_id``;
:attr:`WecomServer.hold` keeps what learners say while no bot is connected and, at the next
subscribe, sends every callback not answered yet again (the at-least-once model a crash test
needs; WeCom does not document how long it keeps them); :attr:`WecomServer.expired` makes every stream update answered with errcode
846608 ("stream message update expired"); :attr:`WecomServer.mute_pings` leaves
pings unanswered.

WeCom's own rules it keeps:

- **The stream's time limit.**  With ``stream_limit_s`` set (WeCom's is 6 min, from the
  learner's message), an update to a stream answering a callback pushed longer ago than
  that is refused with 846608 and counted in :attr:`WecomServer.late_updates`.
- **Files.**  :meth:`WecomServer.say_file` sends an image, a file or a mixed message whose
  bytes this emulator serves on the same loopback port (a plain HTTP GET), encrypted under a
  key of the message's own (``aeskey``), as WeCom's CDN hands them out.
- **Faults.**  :meth:`WecomServer.fail_next` answers the next reply or push with an errcode
  (45009 over the limit, -1 system busy, ...) in the ack, as WeCom does -- the long connection
  has no HTTP status; :attr:`WecomServer.ack_delay_s` acks every reply that much later
  (after recording it); :attr:`WecomServer.down` refuses every connection (503 to the
  websocket handshake) and drops the one open, keeping what learners say meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from channels._kit.msgcrypt import encrypt_file
from tests.waits import HANG_S

STREAM_EXPIRED = 846608
BAD_SECRET = 40001
BOT_NAME = "tutor"


@dataclass
class StreamSeen:
    """One message as the learner's WeCom shows it: a stream (its text now, every update, whether it
    finished) or a pushed markdown message (``aibot_send_msg``: finished, one update, no ``req_id``)."""

    id: str
    chat: str
    req_id: str
    content: str = ""
    updates: list[str] = field(default_factory=list)
    finished: int = 0
    after_finish: int = 0
    finished_at: float = 0.0
    """When it first showed finished, by this emulator's wall clock (what bench/channels.py times)."""


@dataclass
class Said:
    msgid: str
    req_id: str
    chat: str
    frame: dict[str, Any]


class WecomServer:
    """One AI bot (``bot_id``/``secret``) and the learners who talk to it; ``async with`` serves it on loopback."""

    def __init__(self, bot_id: str = "aib-test", secret: str = "s3cret", *, stream_limit_s: float | None = None) -> None:
        self.bot_id, self.secret = bot_id, secret
        self.stream_limit_s = stream_limit_s
        self.late_updates = 0
        """Stream updates refused because the limit had passed (the channel should never cause one)."""
        self._pushed_at: dict[str, float] = {}
        self.files: dict[str, bytes] = {}
        """Path -> the encrypted bytes served there."""
        self.downloads = 0
        self._faults: list[tuple[int, str]] = []
        self.refused: list[int] = []
        """The errcodes injected replies and pushes were answered with, in order."""
        self.send_requests = 0
        """Every ``aibot_respond_msg`` and ``aibot_send_msg`` received, whatever it was answered."""
        self.ack_delay_s = 0.0
        self.down = False
        self.expired = False
        self.mute_pings = False
        self.hold = False
        self._unanswered: dict[str, tuple[dict[str, Any], str]] = {}
        """msgid -> (body, chat) of every callback sent whose chat shows no finished answer to it yet."""
        self._msgid_of: dict[str, str] = {}
        """Take pings without answering them, as a connection that died half-way does."""
        self.subscribes = 0
        self.pings = 0
        self.streams: dict[str, StreamSeen] = {}
        self.timeline: list[StreamSeen] = []
        """Every message shown, streams and pushes, in the order they first appeared."""
        self.pushed: list[dict[str, Any]] = []
        """``aibot_send_msg`` bodies, in order."""
        self._socket: ServerConnection | None = None
        self._connected = asyncio.Event()
        self._server: Server | None = None
        self._ids = itertools.count(1)
        self._chat_of: dict[str, str] = {}

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/"

    async def __aenter__(self) -> WecomServer:
        self._server = await serve(self._serve, "127.0.0.1", 0, process_request=self._http)
        return self

    @property
    def http_base(self) -> str:
        return "http" + self.url[2:].rstrip("/")

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        """A plain GET for a file is served here; a websocket handshake while :attr:`down` is refused."""
        if request.path.startswith("/files/"):
            data = self.files.get(request.path)
            if data is None:
                return connection.respond(HTTPStatus.NOT_FOUND, "no such file\n")
            self.downloads += 1
            return Response(200, "OK", Headers([("Content-Type", "application/octet-stream"),
                                                ("Content-Length", str(len(data)))]), data)
        if self.down:
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "down\n")
        return None

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def connected(self) -> None:
        """Wait until a bot is subscribed (bounded by HANG_S)."""
        await asyncio.wait_for(self._connected.wait(), HANG_S)

    async def _serve(self, socket: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):  # a bot killed mid-frame closes without a close frame
            await self._read(socket)
        if self._socket is socket:
            self._socket = None
            self._connected.clear()

    async def _read(self, socket: ServerConnection) -> None:
        async for raw in socket:
            frame = json.loads(raw)
            req_id = str((frame.get("headers") or {}).get("req_id", ""))
            cmd, body = frame.get("cmd"), frame.get("body") or {}
            if cmd == "aibot_subscribe":
                self.subscribes += 1
                if self.down:
                    await socket.close()
                    return
                if body.get("bot_id") != self.bot_id or body.get("secret") != self.secret:
                    await self._ack(socket, req_id, BAD_SECRET, "invalid secret")
                    await socket.close()
                    return
                self._socket = socket
                self._connected.set()
                await self._ack(socket, req_id)
                if self.hold:
                    for body, chat in list(self._unanswered.values()):
                        await self._push(body, chat)
            elif cmd == "ping":
                self.pings += 1
                if not self.mute_pings:
                    await self._ack(socket, req_id)
            elif cmd in ("aibot_respond_msg", "aibot_send_msg"):
                self.send_requests += 1
                if self._faults:
                    code, said = self._faults.pop(0)
                    self.refused.append(code)
                    await self._ack(socket, req_id, code, said)
                    continue
                if cmd == "aibot_respond_msg":
                    code = self._respond(req_id, body)
                else:
                    code = 0
                    self._pushed(body)
                if self.ack_delay_s:
                    asyncio.get_running_loop().create_task(self._ack_later(socket, req_id, code))
                else:
                    await self._ack(socket, req_id, code, "stream message update expired" if code else "ok")

    def _respond(self, req_id: str, body: dict[str, Any]) -> int:
        if body.get("msgtype") != "stream":
            self._pushed({**body, "chatid": self._chat_of.get(req_id, "")})
            return 0
        if self.expired:
            return STREAM_EXPIRED
        pushed_at = self._pushed_at.get(req_id)
        if self.stream_limit_s is not None and pushed_at is not None and time.monotonic() - pushed_at > self.stream_limit_s:
            self.late_updates += 1
            return STREAM_EXPIRED
        stream, sid = body["stream"], str(body["stream"]["id"])
        seen = self.streams.get(sid)
        if seen is None:
            seen = self.streams[sid] = StreamSeen(sid, self._chat_of.get(req_id, ""), req_id)
            self.timeline.append(seen)
        if seen.finished:
            seen.after_finish += 1
        seen.content = str(stream.get("content", ""))
        seen.updates.append(seen.content)
        seen.finished += 1 if stream.get("finish") else 0
        seen.finished_at = seen.finished_at or (time.time() if seen.finished else 0.0)
        if seen.finished:
            self._unanswered.pop(self._msgid_of.get(req_id, ""), None)
        return 0

    def _pushed(self, body: dict[str, Any]) -> None:
        self.pushed.append(body)
        content = str((body.get(str(body.get("msgtype"))) or {}).get("content", ""))
        self.timeline.append(StreamSeen(f"push{len(self.pushed)}", str(body.get("chatid", "")), "", content,
                                        [content], finished=1, finished_at=time.time()))

    def fail_next(self, errcode: int, errmsg: str) -> None:
        """Answer the next reply or push with ``errcode`` (it is not recorded: WeCom refused it)."""
        self._faults.append((errcode, errmsg))

    async def _ack_later(self, socket: ServerConnection, req_id: str, code: int) -> None:
        await asyncio.sleep(self.ack_delay_s)
        with contextlib.suppress(ConnectionClosed):
            await self._ack(socket, req_id, code, "stream message update expired" if code else "ok")

    async def outage(self, down: bool) -> None:
        """WeCom goes away (every connection refused, the open one dropped) or comes back; what learners say
        meanwhile is kept and sent at the next subscribe."""
        self.down = down
        if down:
            self.hold = True
            await self.drop()

    def serve_file(self, data: bytes) -> tuple[str, str]:
        """Keep ``data`` encrypted under a fresh key, as WeCom's CDN does: its URL and its ``aeskey``."""
        key = base64.b64encode(os.urandom(32)).decode().rstrip("=")  # WeCom leaves the padding off at times
        path = f"/files/{next(self._ids)}"
        self.files[path] = encrypt_file(key, data)
        return self.http_base + path, key

    async def say_file(self, kind: str, data: bytes, *, user: str = "learner1", group: str | None = None,
                       text: str = "", name: str = "") -> Said:
        """A learner sends an image or a file (``kind``), or a mixed message (``mixed``: ``text`` then an image)."""
        url, key = self.serve_file(data)
        body: dict[str, Any] = {"msgid": f"msg{next(self._ids)}", "aibotid": self.bot_id,
                                "chattype": "group" if group else "single", "from": {"userid": user}, "msgtype": kind}
        media = {"url": url, "aeskey": key, **({"filename": name} if name else {})}
        if kind == "mixed":
            lead = f"@{BOT_NAME} {text}" if group else text
            body["mixed"] = {"msg_item": [{"msgtype": "text", "text": {"content": lead}},
                                          {"msgtype": "image", "image": media}]}
        else:
            body[kind] = media
        if group:
            body["chatid"] = group
        return await self._push(body, group or user)

    @staticmethod
    async def _ack(socket: ServerConnection, req_id: str, errcode: int = 0, errmsg: str = "ok") -> None:
        await socket.send(json.dumps({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg}))

    async def say(self, text: str, *, user: str = "learner1", group: str | None = None) -> Said:
        """A learner says ``text`` to the bot: in a DM, or in ``group`` as an @-message."""
        if not self.hold:
            await self.connected()
        msgid = f"msg{next(self._ids)}"
        body: dict[str, Any] = {"msgid": msgid, "aibotid": self.bot_id, "chattype": "group" if group else "single",
                                "from": {"userid": user}, "msgtype": "text",
                                "text": {"content": f"@{BOT_NAME} {text}" if group else text}}
        if group:
            body["chatid"] = group
        return await self._push(body, group or user)

    async def redeliver(self, said: Said) -> Said:
        """WeCom sends the same message again (same ``msgid``), as it does when it saw no answer."""
        return await self._push(said.frame["body"], said.chat)

    async def _push(self, body: dict[str, Any], chat: str) -> Said:
        req_id = f"req{next(self._ids)}"
        self._chat_of[req_id], self._msgid_of[req_id] = chat, str(body["msgid"])
        self._pushed_at[req_id] = time.monotonic()
        frame = {"cmd": "aibot_msg_callback", "headers": {"req_id": req_id}, "body": body}
        said = Said(str(body["msgid"]), req_id, chat, frame)
        if self.hold:
            self._unanswered[said.msgid] = (body, chat)
            socket = self._socket
            if socket is not None:
                with contextlib.suppress(ConnectionClosed):  # a killed bot: sent again at the next subscribe
                    await socket.send(json.dumps(frame, ensure_ascii=False))
            return said
        await self.connected()
        assert self._socket is not None
        await self._socket.send(json.dumps(frame, ensure_ascii=False))
        return said

    async def drop(self) -> None:
        """Close the bot's socket, as a network fault or a WeCom restart does."""
        socket, self._socket = self._socket, None
        self._connected.clear()
        if socket is not None:
            await socket.close()

    def shown(self, chat: str) -> list[StreamSeen]:
        """Every message shown in ``chat``, finished or still streaming, in the order they appeared."""
        return [s for s in self.timeline if s.chat == chat]

    def answers(self, chat: str) -> list[StreamSeen]:
        """The finished streams shown in ``chat``, in the order they were opened (pushes not included)."""
        return [s for s in self.streams.values() if s.chat == chat and s.finished]
