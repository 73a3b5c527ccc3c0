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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

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

    def __init__(self, bot_id: str = "aib-test", secret: str = "s3cret") -> None:
        self.bot_id, self.secret = bot_id, secret
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
        self._server = await serve(self._serve, "127.0.0.1", 0)
        return self

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
            elif cmd == "aibot_respond_msg":
                code = self._respond(req_id, body)
                await self._ack(socket, req_id, code, "stream message update expired" if code else "ok")
            elif cmd == "aibot_send_msg":
                self._pushed(body)
                await self._ack(socket, req_id)

    def _respond(self, req_id: str, body: dict[str, Any]) -> int:
        if body.get("msgtype") != "stream":
            self._pushed({**body, "chatid": self._chat_of.get(req_id, "")})
            return 0
        if self.expired:
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
