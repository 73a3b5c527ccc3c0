"""Relay: an emulated chat platform written to the rules of Telegram's Bot API.

It is the loopback peer for the ``relay`` test channel (``tests/plugins/relaychat``)
and for the crash test and benchmarks.  Run it as a process::

    python -m tests.peers.relay_platform --port 0 --state /tmp/relay.json [--bot TOKEN]

It prints ``relay platform listening on http://127.0.0.1:PORT`` once bound.

Bot API (``POST /bot/{token}/{method}``, JSON bodies, Telegram's envelope
``{"ok": true, "result": ...}`` / ``{"ok": false, "error_code", "description", "parameters"}``):

- ``getMe`` -> ``{id, username, is_bot}``.
- ``getUpdates {offset, timeout, limit}`` long-polls.  Updates stay queued until
  *confirmed*: an update counts as confirmed once a later call passes an
  ``offset`` above its ``update_id``.  A bot that dies before confirming gets the
  same updates (same ids) again -- at-least-once, as on Telegram.  A newer
  getUpdates on the same token ends an older one that is still waiting with 409.
- ``sendMessage {chat_id, text, reply_to, client_msg_id}`` -> ``{message_id}``.
  The platform deduplicates sends by ``client_msg_id`` the way Matrix does with
  the send ``txnId`` and QQ with ``msg_id+msg_seq``: a repeated id posts nothing
  new and answers the first message's id.  Every raw call is still recorded
  (``GET /test/attempts``) so a test can count what the dedup collapsed.
- ``editMessageText {chat_id, message_id, text}``; the same text again is
  400 "message is not modified", as on Telegram.
- ``sendChatAction`` -> true.

Errors: unknown token 401; text longer than ``--text-limit`` code points (or
empty) 400; unknown chat 400.  Faults (per bot, ``POST /test/faults``): a
fraction of sendMessage calls answer 429 with ``parameters.retry_after`` (and a
``Retry-After`` header), a fraction answer 503 having posted nothing, and a
fraction answer 504 *after* posting (a lost response, the case that makes send
idempotency matter); ``next`` forces the outcomes of the next calls
(``"429"``, ``"503"``, ``"504"``, ``"401"``, ``"400"``);
``down`` makes every Bot API call answer 503; ``send_latency`` delays the
answer to a sendMessage that has already posted (a slow response).

Test control: ``POST /test/bots {token}`` (or ``{tokens: [...]}``), ``POST /test/inject {token?, chat,
user, text, kind: direct|group, mention, reply_to?}`` (a user says something;
returns ``{update_id, message_id}``), ``POST /test/redeliver {token?, update_id}``
(hand an update out once more with its original id, as webhook platforms
retry), ``GET /test/sent`` (the bot's visible messages per chat, with what they
reply to), ``GET /test/attempts``, ``GET /test/bot`` (queue and poller state),
``GET /test/polling?prefix=`` (how many bots, by token prefix, have a long
poll waiting).
``token`` may be left out when one bot is registered.

Bots post as themselves, and the platform echoes a bot's own messages back in
its update stream (as Matrix sync, Slack and Discord do) -- a channel must
recognise and ignore them.  State (bots, chats, messages, queued updates,
send dedup ids, attempts) is saved to ``--state`` as JSON at most every 50 ms
and at shutdown, so the platform outlives the bots that talk to it and can be
restarted itself with ``--state`` pointing at the same file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.peers import stop_process
from tests.peers.control import ControlClient
from tests.peers.faults import Faults

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEXT_LIMIT = 500
MAX_POLL_TIMEOUT = 50.0


class ApiError(Exception):
    def __init__(self, code: int, description: str, *, retry_after: float | None = None):
        super().__init__(description)
        self.code, self.description, self.retry_after = code, description, retry_after

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"ok": False, "error_code": self.code, "description": self.description}
        headers = {}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
            headers["Retry-After"] = f"{self.retry_after:g}"
        return JSONResponse(body, status_code=self.code, headers=headers)


@dataclass
class Bot:
    token: str
    bot_id: str
    username: str
    echo_own: bool = True
    next_update: int = 1
    next_message: int = 1
    updates: list[dict] = field(default_factory=list)
    """Queued and not yet confirmed by a later getUpdates offset, in update_id order."""
    replay: list[dict] = field(default_factory=list)
    chats: dict[str, dict] = field(default_factory=dict)
    messages: dict[str, dict] = field(default_factory=dict)
    """message_id (as str, for JSON) -> message."""
    update_messages: dict[str, int] = field(default_factory=dict)
    """update_id -> message_id, kept after confirmation so /test/redeliver can replay it."""
    client_ids: dict[str, int] = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)
    faults: Faults = field(default_factory=Faults)
    # runtime only
    generation: int = 0
    wakeup: asyncio.Event | None = None

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) if f.name != "faults" else asdict(self.faults)
                for f in fields(self) if f.name not in ("generation", "wakeup")}

    @classmethod
    def from_json(cls, data: dict) -> Bot:
        faults = Faults(**data.pop("faults"))
        return cls(**data, faults=faults)


class RelayPlatform:
    """The platform's state and rules, independent of HTTP."""

    def __init__(self, state_path: Path | None, *, text_limit: int = DEFAULT_TEXT_LIMIT, seed: int = 0):
        self.state_path = state_path
        self.text_limit = text_limit
        self.rng = random.Random(seed)
        self.bots: dict[str, Bot] = {}
        self.unauthorized = 0
        self._dirty = False
        if state_path and state_path.exists():
            raw = json.loads(state_path.read_text())
            self.bots = {b["token"]: Bot.from_json(b) for b in raw["bots"]}
            self.unauthorized = raw.get("unauthorized", 0)

    # ------------------------------------------------------------------ persistence

    def save(self) -> None:
        if not self.state_path:
            return
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"bots": [b.to_json() for b in self.bots.values()], "unauthorized": self.unauthorized}))
        os.replace(tmp, self.state_path)
        self._dirty = False

    async def autosave(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            if self._dirty:
                try:
                    self.save()
                except OSError as error:  # a full disk must not stop the platform; say so and keep going
                    print(f"relay platform: cannot save state: {error}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ bots and users

    def register(self, token: str, username: str | None = None, echo_own: bool = True) -> Bot:
        if token not in self.bots:
            n = len(self.bots) + 1
            self.bots[token] = Bot(token=token, bot_id=f"bot{n}", username=username or f"relay{n}bot", echo_own=echo_own)
            self._dirty = True
        return self.bots[token]

    def bot(self, token: str | None) -> Bot:
        if token is None and len(self.bots) == 1:
            return next(iter(self.bots.values()))
        if token not in self.bots:
            raise ApiError(404, f"no bot with that token (registered: {len(self.bots)})")
        return self.bots[token]

    def authorize(self, token: str) -> Bot:
        bot = self.bots.get(token)
        if bot is None:
            self.unauthorized += 1
            raise ApiError(401, "Unauthorized")
        if bot.faults.down:
            raise ApiError(503, "Service Unavailable")
        return bot

    def _post(self, bot: Bot, chat: str, sender: dict, text: str, **extra: Any) -> dict:
        message = {
            "message_id": bot.next_message,
            "date": time.time(),
            "chat": {"id": chat, **bot.chats[chat]},
            "from": sender,
            "text": text,
            **extra,
        }
        bot.next_message += 1
        bot.messages[str(message["message_id"])] = message
        return message

    def _queue(self, bot: Bot, message: dict) -> int:
        update = {"update_id": bot.next_update, "message": message}
        bot.update_messages[str(bot.next_update)] = message["message_id"]
        bot.next_update += 1
        bot.updates.append(update)
        self._dirty = True
        self._wake(bot)
        return update["update_id"]

    def _wake(self, bot: Bot) -> None:
        if bot.wakeup is not None:
            bot.wakeup.set()
            bot.wakeup = None

    def inject(self, bot: Bot, *, chat: str | None, user: str, text: str, kind: str = "direct",
               mention: bool = False, reply_to: int | None = None, user_name: str = "") -> dict:
        if kind not in ("direct", "group"):
            raise ApiError(400, "kind must be direct or group")
        chat = chat or user
        bot.chats.setdefault(chat, {"type": "private" if kind == "direct" else "group", "title": chat})
        entities = []
        if mention:
            handle = f"@{bot.username}"
            text = f"{handle} {text}"
            entities.append({"type": "mention", "offset": 0, "length": len(handle), "user_id": bot.bot_id})
        extra: dict[str, Any] = {"entities": entities}
        if reply_to is not None:
            quoted = bot.messages.get(str(reply_to))
            if quoted is None:
                raise ApiError(400, "message to reply to not found")
            extra["reply_to_message"] = {k: quoted[k] for k in ("message_id", "from", "text")}
        message = self._post(bot, chat, {"id": user, "name": user_name or user, "is_bot": False}, text, **extra)
        return {"update_id": self._queue(bot, message), "message_id": message["message_id"]}

    def redeliver(self, bot: Bot, update_id: int) -> None:
        message_id = bot.update_messages.get(str(update_id))
        if message_id is None:
            raise ApiError(404, f"no update {update_id}")
        bot.replay.append({"update_id": update_id, "message": bot.messages[str(message_id)]})
        self._dirty = True
        self._wake(bot)

    # ------------------------------------------------------------------ bot API

    async def get_updates(self, bot: Bot, offset: int | None, timeout: float, limit: int) -> list[dict]:
        if offset and bot.updates and bot.updates[0]["update_id"] < offset:
            bot.updates = [u for u in bot.updates if u["update_id"] >= offset]
            self._dirty = True
        bot.generation += 1
        generation = bot.generation
        if bot.wakeup is not None:
            self._wake(bot)  # an older poll still waiting ends with 409, as on Telegram
        deadline = time.monotonic() + min(max(timeout, 0.0), MAX_POLL_TIMEOUT)
        while not (bot.replay or bot.updates):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            if bot.wakeup is None:
                bot.wakeup = asyncio.Event()
            wakeup = bot.wakeup
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wakeup.wait(), remaining)
            if bot.generation != generation:
                raise ApiError(409, "Conflict: terminated by other getUpdates request")
            if bot.faults.down:
                raise ApiError(503, "Service Unavailable")
        replayed, bot.replay = bot.replay, []
        return [*replayed, *bot.updates[: max(1, limit)]]

    def send_message(self, bot: Bot, body: dict) -> dict:
        chat, text, client_id = str(body.get("chat_id", "")), body.get("text"), body.get("client_msg_id")
        attempt = {"at": time.time(), "chat_id": chat, "client_msg_id": client_id,
                   "length": len(text) if isinstance(text, str) else None}
        bot.attempts.append(attempt)
        self._dirty = True
        fault = bot.faults.draw(self.rng)
        if fault == "429":
            attempt["outcome"] = "rate_limited"
            raise ApiError(429, f"Too Many Requests: retry after {bot.faults.retry_after:g}", retry_after=bot.faults.retry_after)
        if fault == "503":
            attempt["outcome"] = "unavailable"
            raise ApiError(503, "Service Unavailable")
        if fault == "401":
            attempt["outcome"] = "unauthorized"
            raise ApiError(401, "Unauthorized")
        if fault == "400":
            attempt["outcome"] = "bad_request"
            raise ApiError(400, "Bad Request: can't parse entities")
        try:
            message_id = self._post_reply(bot, chat, text, body.get("reply_to"), client_id)
        except ApiError:
            attempt["outcome"] = "bad_request"
            raise
        attempt["outcome"] = "duplicate" if message_id < 0 else "posted"
        message_id = abs(message_id)
        attempt["message_id"] = message_id
        if fault == "504":
            attempt["outcome"] += "+lost_response"
            raise ApiError(504, "Gateway Timeout")
        return {"message_id": message_id, "chat": {"id": chat}}

    def _post_reply(self, bot: Bot, chat: str, text: Any, reply_to: Any, client_id: Any) -> int:
        """Post a bot message; a negative id means an earlier post with the same client_msg_id."""
        if chat not in bot.chats:
            raise ApiError(400, "Bad Request: chat not found")
        self._check_text(text)
        if client_id is not None and str(client_id) in bot.client_ids:
            return -bot.client_ids[str(client_id)]
        if reply_to is not None and str(reply_to) not in bot.messages:
            raise ApiError(400, "Bad Request: message to reply to not found")
        sender = {"id": bot.bot_id, "name": bot.username, "is_bot": True}
        message = self._post(bot, chat, sender, text, reply_to=reply_to, client_msg_id=client_id, edits=0, via="bot_api")
        if client_id is not None:
            bot.client_ids[str(client_id)] = message["message_id"]
        if bot.echo_own:
            self._queue(bot, message)
        self._dirty = True
        return message["message_id"]

    def _check_text(self, text: Any) -> None:
        if not isinstance(text, str) or not text:
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text) > self.text_limit:
            raise ApiError(400, f"Bad Request: message is too long ({len(text)} > {self.text_limit} characters)")

    def edit_message(self, bot: Bot, body: dict) -> dict:
        message = bot.messages.get(str(body.get("message_id")))
        if message is None or message["chat"]["id"] != str(body.get("chat_id")):
            raise ApiError(400, "Bad Request: message to edit not found")
        if message["from"]["id"] != bot.bot_id:
            raise ApiError(400, "Bad Request: message can't be edited")
        text = body.get("text")
        self._check_text(text)
        if text == message["text"]:
            raise ApiError(400, "Bad Request: message is not modified")
        message["text"] = text
        message["edits"] += 1
        self._dirty = True
        return {"message_id": message["message_id"], "chat": {"id": message["chat"]["id"]}}

    # ------------------------------------------------------------------ test views

    def sent(self, bot: Bot) -> dict[str, list[dict]]:
        """What the bot posted through the Bot API, per chat, as users see it now."""
        chats: dict[str, list[dict]] = {chat: [] for chat in bot.chats}
        for message in bot.messages.values():
            if message.get("via") == "bot_api":
                chats[message["chat"]["id"]].append(
                    {k: message[k] for k in ("message_id", "text", "reply_to", "client_msg_id", "edits", "date")}
                )
        return chats


# ---------------------------------------------------------------------- HTTP


async def _json(request: Request) -> dict:
    try:
        body = await request.json() if await request.body() else {}
    except ValueError:
        raise ApiError(400, "Bad Request: body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Bad Request: body must be a JSON object")
    return body


def build_app(platform: RelayPlatform) -> Starlette:
    async def bot_api(request: Request) -> JSONResponse:
        try:
            bot = platform.authorize(request.path_params["token"])
            body = await _json(request)
            method = request.path_params["method"]
            if method == "getMe":
                result: Any = {"id": bot.bot_id, "username": bot.username, "is_bot": True}
            elif method == "getUpdates":
                result = await platform.get_updates(
                    bot, int(body.get("offset") or 0), float(body.get("timeout") or 0), int(body.get("limit") or 100)
                )
            elif method == "sendMessage":
                result = platform.send_message(bot, body)
                if bot.faults.send_latency:
                    await asyncio.sleep(bot.faults.send_latency)
            elif method == "editMessageText":
                result = platform.edit_message(bot, body)
            elif method == "sendChatAction":
                result = True
            else:
                raise ApiError(404, "Not Found: method not found")
        except ApiError as error:
            return error.response()
        return JSONResponse({"ok": True, "result": result})

    def control(handler):
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = await _json(request) if request.method == "POST" else dict(request.query_params)
                return JSONResponse(handler(body))
            except ApiError as error:
                return error.response()
            except (TypeError, ValueError, KeyError) as error:
                return JSONResponse({"ok": False, "description": f"bad test request: {error!r}"}, status_code=400)

        return endpoint

    def bots(body: dict) -> dict:
        if "tokens" in body:  # many at once (benchmarks)
            return {"bot_ids": [platform.register(str(t)).bot_id for t in body["tokens"]]}
        bot = platform.register(body["token"], body.get("username"), bool(body.get("echo_own", True)))
        return {"bot_id": bot.bot_id, "username": bot.username}

    def inject(body: dict) -> dict:
        bot = platform.bot(body.get("token"))
        return platform.inject(
            bot, chat=body.get("chat"), user=str(body["user"]), text=str(body["text"]), kind=body.get("kind", "direct"),
            mention=bool(body.get("mention", False)), reply_to=body.get("reply_to"), user_name=body.get("user_name", ""),
        )

    def redeliver(body: dict) -> dict:
        platform.redeliver(platform.bot(body.get("token")), int(body["update_id"]))
        return {"ok": True}

    def faults(body: dict) -> dict:
        bot = platform.bot(body.pop("token", None))
        for key, value in body.items():
            if not hasattr(bot.faults, key):
                raise ApiError(400, f"unknown fault {key!r}")
            setattr(bot.faults, key, value)
        platform._dirty = True
        platform._wake(bot)
        return asdict(bot.faults)

    def sent(query: dict) -> dict:
        return {"chats": platform.sent(platform.bot(query.get("token")))}

    def attempts(query: dict) -> dict:
        bot = platform.bot(query.get("token"))
        return {"attempts": bot.attempts, "summary": dict(Counter(a["outcome"] for a in bot.attempts))}

    def bot_info(query: dict) -> dict:
        bot = platform.bot(query.get("token"))
        return {"bot_id": bot.bot_id, "username": bot.username, "queued": [u["update_id"] for u in bot.updates],
                "polling": bot.wakeup is not None, "unauthorized": platform.unauthorized}

    def polling(query: dict) -> dict:
        prefix = query.get("prefix", "")
        return {"polling": sum(b.wakeup is not None for t, b in platform.bots.items() if t.startswith(prefix))}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        saver = asyncio.create_task(platform.autosave())
        try:
            yield
        finally:
            saver.cancel()
            platform.save()

    routes = [
        Route("/bot/{token}/{method}", bot_api, methods=["GET", "POST"]),
        Route("/test/bots", control(bots), methods=["POST"]),
        Route("/test/inject", control(inject), methods=["POST"]),
        Route("/test/redeliver", control(redeliver), methods=["POST"]),
        Route("/test/faults", control(faults), methods=["POST"]),
        Route("/test/sent", control(sent), methods=["GET"]),
        Route("/test/attempts", control(attempts), methods=["GET"]),
        Route("/test/bot", control(bot_info), methods=["GET"]),
        Route("/test/polling", control(polling), methods=["GET"]),
        Route("/test/health", control(lambda _: {"ok": True}), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


# ---------------------------------------------------------------------- process handle for tests and benches


class RelayPeer:
    """A running relay platform process, started on a free loopback port and stopped by its pid."""

    def __init__(self, process: subprocess.Popen, url: str):
        self.process, self.url = process, url

    @classmethod
    def start(cls, state: Path, *, text_limit: int = DEFAULT_TEXT_LIMIT, seed: int = 0, bots: tuple[str, ...] = ()) -> RelayPeer:
        args = [sys.executable, "-m", "tests.peers.relay_platform", "--port", "0", "--state", str(state),
                "--text-limit", str(text_limit), "--seed", str(seed)]
        for token in bots:
            args += ["--bot", token]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        log = open(state.with_suffix(".log"), "ab")
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log)
        log.close()
        line = process.stdout.readline().decode()  # type: ignore[union-attr]
        if "listening on " not in line:
            process.kill()
            raise RuntimeError(f"relay platform did not start (see {state.with_suffix('.log')}): {line!r}")
        return cls(process, line.split("listening on ", 1)[1].strip())

    def stop(self) -> None:
        stop_process(self.process)


class RelayClient(ControlClient):
    """The test-control API, as the tests and benches use it (playing the users)."""

    async def register(self, **options: Any) -> dict:
        return await self._post("/test/bots", **options)

    async def inject(self, chat: str | None, user: str, text: str, *, kind: str = "direct", mention: bool = False,
                     reply_to: int | None = None) -> dict:
        return await self._post("/test/inject", chat=chat, user=user, text=text, kind=kind, mention=mention, reply_to=reply_to)

    async def sent(self) -> dict[str, list[dict]]:
        return (await self._get("/test/sent"))["chats"]



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Relay: an emulated chat platform with Telegram Bot API rules.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", type=Path, default=None, help="JSON file the platform's state is kept in")
    parser.add_argument("--text-limit", type=int, default=DEFAULT_TEXT_LIMIT)
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault dice")
    parser.add_argument("--bot", action="append", default=[], help="register a bot token at start (repeatable)")
    options = parser.parse_args(argv)

    import uvicorn

    platform = RelayPlatform(options.state, text_limit=options.text_limit, seed=options.seed)
    for token in options.bot:
        platform.register(token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # proto set: asyncio then turns Nagle off
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    sock.listen(4096)  # before saying so: connections wait in the backlog until uvicorn has started
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_app(platform), log_level="warning", timeout_graceful_shutdown=1,
                            timeout_keep_alive=60, backlog=4096)
    print(f"relay platform listening on http://{options.host}:{port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
