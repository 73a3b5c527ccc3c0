"""The gateway's single ASGI app: one port for operators, platforms and learners.

=============================  ===============================================
``GET /healthz``               200 ``{"ok": true, "data_dir_id"}`` once started, else 503 (with a ``reason`` while store writes fail)
``GET /status``                the gateway's :class:`~gateway.status.StatusReport`
``GET /metrics``               Prometheus text
``POST /webhooks/{ch}/{acct}`` handed to that channel account's ``handle_webhook``
``GET /webhooks/{ch}/{acct}``  its ``verify_webhook``: the platform's challenge (405 where it has none)
``/channels/{ch}/{acct}/...``  that channel account's own ``http_routes()``
``GET /``                      redirect to the first web chat page, if one runs
``/console/...``               the teacher console (:mod:`gateway.console.pages`)
=============================  ===============================================

Channel routes are looked up per request, not mounted once: accounts start
after the app is built and a supervisor may replace a crashed channel with a
new instance, whose routes must take over.

Requests for a host name the gateway does not know, and writes from another
site's page, are refused before any route runs (:mod:`gateway.http.hosts`).

Errors are translated here, once, into short JSON bodies: a forged webhook is
401 (403 for a verify token that does not match, as Meta's challenge asks),
an undecodable event 400, something a channel does not do 404, a platform
the gateway needs and cannot reach right now (a key set to fetch) 503.  Anything
else is logged with its traceback and answered with a generic 500 -- internal
text never reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import quote

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import datadir
from gateway.core.errors import ForgedRequest, InvalidEvent, TransientError, Unsupported
from gateway.http.hosts import AllowedHosts, HostGuard
from gateway.http.responses import error_response
from gateway.http.streams import StreamGuard
from gateway.status import StatusReport

if TYPE_CHECKING:  # pragma: no cover - typing only
    from channels.base import Channel

log = logging.getLogger(__name__)

WEBCHAT = "webchat"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""No platform's webhook payload comes near this; a larger body is refused with 413."""
_REASON_CHARS = 200


class MetricsSource(Protocol):
    def render(self) -> bytes: ...


class ServedGateway(Protocol):
    """What the HTTP app needs from the gateway (``gateway.app.Gateway`` provides it)."""

    @property
    def metrics(self) -> MetricsSource: ...

    @property
    def ready(self) -> bool:
        """True between a completed ``start()`` and the beginning of ``stop()``."""
        ...

    async def status(self) -> StatusReport: ...

    @property
    def store_failure(self) -> str | None:
        """Why the store's writes fail right now, or None."""
        ...

    def channel(self, name: str, account: str) -> Channel | None: ...

    def running_channels(self) -> Mapping[tuple[str, str], Channel]: ...


def build_app(gateway: ServedGateway) -> Starlette:
    config = getattr(gateway, "config", None)
    # Which data dir this gateway runs on, as a hash: `doctor` and `serve` tell "this data dir's own
    # gateway holds the port" from "another gateway does" with it (gateway.datadir.identity).
    here = {"data_dir_id": datadir.identity(config.data_dir)} if config is not None else {}

    async def healthz(request: Request) -> Response:
        if gateway.ready and (failure := gateway.store_failure) is not None:
            return JSONResponse({"ok": False, "reason": failure, **here}, status_code=503, headers={"Retry-After": "5"})
        if gateway.ready:
            return JSONResponse({"ok": True, **here})
        return JSONResponse({"ok": False, **here}, status_code=503, headers={"Retry-After": "1"})

    async def status(request: Request) -> Response:
        report = await gateway.status()
        return JSONResponse(report.model_dump(mode="json"))

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def webhook(request: Request) -> Response:
        name, account = request.path_params["channel"], request.path_params["account"]
        channel = gateway.channel(name, account)
        if channel is None:
            return error_response(404, f"no running channel account {name}/{account}")
        if (refused := disabled(gateway, name, account)) is not None:
            return refused
        if request.method == "POST":
            return await channel.handle_webhook(request)
        try:
            return await channel.verify_webhook(request)
        except Unsupported:  # most platforms only ever POST
            return error_response(405, f"{name} answers no GET on its webhook", {"Allow": "POST"})

    async def home(request: Request) -> Response:
        for name, account in gateway.running_channels():
            if name == WEBCHAT:
                return RedirectResponse(f"/channels/{WEBCHAT}/{quote(account, safe='')}/", status_code=307)
        return error_response(404, "no web chat account is running; see /status")

    routes = [
        Route("/", home),
        Route("/healthz", healthz),
        Route("/status", status),
        Route("/metrics", metrics),
        Route("/webhooks/{channel}/{account}", webhook, methods=["GET", "POST"]),
        Mount("/channels/{channel}/{account}", app=ChannelRoutes(gateway)),
    ]
    guards = [Middleware(InternalErrorGuard)]
    if config is not None:
        from gateway.http.admin import admin_routes

        brain = getattr(gateway, "brain", None)  # the Gateway's own brain; None with a plugged-in responder
        store = getattr(gateway, "store", None)  # the Gateway's store holds the console's users, sessions and API tokens
        routes += admin_routes(config, brain.memory if brain is not None else None, store)
        if store is not None:
            from gateway.console.pages import console_routes
            from gateway.console.services import ConsoleGateway

            # A gateway with a store is gateway.app.Gateway, which provides what the console's areas read
            # (mypy holds it to ConsoleGateway in gateway.app)
            routes += console_routes(config, store, cast(ConsoleGateway, gateway))
        http = config.http
        guards.append(Middleware(HostGuard, allowed=AllowedHosts.of(http.host, http.public_url, http.allowed_hosts)))
    load = getattr(gateway, "http_load", None)  # the Gateway's ledger of connections and streams (ADR 0021)
    stream_shares = [Middleware(StreamGuard, load=load)] if load is not None else []
    return Starlette(
        routes=routes,
        middleware=[*guards, *stream_shares, Middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)],
        exception_handlers={
            HTTPException: _http_error,
            ForgedRequest: _forged,
            InvalidEvent: _invalid,
            Unsupported: _unsupported,
            TransientError: _transient,
        },
    )


def disabled(gateway: ServedGateway, name: str, account: str) -> Response | None:
    """503 for an account an operator disabled (console, ADR 0036 addendum): a platform sends its webhook
    again later, so nothing is lost while it is off; the web chat page says it is unavailable.
    ``disabled_reason`` is the Gateway's; a test's stand-in without it disables nothing."""
    reason_of = getattr(gateway, "disabled_reason", None)
    reason = reason_of(name, account) if reason_of is not None else None
    if reason is None:
        return None
    return error_response(503, f"channel account {name}/{account} is off: {reason}", {"Retry-After": "60"})


class ChannelRoutes:
    """Dispatches ``/channels/{channel}/{account}/...`` to that running channel's own routes."""

    def __init__(self, gateway: ServedGateway) -> None:
        self._gateway = gateway
        self._routers: dict[tuple[str, str], tuple[Channel, Router]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope["path_params"]
        key = (params["channel"], params["account"])
        channel = self._gateway.channel(*key)
        if channel is None:
            self._routers.pop(key, None)
            raise HTTPException(404, f"no running channel account {key[0]}/{key[1]}")
        if (refused := disabled(self._gateway, *key)) is not None:
            await refused(scope, receive, send)
            return
        cached = self._routers.get(key)
        if cached is None or cached[0] is not channel:
            cached = (channel, Router(routes=channel.http_routes()))
            self._routers[key] = cached
        await cached[1](scope, receive, send)


class InternalErrorGuard:
    """Turns an unexpected exception into a logged traceback and a generic 500.

    Starlette's own last-resort handler re-raises after answering, which prints
    a second traceback without our context; this one answers and stops.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("http request failed method=%s path=%s", scope.get("method"), scope.get("path"))
            if not started:  # once a response began there is nothing left to say; the server closes it
                await error_response(500, "internal error")(scope, receive, send)


class BodyLimit:
    """Refuses request bodies over ``max_bytes`` with a JSON 413, declared or streamed.

    (Starlette's own limit answers in plain text and signals through the stack
    with private exceptions; this keeps every error body the same shape.)
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.message = f"the request body is larger than {max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, self.message)(scope, receive, send)
            return
        size = 0

        async def limited_receive() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b""))
            if size > self.max_bytes:  # raised inside the endpoint's read, answered by _http_error
                raise HTTPException(413, self.message)
            return message

        await self.app(scope, limited_receive, send)


def _where(request: Request) -> str:
    params = request.path_params
    return f"channel={params.get('channel', '-')} account={params.get('account', '-')} path={request.url.path}"


def _short(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code in (204, 304):
        return Response(status_code=error.status_code, headers=error.headers)
    return error_response(error.status_code, error.detail, error.headers)


async def _forged(request: Request, error: Exception) -> Response:
    assert isinstance(error, ForgedRequest)
    log.warning("webhook refused reason=forged check=%s %s detail=%s", error.reason, _where(request), _short(error))
    if error.reason == "bad_token":
        return error_response(403, "verify token does not match")
    return error_response(401, "request signature does not verify")


async def _transient(request: Request, error: Exception) -> Response:
    log.warning("webhook not taken reason=transient %s detail=%s", _where(request), _short(error))
    return error_response(503, "try again shortly", {"Retry-After": "5"})


async def _invalid(request: Request, error: Exception) -> Response:
    log.info("webhook event dropped reason=invalid %s detail=%s", _where(request), _short(error))
    return error_response(400, f"invalid event: {_short(error)}")


async def _unsupported(request: Request, error: Exception) -> Response:
    log.info("request refused reason=unsupported %s", _where(request))
    detail = getattr(error, "detail", None) or _short(error)
    return error_response(404, detail)
