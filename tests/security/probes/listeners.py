"""Tiny HTTP listeners on loopback addresses: a stub "public" site that redirects, and canaries that must stay untouched.

``fetch_page`` refuses every loopback address, so a stub site on loopback is
itself internal.  The suites keep that honest: the stub listens on its own
address (127.0.0.3) and only that one /32 is allowed; the canaries listen on the
addresses an attacker would aim at (127.0.0.1, ::1), which stay refused.  A
canary that records a request is a server-side request forgery that got
through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

CANARY_BODY = b"INTERNAL-ONLY canary page"


@dataclass
class Listener:
    """One HTTP/1.1 listener: ``/redirect?to=URL`` answers 302 to URL, anything else the canary page."""

    host: str
    port: int = 0
    requests: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None

    def url(self, path: str = "/") -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}{path}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            target = head.split(" ", 2)[1]
            self.requests.append(target)
            parts = urlsplit(target)
            if parts.path == "/redirect":
                status, extra, body = "302 Found", f"Location: {parse_qs(parts.query)['to'][0]}\r\n", b""
            else:
                status, extra, body = "200 OK", "Content-Type: text/plain\r\n", CANARY_BODY
            writer.write(f"HTTP/1.1 {status}\r\n{extra}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def listening(host: str) -> AsyncIterator[Listener]:
    listener = Listener(host)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop()
