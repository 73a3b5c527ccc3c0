"""uvicorn's h11 protocol with the two guards uvicorn lacks: a header deadline and a connection cap.

uvicorn times out only an *idle keep-alive* connection (``timeout_keep_alive``,
armed after a response).  A connection that sends half a request line, or
headers one byte a minute, is held for ever -- each one a file descriptor.  So
every connection here gets ``header_timeout_s`` from the moment it opens (or,
on keep-alive, from the first byte of its next request) to complete its
request line and headers; the deadline is not renewed by more bytes, so a slow
drip does not extend it.  Once h11 has the whole request the deadline is off:
bodies and responses run as long as they need (bodies are capped in size by
the app).

uvicorn's own ``limit_concurrency`` is not used for the cap: it answers in
plain text, logs a warning per refused request (the log flood a connection
flood causes), counts nothing we can report, and refuses requests on every
connection -- established keep-alive ones too -- while attackers hold the
count up.  Here a connection accepted beyond ``max_connections`` has its
request answered with the app's JSON 503 and ``Connection: close`` through
uvicorn's normal response path; connections already held keep working.

ADR 0021 records why this is a subclass and not another server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.http.limits import HttpLoad

REFUSED_BODY = b'{"error":"the server holds its limit of open connections; try again shortly"}'


def guarded_protocol(load: HttpLoad) -> type[H11Protocol]:
    """An :class:`H11Protocol` subclass bound to ``load`` (uvicorn builds one instance per connection)."""

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not load.connection_opened():
                self.app = _refuse_connection(load, _name(self.client))
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._header_deadline is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first bytes of a keep-alive connection's next request
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the request line and headers are in

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            load.connection_closed()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_deadline = self.loop.call_later(load.config.header_timeout_s, self._headers_overdue)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _headers_overdue(self) -> None:
            self._header_deadline = None
            if not self.transport.is_closing():
                load.header_timed_out(_name(self.client))
                self.transport.close()

    return GuardedH11Protocol


def _name(client: tuple[str, int] | None) -> str:
    return client[0] if client else "-"


def _refuse_connection(load: HttpLoad, client: str) -> ASGIApp:
    """The ASGI app that answers every request of an over-the-cap connection."""

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        load.connection_refused(client)
        await send({
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(REFUSED_BODY)).encode()),
                (b"connection", b"close"),
                (b"retry-after", b"5"),
            ],
        })
        await send({"type": "http.response.body", "body": REFUSED_BODY})

    return refuse
