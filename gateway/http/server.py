"""Run the gateway's ASGI app with uvicorn, inside the gateway's own event loop.

The gateway owns the process: its signals, its logging, its shutdown order.
So uvicorn runs embedded -- no lifespan, no signal handlers of its own, no
access log -- and stops when the task running :func:`serve_http` is cancelled.

We bind the listening socket ourselves: a port already in use then raises a
plain ``OSError`` here (uvicorn alone would call ``sys.exit``), and with port 0
the real port is known before anyone is told the URL.

Every connection goes through ``gateway.http.protocol``: uvicorn's h11
protocol plus a deadline for the request line and headers and the
``http.max_connections`` cap, counted in an :class:`HttpLoad`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

from gateway.core.config import HttpConfig
from gateway.http.limits import HttpLoad

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16 * 1024
"""A request line and headers larger than this are answered 400 (h11's own default, stated here)."""

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


async def serve_http(
    app: Any,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    shutdown_timeout: float = 5.0,
    load: HttpLoad | None = None,
    websockets: bool = False,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled, then shut down gracefully.

    ``on_ready(url)`` is called once the socket listens, with the real port when
    ``port`` is 0 (a wildcard host is reported as loopback, the address a browser
    on this machine can open).  Open connections get ``shutdown_timeout`` seconds
    to finish -- long-lived streams end sooner when their channel closes.
    ``load`` carries the limits and counts what is held (default limits when none is given).
    ``websockets`` lets a channel's websocket route upgrade (NapCat's reverse websocket); an upgraded
    connection leaves the HTTP count, so it is on only when such an account is configured.
    """
    import uvicorn  # deferred: importing uvicorn costs start-up time every CLI command would pay

    from gateway.http.protocol import guarded_protocol  # imports uvicorn too

    load = load if load is not None else HttpLoad(HttpConfig())

    sock = _bind(host, port)
    url = _url_of(sock)

    class EmbeddedServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # signals belong to the gateway process, which cancels us

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                log.info("http listening url=%s", url)
                if on_ready is not None:
                    on_ready(url)

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        # uvicorn annotates an int, but only hands the value to asyncio.wait_for, which takes seconds as a float
        timeout_graceful_shutdown=shutdown_timeout,  # type: ignore[arg-type]
        http=guarded_protocol(load),
        ws="websockets-sansio" if websockets else "none",  # an upgraded connection would leave the count
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    server = EmbeddedServer(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        server.should_exit = True
        await task
        log.info("http stopped url=%s", url)
        raise
    finally:
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address, family=family)
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror}") from error
    # Accepted connections inherit this on Linux.  Without it Nagle's algorithm holds small
    # keep-alive responses back ~40 ms -- more than a platform's whole webhook budget allows for.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    host = _WILDCARDS.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"
