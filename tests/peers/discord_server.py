"""A loopback emulator of Discord's Gateway (WebSocket) and REST API, written from Discord's documentation.

What it speaks, as docs.discord.com describes it:

Gateway (``/gateway``, JSON text frames): op 10 HELLO with ``heartbeat_interval``;
op 1 HEARTBEAT answered by op 11; op 2 IDENTIFY -> ``READY`` (guilds unavailable,
``session_id``, ``resume_gateway_url``, ``application.flags``) then a full
``GUILD_CREATE``; op 6 RESUME with ``session_id`` + ``seq`` replays every dispatch
the session missed, then ``RESUMED``; an unknown session gets op 9 INVALID_SESSION
(``d: false``); op 7 RECONNECT on request.  Dispatches carry a sequence number per
session, and a session outlives its socket, so events said while the bot is
disconnected are replayed on resume.  A bad token closes with 4004; asking for the
privileged MESSAGE_CONTENT intent (1 << 15) the application has not enabled closes
with 4014.  Without that intent, guild messages arrive with empty ``content``,
``embeds`` and ``attachments`` unless they mention the bot or reply to it (DMs
always carry content).

REST (``/api/v10``): ``users/@me``, ``oauth2/applications/@me`` (with ``flags``),
``channels/{id}/messages`` POST (JSON or multipart ``payload_json`` + ``files[n]``,
``nonce`` + ``enforce_nonce`` deduplicated per author), GET (``around``/``before``/``after``,
``limit`` 1-100 default 50, newest first) and PATCH, ``typing``, threads
from a message (the thread takes the message's id, THREAD_CREATE is dispatched, a second
start is 400 with code 160004), DM channel creation, interaction callbacks (type 5 defers: a
placeholder the first follow-up fills) and follow-up webhooks (which exist from the
initial response on; an expired or invalidated token: 404 with code 10062 on the
callback, 10015 on the webhook), command registration.  ``/attachments/{id}/{name}`` plays the CDN: it serves what users
attached and what the bot uploaded (404 for anything else).  Every answer carries ``X-RateLimit-Limit/Remaining/Reset-After/Bucket``
from a per-route, per-channel bucket; an exhausted bucket answers 429 with
``{retry_after, global}``, ``Retry-After``, ``X-RateLimit-Scope`` and ``Via`` (as
Discord's edge does).  Every JSON answer is ``Content-Type: application/json``
exactly.

Interactions Endpoint URL (the HTTP side): the application holds an Ed25519 key
pair (:attr:`DiscordPeer.public_key` is the hex the Developer Portal shows, also
``verify_key`` in ``oauth2/applications/@me``).  :meth:`DiscordPeer.ping` and
:meth:`DiscordPeer.post_interaction` POST to the bot's endpoint as Discord does:
``X-Signature-Ed25519`` (hex) over ``X-Signature-Timestamp`` + the raw body,
``forged`` signing with another key (Discord sends such to test an endpoint) and
``timestamp`` for a stale one.  The endpoint's answer is the interaction's
initial response: type 5 leaves the "thinking" placeholder the first follow-up
fills, just as the callback route does.  Discord does not retry a delivery.

The control API is this class's Python methods (the peer runs in the test's own
event loop): users say things and run slash commands, the socket can be dropped,
a reconnect or an invalid session requested, the next requests failed with a
status, and every request and bot message read back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import ClientSession, WSMsgType, web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

DISCORD_EPOCH_MS = 1420070400000
INTENT_GUILDS, INTENT_GUILD_MESSAGES, INTENT_DIRECT_MESSAGES, INTENT_MESSAGE_CONTENT = 1, 1 << 9, 1 << 12, 1 << 15
FLAG_MESSAGE_CONTENT, FLAG_MESSAGE_CONTENT_LIMITED = 1 << 18, 1 << 19
TEXT, DM, PUBLIC_THREAD = 0, 1, 11
ATTACHMENT_LIMIT = 10 * 1024 * 1024
LOADING = 1 << 7
HAS_THREAD = 1 << 5
"""Message flag of a deferred interaction's "is thinking..." placeholder."""

_ids = itertools.count(1)


def snowflake() -> str:
    """A time-ordered id, as Discord makes them: milliseconds since 2015 in the high bits."""
    return str(((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(_ids) % 4096))


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user_object(user_id: str, name: str, *, bot: bool = False) -> dict:
    return {"id": user_id, "username": name, "discriminator": "0", "global_name": name, "avatar": None, "bot": bot}


@dataclass
class Session:
    id: str
    intents: int
    seq: int = 0
    buffer: list[dict] = field(default_factory=list)
    socket: web.WebSocketResponse | None = None


@dataclass
class Fault:
    status: int
    retry_after: float = 1.0
    is_global: bool = False
    route: str = ""
    """Only a request whose route ends so takes this fault (``threads``); empty: the next POST or PATCH."""


class DiscordPeer:
    """One application with its bot user, one guild with a text channel, and whoever talks to it."""

    def __init__(self, *, token: str = "peer-token", message_content: bool = True, heartbeat_ms: int = 41250,
                 bucket: tuple[int, float] = (5, 5.0)) -> None:
        self.token = token
        self.app_id = snowflake()
        self.bot = user_object(self.app_id, "Tutor", bot=True)
        self.flags = FLAG_MESSAGE_CONTENT if message_content else 0
        self.heartbeat_ms = heartbeat_ms
        self.bucket_limit, self.bucket_window = bucket
        self.guild_id = snowflake()
        self.channel_id = snowflake()
        self.channels: dict[str, dict] = {self.channel_id: {"id": self.channel_id, "type": TEXT, "guild_id": self.guild_id,
                                                             "name": "class", "position": 0, "permission_overwrites": []}}
        self.messages: dict[str, list[dict]] = defaultdict(list)
        self.sessions: dict[str, Session] = {}
        self.faults: deque[Fault] = deque()
        self.down = False
        self.send_latency = 0.0
        self.callback_latency = 0.0
        """How long an interaction callback takes before Discord has taken it (a slow initial response)."""
        self.requests: list[dict] = []
        """Every REST request: method, route, channel, status, and (for 429) retry_after."""
        self.identifies = self.resumes = 0
        self.commands: list[dict] = []
        self.deferred: dict[str, dict] = {}
        """interaction token -> the placeholder message its first follow-up fills."""
        self.interactions: dict[str, dict] = {}
        self.threads_started: list[str] = []
        """The message ids threads were started from (Start Thread from Message), in order."""
        self._buckets: dict[str, tuple[float, int]] = {}
        self._nonces: dict[tuple[str, str], dict] = {}
        self.files: dict[str, tuple[bytes, str]] = {}
        """CDN path (``{id}/{name}``) -> the bytes and content type it serves."""
        self.downloads: list[str] = []
        """Every CDN path asked for, served or not."""
        self.signing_key = Ed25519PrivateKey.generate()
        """The application's key pair: Discord signs what it POSTs to the interactions endpoint with it."""
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self, port: int = 0) -> DiscordPeer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{path:.*}", self._cdn)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{bound}"
        return self

    @property
    def api_base(self) -> str:
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/gateway"

    async def stop(self) -> None:
        for session in self.sessions.values():
            if session.socket is not None:
                await session.socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ control: users

    def dm_channel(self, user_id: str) -> str:
        for channel in self.channels.values():
            if channel["type"] == DM and channel["recipients"][0]["id"] == user_id:
                return channel["id"]
        cid = snowflake()
        self.channels[cid] = {"id": cid, "type": DM, "recipients": [user_object(user_id, f"user{user_id[-4:]}")],
                              "last_message_id": None}
        return cid

    async def open_thread(self, name: str = "Homework", *, parent: str | None = None, tid: str | None = None,
                          announce: bool = True) -> str:
        """A public thread (``tid``: started from that message); THREAD_CREATE tells the bot unless not ``announce``."""
        tid = tid or snowflake()
        self.channels[tid] = {"id": tid, "type": PUBLIC_THREAD, "guild_id": self.guild_id, "parent_id": parent or self.channel_id,
                              "name": name, "owner_id": self.app_id, "message_count": 0, "member_count": 1,
                              "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                                  "archive_timestamp": now_iso(), "locked": False}}
        if announce:
            await self.dispatch("THREAD_CREATE", {**self.channels[tid], "newly_created": True})
        return tid

    async def new_channel(self, name: str = "class") -> str:
        """Another text channel in the guild (CHANNEL_CREATE), so tests do not share one."""
        cid = snowflake()
        self.channels[cid] = {"id": cid, "type": TEXT, "guild_id": self.guild_id, "name": name, "position": len(self.channels),
                              "permission_overwrites": []}
        await self.dispatch("CHANNEL_CREATE", self.channels[cid])
        return cid

    def attachment(self, filename: str, data: bytes, content_type: str = "", *, size: int | None = None,
                   served: bool = True) -> dict:
        """An attachment object as Discord shows it, its bytes on the CDN (unless not ``served``: a 404);
        ``size`` says what the message claims, which may differ from what the CDN serves."""
        aid = snowflake()
        if served:
            self.files[f"{aid}/{filename}"] = (data, content_type)
        return {"id": aid, "filename": filename, "size": len(data) if size is None else size,
                "url": f"{self.url}/attachments/{aid}/{filename}?ex=0&is=0&hm=peer", "proxy_url": "",
                "content_type": content_type}

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.downloads.append(path)
        if path not in self.files:
            return web.Response(status=404, text="Not Found")
        data, kind = self.files[path]
        return web.Response(body=data, headers={"Content-Type": kind or "application/octet-stream"})

    async def say_as_bot(self, text: str, *, channel: str) -> dict:
        """A message by the bot's own account (another program on the same token, or the bot's echo)."""
        status, message = self._post(channel, {"content": text}, [])
        assert status == 200, message
        return message

    async def say(self, text: str, *, user: str | None = None, channel: str | None = None, mention: bool = False,
                  reply_to: dict | None = None, attachments: tuple[dict, ...] = ()) -> dict:
        """A user writes ``text``: in a DM with the bot unless ``channel`` names a guild channel or thread."""
        user = user or snowflake()
        cid = channel or self.dm_channel(user)
        content = f"<@{self.app_id}> {text}" if mention else text
        message = self._message(cid, user_object(user, f"user{user[-4:]}"), content, reply_to=reply_to,
                                attachments=attachments, mentions=[self.bot] if mention else [])
        self.messages[cid].append(message)
        await self.dispatch("MESSAGE_CREATE", message)
        return message

    async def redeliver(self, message: dict) -> None:
        await self.dispatch("MESSAGE_CREATE", message)

    async def command(self, name: str, options: dict[str, str] | None = None, *, user: str | None = None,
                      channel: str | None = None) -> dict:
        """A user runs the slash command ``/name`` in a DM (or ``channel``); dispatched as INTERACTION_CREATE."""
        interaction = self.interaction(name, options, user=user, channel=channel)
        await self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def interaction(self, name: str, options: dict[str, str] | None = None, *, user: str | None = None,
                    channel: str | None = None, kind: int = 2) -> dict:
        """The interaction object of ``/name`` run in a DM (or ``channel``), its token known to the webhooks."""
        user = user or snowflake()
        cid = channel or self.dm_channel(user)
        where = self.channels[cid]
        interaction = {
            "id": snowflake(), "application_id": self.app_id, "type": kind, "token": f"itok-{snowflake()}", "version": 1,
            "channel_id": cid, "channel": {k: v for k, v in where.items() if k != "recipients"},
            "data": {"id": snowflake(), "name": name, "type": 1,
                     "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]},
            "app_permissions": "0", "locale": "en-US", "attachment_size_limit": ATTACHMENT_LIMIT, "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 1 if where["type"] == DM else 0,
        }
        person = user_object(user, f"user{user[-4:]}")
        if "guild_id" in where:
            interaction.update(guild_id=self.guild_id, member=self._member(person))
        else:
            interaction["user"] = person
        self.interactions[interaction["token"]] = interaction
        return interaction

    # ------------------------------------------------------------------ control: the interactions endpoint

    @property
    def public_key(self) -> str:
        """The application's Public Key, hex, as the Developer Portal shows it (the account's ``public_key``)."""
        return self.signing_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def signed(self, body: bytes, *, timestamp: int | None = None, forged: bool = False) -> dict[str, str]:
        """Discord's headers: Ed25519 over timestamp + body; ``forged`` signs with a key not the application's."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        key = Ed25519PrivateKey.generate() if forged else self.signing_key
        return {"Content-Type": "application/json", "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
                "X-Signature-Ed25519": key.sign(stamp.encode() + body).hex(), "X-Signature-Timestamp": stamp}

    async def ping(self, url: str, *, forged: bool = False) -> tuple[int, Any]:
        """What saving the Interactions Endpoint URL does: a signed PING (type 1), or a forged one."""
        ping = {"id": snowflake(), "application_id": self.app_id, "type": 1, "token": f"itok-{snowflake()}", "version": 1}
        return await self.post_signed(url, json.dumps(ping).encode(), forged=forged)

    async def post_interaction(self, url: str, interaction: dict, *, timestamp: int | None = None,
                               forged: bool = False, lost: bool = False) -> tuple[int, Any]:
        """POST ``interaction`` to the endpoint as Discord does; its answer is the initial response (type 5
        defers, leaving the "thinking" placeholder a follow-up fills).  ``lost``: the answer never reached
        Discord within its 3 s (the gateway died after storing it), so the token is invalidated."""
        status, answer = await self.post_signed(url, json.dumps(interaction).encode(), timestamp=timestamp, forged=forged)
        if lost:
            self.expire_interaction(interaction["token"])
        elif status == 200 and isinstance(answer, dict) and answer.get("type") in (4, 5):
            self._callback(interaction["token"], answer)
        return status, answer

    def expire_interaction(self, token: str) -> None:
        """Discord no longer knows ``token``: its 15 minutes are over, or no initial response came within 3 s.
        The callback then answers 404 ``Unknown interaction`` (10062), the follow-up webhook 404 ``Unknown
        Webhook`` (10015); a "thinking" placeholder already shown stays as it is."""
        self.interactions.pop(token, None)
        self.deferred.pop(token, None)

    async def post_signed(self, url: str, body: bytes, *, timestamp: int | None = None,
                          forged: bool = False) -> tuple[int, Any]:
        """Any body, signed (or not by the application's key): the status and the parsed answer."""
        async with ClientSession() as http, http.post(url, data=body, headers=self.signed(
                body, timestamp=timestamp, forged=forged)) as answer:
            text = await answer.text()
            try:
                return answer.status, json.loads(text)
            except ValueError:
                return answer.status, text

    def connected(self) -> bool:
        """Whether a bot session is identified and has its socket (what a user's message needs to reach it)."""
        return any(s.socket is not None for s in self.sessions.values())

    def seen(self, channel: str) -> list[dict]:
        """The bot's messages in ``channel`` as shown now (after edits), placeholders that were never filled included."""
        return [m for m in self.messages.get(channel, []) if m["author"]["id"] == self.app_id]

    # ------------------------------------------------------------------ control: faults

    def fail_next(self, status: int, *, retry_after: float = 1.0, is_global: bool = False, route: str = "") -> None:
        self.faults.append(Fault(status, retry_after, is_global, route))

    def rate_limited(self) -> int:
        return sum(1 for r in self.requests if r["status"] == 429)

    async def drop(self, code: int = 4000) -> None:
        """Close every bot socket as a network blip would; the sessions stay resumable."""
        for session in self.sessions.values():
            if session.socket is not None:
                socket, session.socket = session.socket, None
                await socket.close(code=code)

    async def request_reconnect(self) -> None:
        for session in self.sessions.values():
            if session.socket is not None:
                await session.socket.send_json({"op": 7, "d": None})

    async def invalidate(self) -> None:
        """Forget every session and tell the connected bots so (op 9, not resumable)."""
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            if session.socket is not None:
                await session.socket.send_json({"op": 9, "d": False})

    async def outage(self, down: bool) -> None:
        self.down = down
        if down:
            await self.drop()

    # ------------------------------------------------------------------ dispatch

    async def dispatch(self, event: str, data: dict) -> None:
        for session in list(self.sessions.values()):
            if not self._wants(session, event, data):
                continue
            session.seq += 1
            frame = {"op": 0, "t": event, "s": session.seq, "d": self._as_seen(session, event, data)}
            session.buffer.append(frame)
            if session.socket is not None:
                try:
                    await session.socket.send_json(frame)
                except (ConnectionError, RuntimeError):
                    session.socket = None  # replayed on resume

    def _wants(self, session: Session, event: str, data: dict) -> bool:
        if event != "MESSAGE_CREATE":
            return True
        guild = "guild_id" in data
        return bool(session.intents & (INTENT_GUILD_MESSAGES if guild else INTENT_DIRECT_MESSAGES))

    def _as_seen(self, session: Session, event: str, data: dict) -> dict:
        """What a session may read of a message: without MESSAGE_CONTENT, guild chatter is blanked."""
        if event != "MESSAGE_CREATE" or session.intents & INTENT_MESSAGE_CONTENT or "guild_id" not in data:
            return data
        addressed = any(m["id"] == self.app_id for m in data.get("mentions", [])) or data["author"]["id"] == self.app_id
        if addressed:
            return data
        return {**data, "content": "", "embeds": [], "attachments": [], "components": []}

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            return web.Response(status=503)
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}})
        session: Session | None = None
        async for frame in socket:
            if frame.type is not WSMsgType.TEXT:
                continue
            payload = json.loads(frame.data)
            op, data = payload.get("op"), payload.get("d")
            if op == 1:
                await socket.send_json({"op": 11})
            elif op == 2:
                if data.get("token") != self.token:
                    await socket.close(code=4004, message=b"Authentication failed.")
                    break
                enabled = self.flags & (FLAG_MESSAGE_CONTENT | FLAG_MESSAGE_CONTENT_LIMITED)
                if data.get("intents", 0) & INTENT_MESSAGE_CONTENT and not enabled:
                    await socket.close(code=4014, message=b"Disallowed intent(s).")
                    break
                self.identifies += 1
                session = Session(id=snowflake(), intents=int(data.get("intents", 0)), socket=socket)
                self.sessions[session.id] = session
                await self._send(session, "READY", {
                    "v": 10, "user": self.bot, "guilds": [{"id": self.guild_id, "unavailable": True}],
                    "session_id": session.id, "resume_gateway_url": self.gateway_url, "private_channels": [],
                    "relationships": [], "application": {"id": self.app_id, "flags": self.flags}, "_trace": ["peer"],
                })
                await self._send(session, "GUILD_CREATE", self._guild())
            elif op == 6:
                known = self.sessions.get(str(data.get("session_id")))
                if data.get("token") != self.token or known is None:
                    await socket.send_json({"op": 9, "d": False})
                    continue
                self.resumes += 1
                session, known.socket = known, socket
                for missed in [f for f in known.buffer if f["s"] > int(data.get("seq") or 0)]:
                    await socket.send_json(missed)
                await self._send(known, "RESUMED", {"_trace": ["peer"]})
        if session is not None and session.socket is socket:
            session.socket = None
        return socket

    async def _send(self, session: Session, event: str, data: dict) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.buffer.append(frame)
        assert session.socket is not None
        await session.socket.send_json(frame)

    def _guild(self) -> dict:
        everyone = {"id": self.guild_id, "name": "@everyone", "permissions": str((1 << 41) - 1), "position": 0,
                    "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}
        channels = [c for c in self.channels.values() if c.get("guild_id") and c["type"] == TEXT]
        threads = [c for c in self.channels.values() if c["type"] == PUBLIC_THREAD]
        return {"id": self.guild_id, "name": "School", "owner_id": snowflake(), "roles": [everyone], "emojis": [],
                "stickers": [], "features": [], "channels": channels, "threads": threads,
                "members": [self._member(self.bot)], "member_count": 2, "large": False, "unavailable": False,
                "joined_at": now_iso(), "voice_states": [], "presences": [], "stage_instances": [],
                "guild_scheduled_events": [], "premium_tier": 0, "preferred_locale": "en-US", "nsfw_level": 0,
                "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
                "mfa_level": 0, "system_channel_flags": 0, "afk_timeout": 300}

    def _member(self, user: dict) -> dict:
        return {"user": user, "roles": [], "joined_at": now_iso(), "deaf": False, "mute": False, "flags": 0}

    def _message(self, cid: str, author: dict, content: str, *, reply_to: dict | None = None,
                 attachments: tuple[dict, ...] | list[dict] = (), mentions: list[dict] | None = None,
                 nonce: str | None = None) -> dict:
        channel = self.channels[cid]
        message = {
            "id": snowflake(), "channel_id": cid, "author": author, "content": content, "timestamp": now_iso(),
            "edited_timestamp": None, "tts": False, "mention_everyone": False, "mentions": mentions or [],
            "mention_roles": [], "attachments": list(attachments), "embeds": [], "components": [], "pinned": False,
            "type": 19 if reply_to else 0, "flags": 0, "edits": 0,
        }
        if nonce is not None:
            message["nonce"] = nonce
        if "guild_id" in channel:
            message.update(guild_id=self.guild_id, member={k: v for k, v in self._member(author).items() if k != "user"})
        if reply_to is not None:
            message["message_reference"] = {"type": 0, "message_id": reply_to["id"], "channel_id": cid,
                                            **({"guild_id": self.guild_id} if "guild_id" in channel else {})}
            message["referenced_message"] = {k: v for k, v in reply_to.items() if k != "referenced_message"}
            if reply_to["author"]["id"] == self.app_id and author["id"] != self.app_id:
                message["mentions"] = [*message["mentions"], self.bot]  # a reply pings its author by default
        return message

    # ------------------------------------------------------------------ REST

    def _bucket(self, key: str) -> tuple[int, float] | None:
        """Take one request from ``key``'s bucket: (remaining, reset_after), or None when it is empty."""
        now = time.monotonic()
        reset_at, used = self._buckets.get(key, (now + self.bucket_window, 0))
        if now >= reset_at:
            reset_at, used = now + self.bucket_window, 0
        if used >= self.bucket_limit:
            self._buckets[key] = (reset_at, used)
            return None
        self._buckets[key] = (reset_at, used + 1)
        return self.bucket_limit - used - 1, reset_at - now

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        parts = path.split("/")
        route = "/".join(p if not p.isdigit() and not p.startswith("itok-") else "{id}" for p in parts)
        channel = parts[1] if parts[0] == "channels" and len(parts) > 1 else None
        record: dict[str, Any] = {"method": request.method, "route": route, "channel": channel, "at": time.time()}
        self.requests.append(record)
        if self.down:
            record["status"] = 503
            return self._json({"message": "Service Unavailable", "code": 0}, 503)
        if request.headers.get("Authorization") != f"Bot {self.token}" and parts[0] not in ("webhooks", "interactions"):
            record["status"] = 401
            return self._json({"message": "401: Unauthorized", "code": 0}, 401)
        key = f"{request.method} {route} {channel or ''}"
        fault = next((f for f in self.faults if route.endswith(f.route)), None)
        if fault and request.method in ("POST", "PATCH") and parts[0] in ("channels", "webhooks") and parts[-1] != "typing":
            self.faults.remove(fault)
            record["status"] = fault.status
            if fault.status == 429:
                return self._too_many(record, fault.retry_after, fault.is_global)
            if fault.status == 504:  # the gateway times out after the message was posted: the answer is lost
                await self._handle(request, parts)
                return self._json({"message": "Gateway Timeout", "code": 0}, 504)
            body = {401: "401: Unauthorized", 403: "Missing Permissions", 400: "Invalid Form Body"}.get(fault.status, "Server Error")
            return self._json({"message": body, "code": 50013 if fault.status == 403 else 0}, fault.status)
        taken = self._bucket(key)
        if taken is None:
            reset_at, _ = self._buckets[key]
            record["status"] = 429
            return self._too_many(record, round(max(0.0, reset_at - time.monotonic()), 3), False)
        remaining, reset_after = taken
        try:
            status, body = await self._handle(request, parts)
        except web.HTTPException:
            raise
        record["status"] = status
        if self.send_latency and request.method in ("POST", "PATCH"):
            await asyncio.sleep(self.send_latency)
        headers = {"X-RateLimit-Limit": str(self.bucket_limit), "X-RateLimit-Remaining": str(remaining),
                   "X-RateLimit-Reset-After": f"{reset_after:.3f}", "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
                   "X-RateLimit-Bucket": f"b-{abs(hash(route)) % 10**8}"}
        if status == 204:
            return web.Response(status=204, headers=headers)
        return self._json(body, status, headers)

    def _too_many(self, record: dict, retry_after: float, is_global: bool) -> web.Response:
        record["retry_after"] = retry_after
        headers = {"Retry-After": str(math.ceil(retry_after)), "X-RateLimit-Scope": "global" if is_global else "user",
                   "Via": "1.1 google"}
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        return self._json({"message": "You are being rate limited.", "retry_after": retry_after, "global": is_global},
                          429, headers)

    @staticmethod
    def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(status=status, body=json.dumps(body).encode(), headers={**(headers or {}),
                            "Content-Type": "application/json"})

    async def _payload(self, request: web.Request) -> tuple[dict, list[dict]]:
        """The JSON body, or a multipart form's ``payload_json`` and its ``files[n]``."""
        if not request.content_type.startswith("multipart/"):
            return (await request.json() if request.can_read_body else {}), []
        payload: dict = {}
        files: list[dict] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.name == "payload_json":
                payload = json.loads(await part.text())  # type: ignore[union-attr]
            else:
                data = await part.read()  # type: ignore[union-attr]
                files.append(self.attachment(part.filename or "file", data,  # type: ignore[union-attr]
                                             part.headers.get("Content-Type", "")))  # type: ignore[union-attr]
        return payload, files

    async def _handle(self, request: web.Request, parts: list[str]) -> tuple[int, Any]:
        method = request.method
        if parts == ["users", "@me"]:
            return 200, self.bot
        if parts[-2:] == ["applications", "@me"]:
            return 200, {"id": self.app_id, "name": "Tutor", "description": "", "icon": None, "bot_public": True,
                         "bot_require_code_grant": False, "verify_key": self.public_key, "flags": self.flags,
                         "owner": user_object(snowflake(), "teacher"), "team": None, "summary": "", "rpc_origins": [],
                         "bot": self.bot, "approximate_guild_count": 1}
        if parts[:1] == ["gateway"]:
            return 200, {"url": self.gateway_url, "shards": 1,
                         "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}
        if parts == ["users", "@me", "channels"] and method == "POST":
            return 200, self.channels[self.dm_channel(str((await request.json())["recipient_id"]))]
        if parts[0] == "applications" and parts[-1] == "commands" and method == "PUT":
            self.commands = [{**c, "id": snowflake(), "application_id": self.app_id, "version": "1"}
                             for c in await request.json()]
            return 200, self.commands
        if parts[0] == "channels" and parts[1] in self.channels:
            return await self._channel(request, parts)
        if parts[0] == "interactions" and method == "POST":
            await asyncio.sleep(self.callback_latency)
            return self._callback(parts[2], await request.json(), with_response=request.query.get("with_response") == "true")
        if parts[0] == "webhooks" and parts[1] == self.app_id:
            return await self._followup(request, parts)
        return 404, {"message": "404: Not Found", "code": 0}

    async def _channel(self, request: web.Request, parts: list[str]) -> tuple[int, Any]:
        cid, method = parts[1], request.method
        if len(parts) == 2:
            return 200, self.channels[cid]
        if parts[2] == "typing":
            return 204, None
        if parts[2:] == ["messages"] and method == "GET":
            return self._history(cid, request.query)
        if parts[2:] == ["messages"] and method == "POST":
            payload, files = await self._payload(request)
            return self._post(cid, payload, files)
        if len(parts) == 4 and parts[2] == "messages" and method == "PATCH":
            payload, _ = await self._payload(request)
            return self._edit(cid, parts[3], payload)
        if len(parts) == 5 and parts[4] == "threads" and method == "POST":
            return await self._start_thread(cid, parts[3], await request.json())
        return 404, {"message": "404: Not Found", "code": 0}

    async def _start_thread(self, cid: str, mid: str, body: dict) -> tuple[int, Any]:
        """Start Thread from Message: the thread takes the message's id; a second start is 400/160004."""
        message = next((m for m in self.messages[cid] if m["id"] == mid), None)
        if message is None:
            return 404, {"message": "Unknown Message", "code": 10008}
        if mid in self.channels:
            return 400, {"message": "A thread has already been created for this message", "code": 160004}
        name = body.get("name") or ""
        if not 1 <= len(name) <= 100 or body.get("auto_archive_duration", 1440) not in (60, 1440, 4320, 10080):
            return 400, {"message": "Invalid Form Body", "code": 50035}
        self.threads_started.append(mid)
        await self.open_thread(name, parent=cid, tid=mid)
        message["flags"] |= HAS_THREAD
        message["thread"] = self.channels[mid]
        return 201, self.channels[mid]

    def _history(self, cid: str, query: Any) -> tuple[int, Any]:
        """Get Channel Messages: at most ``limit`` (1-100, default 50) of ``around``/``before``/``after`` (one of them),
        newest first as Discord returns them (``after`` gives the ``limit`` oldest after it, still newest first)."""
        try:
            limit = int(query.get("limit", 50))
            anchors = {k: int(query[k]) for k in ("around", "before", "after") if k in query}
        except ValueError:
            return 400, {"message": "Invalid Form Body", "code": 50035}
        if not 1 <= limit <= 100 or len(anchors) > 1:
            return 400, {"message": "Invalid Form Body", "code": 50035}
        shown = sorted((m for m in self.messages.get(cid, []) if not m["flags"] & LOADING), key=lambda m: int(m["id"]))
        if "after" in anchors:
            picked = [m for m in shown if int(m["id"]) > anchors["after"]][:limit]
        elif "before" in anchors:
            picked = [m for m in shown if int(m["id"]) < anchors["before"]][-limit:]
        elif "around" in anchors:
            at = next((i for i, m in enumerate(shown) if int(m["id"]) >= anchors["around"]), len(shown))
            picked = shown[max(0, at - limit // 2):max(0, at - limit // 2) + limit]
        else:
            picked = shown[-limit:]
        return 200, [{k: v for k, v in m.items() if k != "edits"} for m in reversed(picked)]

    def post_offline(self, text: str, *, user: str | None = None, channel: str | None = None, mention: bool = False) -> dict:
        """A user posts while no bot session is connected: stored (REST history shows it), dispatched to nobody."""
        user = user or snowflake()
        cid = channel or self.dm_channel(user)
        content = f"<@{self.app_id}> {text}" if mention else text
        message = self._message(cid, user_object(user, f"user{user[-4:]}"), content, mentions=[self.bot] if mention else [])
        self.messages[cid].append(message)
        return message

    def _post(self, cid: str, payload: dict, files: list[dict], *, author: dict | None = None) -> tuple[int, Any]:
        author = author or self.bot
        if sum(f["size"] for f in files) > ATTACHMENT_LIMIT:
            return 413, {"message": "Request entity too large", "code": 40005}
        content = payload.get("content") or ""
        if len(content.encode("utf-16-le")) // 2 > 2000:
            return 400, {"message": "Invalid Form Body", "code": 50035,
                         "errors": {"content": {"_errors": [
                             {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}
        if not content and not files and not payload.get("embeds"):  # one of content, embeds or files is required
            return 400, {"message": "Cannot send an empty message", "code": 50006}
        nonce = payload.get("nonce")
        if nonce and payload.get("enforce_nonce") and (cid, nonce) in self._nonces:
            return 200, self._nonces[(cid, nonce)]
        reference = payload.get("message_reference")
        replied = next((m for m in self.messages[cid] if reference and m["id"] == str(reference.get("message_id"))), None)
        message = self._message(cid, author, content, reply_to=replied, attachments=files, nonce=nonce)
        message["embeds"] = list(payload.get("embeds") or [])
        self.messages[cid].append(message)
        if nonce:
            self._nonces[(cid, nonce)] = message
        asyncio.get_running_loop().create_task(self.dispatch("MESSAGE_CREATE", message))  # the bot sees its own post
        return 200, message

    def _edit(self, cid: str, mid: str, payload: dict) -> tuple[int, Any]:
        message = next((m for m in self.messages[cid] if m["id"] == mid), None)
        if message is None:
            return 404, {"message": "Unknown Message", "code": 10008}
        if message["author"]["id"] != self.app_id:
            return 403, {"message": "Cannot edit a message authored by another user", "code": 50005}
        if "content" in payload:
            if len((payload["content"] or "").encode("utf-16-le")) // 2 > 2000:
                return 400, {"message": "Invalid Form Body", "code": 50035}
            message["content"] = payload["content"] or ""
        message["flags"] &= ~LOADING
        message["edits"] += 1
        message["edited_timestamp"] = now_iso()
        return 200, message

    def _callback(self, token: str, body: dict, *, with_response: bool = False) -> tuple[int, Any]:
        """Create Interaction Response: 204, or with ``with_response`` the interaction callback object."""
        interaction = self.interactions.get(token)
        if interaction is None:
            return 404, {"message": "Unknown interaction", "code": 10062}
        if interaction.get("answered"):
            return 400, {"message": "Interaction has already been acknowledged.", "code": 40060}
        interaction["answered"] = body.get("type")
        if body.get("type") == 5:
            placeholder = self._message(interaction["channel_id"], self.bot, "")
            placeholder["flags"] = LOADING
            person = interaction.get("user") or interaction["member"]["user"]
            placeholder["interaction_metadata"] = {"id": interaction["id"], "type": 2, "user": person,
                                                   "authorizing_integration_owners": {}}
            self.messages[interaction["channel_id"]].append(placeholder)
            self.deferred[token] = placeholder
        elif body.get("type") == 4:
            self.messages[interaction["channel_id"]].append(
                self._message(interaction["channel_id"], self.bot, body.get("data", {}).get("content", "")))
        if not with_response:
            return 204, None
        shown = self.deferred.get(token) or self.messages[interaction["channel_id"]][-1]
        return 200, {"interaction": {"id": interaction["id"], "type": interaction["type"], "response_message_id": shown["id"],
                                     "response_message_loading": body.get("type") == 5, "response_message_ephemeral": False},
                     "resource": {"type": body.get("type")}}

    async def _followup(self, request: web.Request, parts: list[str]) -> tuple[int, Any]:
        token = parts[2]
        interaction = self.interactions.get(token)
        if interaction is None or not interaction.get("answered"):  # the webhook exists from the initial response on
            return 404, {"message": "Unknown Webhook", "code": 10015}
        cid = interaction["channel_id"]
        payload, files = await self._payload(request)
        if len(parts) == 3 and request.method == "POST":
            placeholder = self.deferred.pop(token, None)
            if placeholder is not None:  # the first follow-up after a defer fills the "thinking" placeholder
                placeholder["attachments"] = files
                return self._edit(cid, placeholder["id"], payload)
            return self._post(cid, payload, files)
        if len(parts) == 5 and request.method == "PATCH":
            mid = self.deferred[token]["id"] if parts[4] == "@original" and token in self.deferred else parts[4]
            return self._edit(cid, mid, payload)
        return 404, {"message": "404: Not Found", "code": 0}
