"""Connections are bounded: what one peer can hold, and what the server still answers meanwhile.

The threat (issue 10, item 13): 300 half-sent requests held for 70 s ran the
gateway out of file descriptors; ``/healthz`` stopped answering and a channel
account went to ``error``.  These tests play that against a real ``partners
serve`` process over real sockets: half-open requests are cut at the header
deadline (a slow drip does not extend it, a keep-alive connection's next
request has one too, a started stream never does), ``/healthz`` answers while hundreds
are held, a server at its connection cap answers a fresh request 503 at once,
event streams get their share in total and per address, the web chat feeds
are bounded in memory, and ``serve`` raises its soft open-files limit.

Waits only bound hangs (``tests/waits.py``); nothing here measures time.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from channels.base import ChannelContext
from channels.webchat import WebchatChannel, WebchatConfig
from channels.webchat.feed import SessionFeeds
from channels.webchat.identity import COOKIE
from gateway.cli.status import format_status
from gateway.configfile import parse_config
from gateway.core.config import HttpConfig
from gateway.core.errors import ConfigError
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind, Referrer, RenderedPart
from gateway.http.limits import HttpLoad
from gateway.http.server import serve_http
from gateway.status import HttpStatus, StatusReport
from tests.fakes import MemoryCursors, RecordingSink
from tests.http.test_server import APP as TICKING_APP
from tests.waits import HANG_S, HTTP_S, tries

ROOT = Path(__file__).resolve().parents[2]
PARTIAL_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Never-Finished: "
EVENTS = "/channels/webchat/default/api/events"


# --------------------------------------------------------------------------- a real `partners serve`


@dataclass
class Serving:
    url: str
    pid: int


@asynccontextmanager
async def serving(tmp_path: Path, *, soft_open_files: int | None = None, **http: object) -> AsyncIterator[Serving]:
    """``partners serve`` with a web chat account and these ``http`` settings."""
    config = tmp_path / "partners.yaml"
    config.write_text(yaml.safe_dump({
        "data_dir": "data",
        "http": {"host": "127.0.0.1", "port": 0, **http},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "channels": {"webchat": {"default": {}}},
        "bindings": [{"partner": "tutor", "channel": "webchat"}],
    }))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "gateway.log").open("wb") as log:  # the child keeps its own copy of the descriptor
        process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("partners")), "--config", str(config), "serve", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=log, env=env, cwd=tmp_path,
            preexec_fn=_soft_limit(soft_open_files) if soft_open_files else None,
        )
    try:
        yield Serving(await _url_from(process, tmp_path), process.pid)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), HANG_S)
            except TimeoutError:
                process.kill()
                await process.wait()


def _soft_limit(soft: int) -> Callable[[], None]:
    def lower() -> None:  # runs in the child before exec: the gateway starts with this soft limit
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return lower


async def _url_from(process: asyncio.subprocess.Process, tmp_path: Path) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(HANG_S):
        while line := (await process.stdout.readline()).decode():
            for word in line.split():
                if word.startswith("http://127.0.0.1:"):
                    asyncio.get_running_loop().create_task(process.stdout.read())  # keep the pipe from filling
                    return word.rstrip("/.")
    await process.wait()
    raise AssertionError(f"serve exited with {process.returncode}:\n{(tmp_path / 'gateway.log').read_text()[-3000:]}")


async def get(url: str, **headers: str) -> httpx.Response:
    """One request on a connection of its own (a pooled one would dodge the connection cap)."""
    async with httpx.AsyncClient(trust_env=False, timeout=HTTP_S) as http:
        return await http.get(url, headers=headers)


async def http_status(url: str) -> dict[str, Any]:
    response = await get(url + "/status")
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()["http"]
    return report


async def half_open(url: str, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections that each send the start of a request and never finish its headers."""
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(count):
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), HANG_S)
        writer.write(PARTIAL_REQUEST)
        await writer.drain()
        held.append((reader, writer))
    return held


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server closed the connection without answering (EOF or reset, no bytes)."""
    try:
        return await asyncio.wait_for(reader.read(), HANG_S) == b""
    except ConnectionResetError:
        return True


def close_all(held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, writer in held:
        writer.close()


# --------------------------------------------------------------------------- half-open requests


async def test_healthz_answers_while_300_half_open_requests_are_held(tmp_path: Path) -> None:
    async with serving(tmp_path, header_timeout_s=600) as served:
        url = served.url
        held = await half_open(url, 300)
        try:
            for _ in tries(0.2):  # accepted by the server (the kernel completes the handshakes first)
                if (await http_status(url))["connections"] >= 301:
                    break
                await asyncio.sleep(0.2)
            assert (await http_status(url))["connections"] >= 301
            health = await get(url + "/healthz")
            assert health.status_code == 200 and health.json()["ok"] is True
        finally:
            close_all(held)


async def test_half_open_requests_are_closed_at_the_header_deadline_even_when_they_drip(tmp_path: Path) -> None:
    async with serving(tmp_path) as served:  # the default deadline, so this holds for an untuned config
        url = served.url
        held = await half_open(url, 300)
        drip_reader, drip_writer = (await half_open(url, 1))[0]

        async def drip() -> None:  # one more header byte every 0.1 s: more bytes must not extend the deadline
            with suppress(ConnectionError):
                while not drip_writer.is_closing():
                    drip_writer.write(b"x")
                    await drip_writer.drain()
                    await asyncio.sleep(0.1)

        dripping = asyncio.create_task(drip())
        try:
            assert all(await asyncio.gather(*(closed_by_server(reader) for reader, _ in held)))
            assert await closed_by_server(drip_reader)
            report = await http_status(url)
            assert report["header_timeouts"] >= 301
            assert report["connections"] < 301  # the server let go of them
            assert (await get(url + "/healthz")).status_code == 200
        finally:
            dripping.cancel()
            close_all([*held, (drip_reader, drip_writer)])


async def test_a_full_server_answers_a_fresh_request_503_at_once_and_recovers(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections=20, max_streams=10, max_streams_per_address=5, header_timeout_s=600) as served:
        url = served.url
        held = await half_open(url, 20)
        try:
            for _ in tries(0.2):  # each poll is a fresh connection, answered (never hanging) 200 or 503
                refused = await get(url + "/healthz")
                if refused.status_code == 503:
                    break
                assert refused.status_code == 200
                await asyncio.sleep(0.2)
            assert refused.status_code == 503
            assert refused.headers["connection"] == "close"
            assert "limit of open connections" in refused.json()["error"]
        finally:
            close_all(held)
        for _ in tries(0.2):
            if (await get(url + "/healthz")).status_code == 200:
                break
            await asyncio.sleep(0.2)
        report = await http_status(url)
        assert report["refused_connections"] >= 1
        assert report["max_connections"] == 20
        metrics = (await get(url + "/metrics")).text
        assert 'partners_http_limit{limit="max_connections"} 20.0' in metrics
        assert 'partners_http_refused_total{limit="max_connections"}' in metrics


async def test_the_deadline_covers_the_next_request_on_keep_alive_but_never_a_started_stream() -> None:
    app = TICKING_APP  # "/" says hello, "/endless" ticks forever
    load = HttpLoad(HttpConfig(header_timeout_s=0.3))
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(app, "127.0.0.1", 0, on_ready=ready.set_result, load=load))
    url = await asyncio.wait_for(ready, HANG_S)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=HTTP_S) as http, http.stream("GET", url + "/endless") as streaming:
            lines = streaming.aiter_lines()
            for _ in range(20):  # a second of ticks, well past the deadline: headers were in, so it runs on
                assert await anext(lines) == "tick"
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), HANG_S)
        writer.write(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
        answered = await asyncio.wait_for(reader.readuntil(b"hello"), HANG_S)
        assert answered.startswith(b"HTTP/1.1 200")
        writer.write(PARTIAL_REQUEST)  # the next request on the same connection, never finished
        await writer.drain()
        assert await closed_by_server(reader)  # it met a deadline of its own
        writer.close()
        assert load.header_timeouts == 1
    finally:
        server.cancel()
        with suppress(asyncio.CancelledError):
            await server


# --------------------------------------------------------------------------- event streams


@asynccontextmanager
async def stream(stack: AsyncExitStack, url: str, session: str, address: str) -> AsyncIterator[httpx.Response]:
    http = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, timeout=HTTP_S))
    # The gateway sits "behind a proxy" here: uvicorn trusts X-Forwarded-For from 127.0.0.1.
    cookie = f"{COOKIE}=stream-session-{session:0>12}"  # the session rides in its cookie, 22-100 characters
    request = http.build_request("GET", url + EVENTS, headers={"X-Forwarded-For": address, "Cookie": cookie})
    response = await http.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


async def open_stream(stack: AsyncExitStack, url: str, session: str, address: str) -> httpx.Response:
    response = await stack.enter_async_context(stream(stack, url, session, address))
    if response.status_code != 200:
        await response.aread()
    return response


async def test_event_streams_are_capped_per_address_and_in_total_with_clear_errors(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections=50, max_streams=3, max_streams_per_address=2) as served:
        url = served.url
        async with AsyncExitStack() as stack:
            first = [await open_stream(stack, url, f"s{i}", "10.0.0.1") for i in range(2)]
            assert [r.status_code for r in first] == [200, 200]
            over_address = await open_stream(stack, url, "s3", "10.0.0.1")
            assert over_address.status_code == 429
            assert over_address.json() == {"error": "too many event streams from your address (limit 2); "
                                                    "close other chat tabs or try again shortly"}
            assert over_address.headers["retry-after"]
            other = await open_stream(stack, url, "s4", "10.0.0.2")
            assert other.status_code == 200
            over_total = await open_stream(stack, url, "s5", "10.0.0.3")
            assert over_total.status_code == 503
            assert over_total.json() == {"error": "the server holds its limit of 3 event streams; try again shortly"}
            report = await http_status(url)
            assert (report["streams"], report["refused_streams"]) == (3, 2)
            assert (await get(url + "/healthz")).status_code == 200  # streams never crowd out the rest
            await first[0].aclose()
            for _ in tries(0.2):  # the slot comes back once the server sees the stream end
                again = await open_stream(stack, url, "s6", "10.0.0.1")
                if again.status_code == 200:
                    break
                await again.aclose()
                await asyncio.sleep(0.2)
            assert again.status_code == 200


# --------------------------------------------------------------------------- the open-files limit


async def test_serve_raises_a_low_soft_open_files_limit_and_reports_it(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = 65536 if hard == resource.RLIM_INFINITY else hard
    assert expected > 128, "this machine's hard limit leaves nothing to raise"
    async with serving(tmp_path, soft_open_files=128) as served:
        url = served.url
        assert _soft_open_files(served.pid) == expected  # what the kernel says, not only what the gateway reports
        report = await http_status(url)
        assert report["open_files_limit"] == expected
        assert f'partners_http_limit{{limit="open_files"}} {float(expected)}' in (await get(url + "/metrics")).text
    assert "open files limit raised soft=128->" in (tmp_path / "gateway.log").read_text()


def test_partners_status_prints_the_http_numbers() -> None:
    report = StatusReport(
        version="0.1.0", started_at=datetime(2025, 3, 1, tzinfo=UTC), partners=[], accounts=[], unavailable=[],
        responder="notes",
        http=HttpStatus(connections=7, max_connections=1000, streams=2, max_streams=500, max_streams_per_address=100,
                        header_timeout_s=10, refused_connections=3, refused_streams=1, header_timeouts=300,
                        open_files_limit=20000),
    )
    assert format_status(report, "http://127.0.0.1:8780").splitlines()[-1] == (
        "http: 7 of 1000 connections, 2 of 500 streams (100 per address); refused 3 connections, 1 streams; "
        "300 header timeouts (10 s); open files limit 20000"
    )


# --------------------------------------------------------------------------- limits are validated


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ({"max_streams": 2000}, "max_streams (2000) must not exceed max_connections (1000)"),
        ({"max_streams_per_address": 600}, "max_streams_per_address (600) must not exceed max_streams (500)"),
        ({"header_timeout_s": 0}, "header_timeout_s: Input should be greater than 0"),
        ({"max_connections": 0}, "max_connections: Input should be greater than or equal to 1"),
    ],
)
def test_inconsistent_limits_are_one_clear_config_error(http: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"http": http}, source="partners.yaml")
    assert message in str(raised.value)
    assert "Traceback" not in str(raised.value)


# --------------------------------------------------------------------------- web chat feeds in memory


def test_a_long_streamed_reply_does_not_grow_a_backlog_past_its_bytes() -> None:
    feeds = SessionFeeds(backlog=200, backlog_bytes=64 * 1024)
    question = feeds.publish("s", "message", {"id": "earlier", "html": "<p>the earlier answer</p>", "final": True},
                             replaces="earlier")
    for edit in range(1000):  # every preview edit carries the whole text so far
        text = "<p>" + "word " * (10 * edit) + "</p>"
        feeds.publish("s", "message", {"id": "long", "html": text, "final": False}, replaces="long")
    feed = feeds.feed("s")
    assert feed.size <= 64 * 1024 or len(feed.events) == 1
    kept = [json.loads(e.encode().split(b"data: ", 1)[1])["id"] for e in feed.events]
    assert question in feed.events  # superseded copies went first, not the rest of the conversation
    assert kept[-1] == "long" and kept.count("long") >= 1


def test_distinct_events_are_trimmed_oldest_first_to_the_bytes_budget_keeping_the_newest() -> None:
    feeds = SessionFeeds(backlog=10_000, backlog_bytes=16 * 1024)
    for i in range(500):
        feeds.publish("s", "message", {"id": f"m{i}", "html": "x" * 1000, "final": True}, replaces=f"m{i}")
    huge = feeds.publish("s", "message", {"id": "huge", "html": "y" * 100_000, "final": True}, replaces="huge")
    feed = feeds.feed("s")
    assert list(feed.events) == [huge]  # the newest always stays, whatever its size
    assert feed.size == len(huge.encode())


async def test_sessions_held_in_memory_are_capped_by_config(tmp_path: Path) -> None:
    config = WebchatConfig.model_validate({"max_sessions": 3, "backlog_bytes": 8192})
    channel = WebchatChannel(ChannelContext(AccountId("default"), config, RecordingSink(), MemoryCursors(), tmp_path))
    for i in range(50):
        target = Address(channel=ChannelName("webchat"), account=AccountId("default"),
                         conversation=Conversation(chat=ChatId(f"learner-{i}"), kind=ConversationKind.DIRECT))
        await channel.send(target, RenderedPart(index=0, text="<p>" + "z" * 20_000 + "</p>"),
                           referrer=Referrer(), idempotency_key=f"k{i}")
    assert len(channel.feeds) == 3
    assert channel.feeds.size <= 3 * 21_000


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError(f"no open files limit in /proc/{pid}/limits")
