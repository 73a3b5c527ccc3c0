"""serve_http: a real socket, the real port for port 0, clean shutdown on cancel, no side effects."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import suppress

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.http.server import serve_http
from tests.waits import HANG_S


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello")


async def endless(request: Request) -> Response:
    async def forever() -> AsyncIterator[bytes]:
        while True:
            yield b"tick\n"
            await asyncio.sleep(0.05)

    return StreamingResponse(forever(), media_type="text/plain")


APP = Starlette(routes=[Route("/", hello), Route("/endless", endless)])


async def start(port: int = 0, **kwargs: float) -> tuple[asyncio.Task[None], str]:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_http(APP, "127.0.0.1", port, on_ready=ready.set_result, **kwargs))
    return task, await asyncio.wait_for(ready, HANG_S)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


async def test_port_zero_reports_the_real_url_and_serves() -> None:
    task, url = await start()
    try:
        host, port = url.removeprefix("http://").split(":")
        assert host == "127.0.0.1" and int(port) > 0
        async with httpx.AsyncClient(trust_env=False) as http:
            assert (await http.get(url + "/")).text == "hello"
    finally:
        await stop(task)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(trust_env=False) as http:
            await http.get(url + "/")


async def test_cancel_ends_open_streams_within_the_shutdown_timeout() -> None:
    task, url = await start(shutdown_timeout=0.3)
    async with httpx.AsyncClient(trust_env=False) as http:
        async with http.stream("GET", url + "/endless") as response:
            assert await response.aiter_lines().__anext__() == "tick"
            await asyncio.wait_for(stop(task), HANG_S)  # the stream is cut, not waited for
    assert task.cancelled()


async def test_a_busy_port_raises_oserror_naming_it() -> None:
    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve_http(APP, "127.0.0.1", port)
    finally:
        holder.close()


async def test_signal_handlers_stay_the_gateways() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    task, _ = await start()
    try:
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    finally:
        await stop(task)


def test_importing_the_http_package_loads_no_web_stack() -> None:
    code = "import sys, gateway.http, gateway.http.server; print(sorted({'uvicorn', 'starlette'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


async def test_an_address_not_on_this_machine_raises_oserror_naming_it() -> None:
    with pytest.raises(OSError, match="cannot listen on 192.0.2.1:8780"):  # TEST-NET-1: never local, no traffic
        await serve_http(APP, "192.0.2.1", 8780)
