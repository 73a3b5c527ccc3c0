"""The emulated Telegram Bot API over HTTP, in its own process: Bot API, file downloads, webhooks, test control.

Run it as a process (the tests use :class:`tests.peers.telegram_peer.TelegramPeer`)::

    python -m tests.peers.telegram_server --port 0 [--seed N]

It prints ``telegram bot api listening on http://127.0.0.1:PORT`` once bound.
python-telegram-bot reaches it with ``base_url=URL/bot`` and
``base_file_url=URL/file/bot``, exactly as it reaches a self-hosted Bot API
server.

Bot API: ``POST|GET /bot<token>/<method>`` with the parameters as
python-telegram-bot sends them (form-encoded, JSON-encoded values; multipart
with uploads) or as a JSON body; answers in Telegram's envelope
``{"ok": true, "result": ...}`` / ``{"ok": false, "error_code", "description",
"parameters": {"retry_after"}}``.  Files: ``GET /file/bot<token>/<file_path>``.

Test control (JSON): ``POST /test/bots {token, username?, privacy?, knows_drafts?}``,
``POST /test/say {token, chat: {id, type?, title?, is_forum?}, user?: {id, first_name?, username?},
text, mention?, mention_name?, command?, command_to?, reply_to?, thread?, media?: {kind, name?, size?, hex?}}``,
``POST /test/chat {chat}`` (a chat exists, nothing said yet), ``POST /test/raw {token, update}`` (a malformed update),
``POST /test/redeliver {token, update_id}``,
``POST /test/migrate {token, chat_id} -> {chat_id}`` (a group upgraded to a supergroup),
``POST /test/faults {token, next?, rate_429?, rate_5xx?, rate_lost?, retry_after?, down?, send_latency?}``,
``GET /test/seen?token=`` (the bot's messages per chat as users see them),
``GET /test/attempts?token=``, ``GET /test/bot?token=`` (commands, webhook, queue, drafts, chat actions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.parser
import email.policy
import json
import socket
from collections import Counter
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.peers.telegram_api import SEND_METHODS, ApiError, Bot, TelegramPlatform
from tests.waits import HTTP_S

STRING_PARAMS = {"text", "caption", "parse_mode", "url", "secret_token", "action", "file_id", "photo", "document",
                 "voice", "description", "ip_address"}
"""Parameters python-telegram-bot sends as raw strings; every other value is JSON-encoded."""
WEBHOOK_RETRY_S = 0.1


def _value(name: str, raw: str) -> Any:
    if name in STRING_PARAMS:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    params: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        payload = part.get_payload(decode=True) or b""
        if filename is not None:
            params[name] = {"filename": filename, "content": payload, "content_type": part.get_content_type()}
        else:
            params[name] = _value(name, payload.decode("utf-8"))
    for name, value in list(params.items()):  # attach://<name> refers to another part
        if isinstance(value, str) and value.startswith("attach://"):
            params[name] = params.pop(value.removeprefix("attach://"), value)
    return params


async def parameters(request: Request) -> dict[str, Any]:
    """A Bot API call's parameters, whichever of the documented encodings the caller used."""
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    params: dict[str, Any] = {k: _value(k, v) for k, v in request.query_params.items()}
    if not body:
        return params
    if content_type.startswith("application/json"):
        try:
            data = json.loads(body)
        except ValueError:
            raise ApiError(400, "Bad Request: body is not valid JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Bad Request: body must be a JSON object")
        return {**params, **data}
    if content_type.startswith("multipart/form-data"):
        return {**params, **_multipart(content_type, body)}
    return {**params, **{k: _value(k, v) for k, v in parse_qsl(body.decode("utf-8"), keep_blank_values=True)}}


def failure(error: ApiError) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": error.code, "description": error.description}
    if error.retry_after is not None:
        body["parameters"] = {"retry_after": error.retry_after}
    if error.migrate_to_chat_id is not None:
        body["parameters"] = {"migrate_to_chat_id": error.migrate_to_chat_id}
    return JSONResponse(body, status_code=error.code)


def build_app(platform: TelegramPlatform) -> Starlette:
    http = httpx.AsyncClient(timeout=HTTP_S, trust_env=False)

    async def push_webhook(bot: Bot) -> None:
        """POST queued updates to the webhook in order; an update leaves the queue only on a 2xx."""
        while bot.webhook is not None and bot.updates:
            hook, update = bot.webhook, bot.updates[0]
            headers = {"X-Telegram-Bot-Api-Secret-Token": hook["secret_token"]} if hook.get("secret_token") else {}
            try:
                response = await http.post(hook["url"], json=update, headers=headers)
                ok, error = 200 <= response.status_code < 300, f"Wrong response from the webhook: {response.status_code}"
            except httpx.HTTPError as failed:
                ok, error = False, f"Connection failed: {type(failed).__name__}"
            hook["deliveries"] += 1
            if ok:
                if bot.updates and bot.updates[0]["update_id"] == update["update_id"]:
                    bot.updates.pop(0)
                hook["last_error_message"] = None
            else:
                hook["failures"] += 1
                hook["last_error_message"] = error
                await asyncio.sleep(WEBHOOK_RETRY_S)

    platform.webhook_delivery = push_webhook

    async def bot_api(request: Request) -> Response:
        method = request.path_params["method"]
        try:
            bot = platform.authorize(request.path_params["token"])
            body = await parameters(request)
            result = await call(bot, method, body)
        except ApiError as error:
            return failure(error)
        return JSONResponse({"ok": True, "result": result})

    async def call(bot: Bot, method: str, body: dict) -> Any:
        if method == "getMe":
            return bot.user
        if method == "getUpdates":
            return await platform.get_updates(bot, int(body.get("offset") or 0), float(body.get("timeout") or 0),
                                              int(body.get("limit") or 100))
        if method in SEND_METHODS:
            result = platform.send(bot, method, body)
            if bot.faults.send_latency:
                await asyncio.sleep(bot.faults.send_latency)
            return result
        handlers = {
            "setWebhook": lambda: platform.set_webhook(bot, body),
            "deleteWebhook": lambda: platform.delete_webhook(bot, body),
            "getWebhookInfo": lambda: platform.webhook_info(bot),
            "sendMessageDraft": lambda: platform.send_draft(bot, body),
            "editMessageText": lambda: platform.edit_text(bot, body),
            "sendChatAction": lambda: chat_action(bot, body),
            "setMyCommands": lambda: platform.set_commands(bot, body),
            "getMyCommands": lambda: bot.commands,
            "getFile": lambda: platform.get_file(body),
        }
        if method not in handlers:
            raise ApiError(404, "Not Found: method not found")
        return handlers[method]()

    def chat_action(bot: Bot, body: dict) -> bool:
        platform._message_in(body)
        bot.actions[f"{body.get('chat_id')}:{body.get('action')}"] += 1
        return True

    async def file_download(request: Request) -> Response:
        try:
            bot = platform.authorize(request.path_params["token"])
            while bot.faults.file_hold:  # a stuck file server: the bot's download waits, or gives up
                await asyncio.sleep(0.05)
            if bot.faults.file_status:
                raise ApiError(bot.faults.file_status, "file server failure")
            content = platform.file_content(request.path_params["path"])
            bot.downloads.append(request.path_params["path"])
            return Response(content, media_type="application/octet-stream")
        except ApiError as error:
            return failure(error)

    def control(handler):
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = await request.json() if request.method == "POST" else dict(request.query_params)
                return JSONResponse(handler(body))
            except ApiError as error:
                return failure(error)
            except (TypeError, ValueError, KeyError) as error:
                return JSONResponse({"ok": False, "description": f"bad test request: {error!r}"}, status_code=400)

        return endpoint

    def bots(body: dict) -> dict:
        bot = platform.register(body["token"], body.get("username"), bool(body.get("privacy", True)),
                                bool(body.get("knows_drafts", True)))
        return {"bot_id": bot.user["id"], "username": bot.user["username"]}

    def faults(body: dict) -> dict:
        bot = platform.bot(body.pop("token", None))
        for key, value in body.items():
            if not hasattr(bot.faults, key):
                raise ApiError(400, f"unknown fault {key!r}")
            setattr(bot.faults, key, value)
        platform.wake(bot)
        return asdict(bot.faults)

    def redeliver(body: dict) -> dict:
        platform.redeliver(platform.bot(body.get("token")), int(body["update_id"]))
        return {"ok": True}

    def attempts(query: dict) -> dict:
        bot = platform.bot(query.get("token"))
        return {"attempts": bot.attempts, "summary": dict(Counter(a.get("outcome") for a in bot.attempts))}

    def bot_info(query: dict) -> dict:
        bot = platform.bot(query.get("token"))
        return {"user": bot.user, "commands": bot.commands, "webhook": bot.webhook, "queued": [u["update_id"] for u in bot.updates],
                "polling": bot.wakeup is not None, "polls": bot.polls, "downloads": bot.downloads, "drafts": bot.drafts,
                "actions": dict(bot.actions)}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await http.aclose()

    routes = [
        Route("/bot{token}/{method}", bot_api, methods=["GET", "POST"]),
        Route("/file/bot{token}/{path:path}", file_download, methods=["GET"]),
        Route("/test/bots", control(bots), methods=["POST"]),
        Route("/test/say", control(lambda b: platform.say(platform.bot(b.get("token")), b)), methods=["POST"]),
        Route("/test/migrate", control(lambda b: platform.migrate(platform.bot(b.get("token")), b)), methods=["POST"]),
        Route("/test/chat", control(lambda b: platform.chat(b["chat"])), methods=["POST"]),
        Route("/test/raw", control(lambda b: {"update_id": platform.queue_raw(platform.bot(b.get("token")), b["update"])}),
              methods=["POST"]),
        Route("/test/redeliver", control(redeliver), methods=["POST"]),
        Route("/test/faults", control(faults), methods=["POST"]),
        Route("/test/seen", control(lambda q: {"chats": platform.seen(platform.bot(q.get("token")))}), methods=["GET"]),
        Route("/test/attempts", control(attempts), methods=["GET"]),
        Route("/test/bot", control(bot_info), methods=["GET"]),
        Route("/test/health", control(lambda _: {"ok": True}), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An emulated Telegram Bot API for loopback tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault dice")
    options = parser.parse_args(argv)

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    sock.listen(1024)  # before saying so: connections wait in the backlog until uvicorn runs
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_app(TelegramPlatform(seed=options.seed)), log_level="warning",
                            timeout_graceful_shutdown=1, timeout_keep_alive=60)
    print(f"telegram bot api listening on http://{options.host}:{port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
