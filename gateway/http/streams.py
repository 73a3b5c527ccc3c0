"""Event streams get a share of the server: in total, and per client address.

An event stream (a ``text/event-stream`` response: the web chat's feed, or any
channel's) holds a connection and a task for as long as the page stays open,
so a few clients could otherwise take every connection the server has.  The
guard takes a slot in :class:`~gateway.http.limits.HttpLoad` when such a
response *starts* -- so it covers every route that streams, without each one
asking -- and gives it back when the response ends.  Refused, the client gets
a short JSON error instead: 503 when all ``max_streams`` are taken, 429 when
its own address holds ``max_streams_per_address``; the stream's body is never
started.

The address is the ASGI ``client``: the peer's, or behind a reverse proxy on a
trusted address (uvicorn's ``forwarded_allow_ips``, loopback by default) the
one its ``X-Forwarded-For`` names.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.limits import HttpLoad, StreamRefusal
from gateway.http.responses import error_response

EVENT_STREAM = "text/event-stream"
RETRY_AFTER_S = 10


class _Refused(Exception):
    """Raised out of ``send`` to stop an app whose stream was refused; caught by :class:`StreamGuard`."""


class StreamGuard:
    def __init__(self, app: ASGIApp, load: HttpLoad) -> None:
        self.app = app
        self.load = load

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else "-"
        held = False

        async def guarded_send(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and _is_event_stream(message):
                refusal = self.load.take_stream(address)
                if refusal is not None:
                    await self._refusal(refusal)(scope, receive, send)
                    raise _Refused
                held = True
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except _Refused:
            pass
        finally:
            if held:
                self.load.release_stream(address)

    def _refusal(self, refusal: StreamRefusal) -> ASGIApp:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if refusal is StreamRefusal.ADDRESS:
            limit = self.load.config.max_streams_per_address
            return error_response(429, f"too many event streams from your address (limit {limit}); "
                                       "close other chat tabs or try again shortly", headers)
        return error_response(503, f"the server holds its limit of {self.load.config.max_streams} event streams; "
                                   "try again shortly", headers)


def _is_event_stream(message: Message) -> bool:
    content_type = Headers(raw=message.get("headers", [])).get("content-type", "")
    return content_type.split(";")[0].strip().lower() == EVENT_STREAM
