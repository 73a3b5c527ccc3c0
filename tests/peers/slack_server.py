"""The emulated Slack over HTTP and WebSocket, in its own process: Web API, Socket Mode, Events API, files, test control.

Run it as a process (the tests use :class:`tests.peers.slack_peer.SlackPeer`)::

    python -m tests.peers.slack_server --port 0 [--seed N]

It prints ``slack api listening on http://127.0.0.1:PORT`` once bound.
slack_sdk reaches it with ``AsyncWebClient(base_url=URL/api/)``, exactly as
it reaches slack.com; Socket Mode follows the ``ws://`` URL that
apps.connections.open hands out.

Web API: ``POST /api/<method>`` with the token as ``Authorization: Bearer``
and the arguments form-encoded, JSON or in the query; answers
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` -- in a 200 body, as
Slack does, except where the fault or the limit has an HTTP status of its own
(429 with ``Retry-After``).

Socket Mode (``/link``): ``hello`` on connect, each event as an ``events_api``
envelope with an ``envelope_id``; an envelope the app does not ack within
``ack_timeout`` seconds, or that was pending when its socket dropped, comes
again with ``retry_attempt + 1`` (up to three retries).  ``/test/drop`` either
sends ``{"type": "disconnect", "reason": "refresh_requested"}`` or cuts the
socket.

Events API: with a ``request_url`` the app gets each event as a POST signed
``v0=HMAC-SHA256(signing_secret, "v0:{ts}:{body}")`` in ``X-Slack-Signature``
with ``X-Slack-Request-Timestamp``; a non-2xx answer or none within three
seconds is retried with ``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason``
after ``retry_delays`` (Slack's: at once, a minute, five minutes), unless the
answer carried ``X-Slack-No-Retry: 1``.

Files: ``GET /files-pri/...`` serves a file a user shared only with the bot
token as a Bearer (403 otherwise); ``POST /upload/v1/<id>`` takes the bytes of
an upload begun with files.getUploadURLExternal.

Every answer to a bot token names its scopes in ``x-oauth-scopes``, as Slack's do (the guide's
manifest unless the app was registered with ``scopes``); users.info without ``users:read`` is
``missing_scope``.

Test control (JSON): ``POST /test/apps {bot_token, app_token, signing_secret?, request_url?, streaming?, scopes?}``,
``POST /test/say {token, channel, user?, text, mention?, thread_ts?, files?: [{name, mimetype, hex?|size?}]}``,
``POST /test/event {token, event}``, ``POST /test/redeliver {token, event_id}``,
``POST /test/verify_url {token}`` (a url_verification to the request URL),
``POST /test/faults {token, next?, down?, retry_after?, send_latency?}``,
``POST /test/settings {token, enforce_limits?, ack_timeout?, retry_delays?, streaming?, request_url?,
locales?: {user: locale}, users_info_error?, users_info_latency?}``,
``POST /test/drop {token, refresh?}``, ``GET /test/seen?token=``, ``GET /test/app?token=``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import socket
import time
import uuid
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.peers.slack_platform import ApiError, App, SlackPlatform

MAX_RETRIES = 3
DELIVERY_TIMEOUT_S = 3.0


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature (v0): what the Events API sends and the app must check."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


async def arguments(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    body = await request.body()
    if not body:
        return params
    if request.headers.get("content-type", "").startswith("application/json"):
        data = json.loads(body)
        return {**params, **(data if isinstance(data, dict) else {})}
    return {**params, **dict(parse_qsl(body.decode(), keep_blank_values=True))}


def failure(error: ApiError) -> JSONResponse:
    headers = {"Retry-After": str(int(error.retry_after) if float(error.retry_after).is_integer() else error.retry_after)} \
        if error.retry_after is not None else {}
    return JSONResponse({"ok": False, "error": error.error}, status_code=error.status, headers=headers)


class Server:
    def __init__(self, platform: SlackPlatform) -> None:
        self.platform = platform
        self.http = httpx.AsyncClient(timeout=DELIVERY_TIMEOUT_S, trust_env=False)
        self.base = ""
        self.settings: dict[str, dict] = {}
        self.tasks: set[asyncio.Task] = set()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def option(self, app: App, name: str, default: Any) -> Any:
        return self.settings.get(app.bot_token, {}).get(name, default)

    # ------------------------------------------------------------------ delivery

    def deliver(self, app: App, body: dict, attempt: int = 0) -> None:
        if app.request_url:
            self._spawn(self._post_event(app, body))
        else:
            self._envelope(app, body, attempt)

    def _envelope(self, app: App, body: dict, attempt: int) -> None:
        envelope = {"envelope_id": str(uuid.uuid4()), "payload": body, "type": "events_api",
                    "accepts_response_payload": False, "retry_attempt": attempt,
                    "retry_reason": "timeout" if attempt else ""}
        app.pending[envelope["envelope_id"]] = envelope
        self._spawn(self._push(app, envelope))

    async def _push(self, app: App, envelope: dict) -> None:
        if app.sockets:
            ws = self.platform.rng.choice(app.sockets)  # each event to one of the app's connections
            with contextlib.suppress(Exception):
                await ws.send_text(json.dumps(envelope))
        await asyncio.sleep(float(self.option(app, "ack_timeout", 3.0)))
        if envelope["envelope_id"] in app.pending and app.sockets and envelope["retry_attempt"] < MAX_RETRIES:
            app.pending.pop(envelope["envelope_id"])
            self._envelope(app, envelope["payload"], envelope["retry_attempt"] + 1)

    async def _post_event(self, app: App, body: dict) -> None:
        raw = json.dumps(body).encode()
        delays = list(self.option(app, "retry_delays", [0.0, 60.0, 300.0]))
        reason = ""
        for retry in range(MAX_RETRIES + 1):
            timestamp = str(int(time.time()))
            headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": timestamp,
                       "X-Slack-Signature": sign(app.signing_secret, timestamp, raw)}
            if retry:
                headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": reason}
            try:
                answer = await self.http.post(str(app.request_url), content=raw, headers=headers)
                status, reason = answer.status_code, "http_error"
                no_retry = answer.headers.get("X-Slack-No-Retry") == "1"
            except httpx.TimeoutException:
                status, reason, no_retry = 0, "http_timeout", False
            except httpx.HTTPError:
                status, reason, no_retry = 0, "connection_failed", False
            app.deliveries.append({"event_id": body.get("event_id"), "retry": retry, "status": status})
            if 200 <= status < 300 or no_retry or retry == MAX_RETRIES:
                return
            await asyncio.sleep(delays[min(retry, len(delays) - 1)])

    # ------------------------------------------------------------------ web api

    async def api(self, request: Request) -> Response:
        method = request.path_params["method"]
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        params = await arguments(request)
        token = token or str(params.get("token", ""))
        try:
            app = self.platform.app(token)
            if method == "apps.connections.open" and not token.startswith("xapp-"):
                raise ApiError("not_allowed_token_type")
            if method != "apps.connections.open" and not token.startswith("xoxb-"):
                raise ApiError("not_allowed_token_type")
            lost = self.platform.admit(app, method, params)
            result = self.call(app, method, params)
        except ApiError as error:
            with contextlib.suppress(ApiError):
                self.platform.app(token).calls.append({"method": method, "params": params, "outcome": error.error})
            return failure(error)
        app.calls.append({"method": method, "params": params, "outcome": "lost" if lost else "ok"})
        latency = float(app.faults.send_latency or 0)
        if latency and method in ("chat.postMessage", "chat.startStream"):
            await asyncio.sleep(latency)
        if method == "users.info" and app.users_info_latency:
            await asyncio.sleep(app.users_info_latency)
        if lost:
            return JSONResponse({"ok": False, "error": "gateway_timeout"}, status_code=504)
        scopes = {"x-oauth-scopes": ",".join(app.scopes)} if token.startswith("xoxb-") else {}
        return JSONResponse({"ok": True, **result}, headers=scopes)

    def call(self, app: App, method: str, params: dict) -> dict:
        p = self.platform
        if method == "auth.test":
            return {"url": f"{self.base}/", "team": "Test School", "user": "tutor", "team_id": app.team,
                    "user_id": app.bot_user, "bot_id": app.bot_id, "is_enterprise_install": False}
        if method == "apps.connections.open":
            app.connections_opened += 1
            return {"url": f"{self.base.replace('http', 'ws', 1)}/link/?ticket={uuid.uuid4()}&app={app.app_token}"}
        if method == "chat.postMessage":
            blocks = params.get("blocks")
            params = {**params, "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks}
            message = p.post(app, params)
            if not message["channel"].startswith("C"):  # the bot's own post comes back as an event (message.im)
                echo = {k: message[k] for k in ("type", "channel", "ts", "user", "bot_id", "text")}
                self.deliver(app, p.event_body(app, {**echo, "channel_type": "im", "event_ts": message["ts"]}))
            return {"channel": message["channel"], "ts": message["ts"], "message": message}
        handlers = {
            "chat.update": lambda: {"channel": params.get("channel"), "ts": p.update(app, params)["ts"]},
            "chat.startStream": lambda: {"channel": params.get("channel"), "ts": p.start_stream(app, params)["ts"]},
            "chat.appendStream": lambda: {"channel": params.get("channel"), "ts": p.append_stream(app, params)["ts"]},
            "chat.stopStream": lambda: {"channel": params.get("channel"), "ts": p.stop_stream(app, params)["ts"]},
            "assistant.threads.setStatus": lambda: self._record(app.statuses, params),
            "assistant.threads.setSuggestedPrompts": lambda: self._record(app.prompts, params),
            "files.getUploadURLExternal": lambda: p.upload_ticket(app, params, self.base),
            "files.completeUploadExternal": lambda: p.complete_upload(app, params),
            "users.info": lambda: p.user_info(app, params),
            "conversations.info": lambda: {"channel": {"id": params.get("channel"), "is_member": True,
                                                       "is_im": str(params.get("channel", "")).startswith("D")}},
        }
        if method not in handlers:
            raise ApiError("unknown_method")
        return handlers[method]()

    @staticmethod
    def _record(log: list, params: dict) -> dict:
        log.append(params)
        return {}

    # ------------------------------------------------------------------ socket mode

    async def link(self, ws: WebSocket) -> None:
        try:
            app = self.platform.app(ws.query_params.get("app"))
        except ApiError:
            await ws.close(code=4001)
            return
        if app.faults.down:
            await ws.close(code=1011)
            return
        await ws.accept()
        app.sockets.append(ws)
        await ws.send_text(json.dumps({"type": "hello", "num_connections": len(app.sockets),
                                       "debug_info": {"host": "applink-test", "approximate_connection_time": 18060},
                                       "connection_info": {"app_id": app.app_id}}))
        for envelope in list(app.pending.values()):  # what was pending when a socket dropped comes again
            app.pending.pop(envelope["envelope_id"], None)
            self._envelope(app, envelope["payload"], min(envelope["retry_attempt"] + 1, MAX_RETRIES))
        try:
            while True:
                frame = json.loads(await ws.receive_text())
                if isinstance(frame, dict) and frame.get("envelope_id"):
                    app.pending.pop(frame["envelope_id"], None)
        except (WebSocketDisconnect, RuntimeError, ValueError):
            pass
        finally:
            if ws in app.sockets:
                app.sockets.remove(ws)

    async def drop(self, app: App, refresh: bool) -> dict:
        for ws in list(app.sockets):
            app.sockets.remove(ws)
            with contextlib.suppress(Exception):
                if refresh:
                    await ws.send_text(json.dumps({"type": "disconnect", "reason": "refresh_requested",
                                                   "debug_info": {"host": "applink-test"}}))
                await ws.close()
        return {"ok": True}

    # ------------------------------------------------------------------ files

    async def private_file(self, request: Request) -> Response:
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        team_file = request.path_params["path"].split("/", 1)[0]
        file = self.platform.files.get(team_file.split("-", 1)[-1])
        if token not in self.platform.apps or file is None or self.platform.apps[token].team != file["team"]:
            return Response("not allowed", status_code=403)
        return Response(file["content"], media_type="application/octet-stream")

    async def upload(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        for app in self.platform.apps.values():
            if file_id in app.uploads:
                content = await request.body()
                if len(content) != app.uploads[file_id]["length"]:
                    return Response("length mismatch", status_code=400)
                app.uploads[file_id]["content"] = content
                return Response(f"OK - {len(content)}")
        return Response("no such upload", status_code=404)

    # ------------------------------------------------------------------ test control

    def control(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = await request.json() if request.method == "POST" else dict(request.query_params)
                result = handler(body)
                if asyncio.iscoroutine(result):
                    result = await result
                return JSONResponse(result)
            except ApiError as error:
                return failure(error)
            except (TypeError, ValueError, KeyError) as error:
                return JSONResponse({"ok": False, "error": f"bad test request: {error!r}"}, status_code=400)

        return endpoint

    def register(self, body: dict) -> dict:
        app = self.platform.register(body)
        return {"team_id": app.team, "bot_user": app.bot_user, "bot_id": app.bot_id, "app_id": app.app_id}

    def say(self, body: dict) -> dict:
        app = self.platform.app(body.get("token"))
        bodies = self.platform.say(app, body)
        for event in bodies:
            self.deliver(app, event)
        return {"ts": bodies[0]["event"]["ts"], "event_ids": [b["event_id"] for b in bodies]}

    def event(self, body: dict) -> dict:
        app = self.platform.app(body.get("token"))
        callback = self.platform.event_body(app, body["event"])
        self.deliver(app, callback)
        return {"event_id": callback["event_id"]}

    def redeliver(self, body: dict) -> dict:
        app = self.platform.app(body.get("token"))
        self.deliver(app, app.events[body["event_id"]], attempt=1)
        return {"ok": True}

    async def verify_url(self, body: dict) -> dict:
        app = self.platform.app(body.get("token"))
        challenge = uuid.uuid4().hex
        raw = json.dumps({"token": "verification-token-unused", "challenge": challenge, "type": "url_verification"}).encode()
        timestamp = str(int(time.time()))
        answer = await self.http.post(str(app.request_url), content=raw, headers={
            "Content-Type": "application/json", "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": sign(app.signing_secret, timestamp, raw)})
        return {"status": answer.status_code, "challenge": challenge, "answer": answer.text}

    def faults(self, body: dict) -> dict:
        app = self.platform.app(body.pop("token", None))
        for key, value in body.items():
            if not hasattr(app.faults, key):
                raise ApiError(f"unknown fault {key!r}", 400)
            setattr(app.faults, key, value)
        if app.faults.down:
            self._spawn(self.drop(app, refresh=False))
        return asdict(app.faults)

    def configure(self, body: dict) -> dict:
        app = self.platform.app(body.pop("token", None))
        for key in ("enforce_limits", "streaming", "request_url", "users_info_error", "users_info_latency"):
            if key in body:
                setattr(app, key, body.pop(key))
        app.locales.update(body.pop("locales", {}))
        self.settings.setdefault(app.bot_token, {}).update(body)
        return {"ok": True}

    def app_info(self, query: dict) -> dict:
        app = self.platform.app(query.get("token"))
        return {"sockets": len(app.sockets), "connections_opened": app.connections_opened,
                "pending": [e["payload"]["event_id"] for e in app.pending.values()], "deliveries": app.deliveries,
                "calls": app.calls, "statuses": app.statuses, "prompts": app.prompts,
                "rate_limited": sum(1 for c in app.calls if c["outcome"] == "ratelimited")}

    def build(self) -> Starlette:
        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette):
            yield
            for task in list(self.tasks):
                task.cancel()
            await self.http.aclose()

        c = self.control
        routes = [
            Route("/api/{method}", self.api, methods=["GET", "POST"]),
            WebSocketRoute("/link/", self.link),
            WebSocketRoute("/link", self.link),
            Route("/files-pri/{path:path}", self.private_file, methods=["GET"]),
            Route("/upload/v1/{file_id}", self.upload, methods=["POST"]),
            Route("/test/apps", c(self.register), methods=["POST"]),
            Route("/test/say", c(self.say), methods=["POST"]),
            Route("/test/event", c(self.event), methods=["POST"]),
            Route("/test/redeliver", c(self.redeliver), methods=["POST"]),
            Route("/test/verify_url", c(self.verify_url), methods=["POST"]),
            Route("/test/faults", c(self.faults), methods=["POST"]),
            Route("/test/settings", c(self.configure), methods=["POST"]),
            Route("/test/drop", c(lambda b: self.drop(self.platform.app(b.get("token")), bool(b.get("refresh")))),
                  methods=["POST"]),
            Route("/test/seen", c(lambda q: {"channels": self.platform.seen(self.platform.app(q.get("token")))}),
                  methods=["GET"]),
            Route("/test/app", c(self.app_info), methods=["GET"]),
        ]
        return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An emulated Slack (Web API, Socket Mode, Events API) for loopback tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    sock.listen(1024)
    port = sock.getsockname()[1]
    server = Server(SlackPlatform(seed=options.seed))
    server.base = server.platform.base = f"http://{options.host}:{port}"
    config = uvicorn.Config(server.build(), log_level="warning", timeout_graceful_shutdown=1, timeout_keep_alive=60,
                            ws_ping_interval=None)
    print(f"slack api listening on {server.base}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
