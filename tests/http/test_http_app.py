"""The gateway's ASGI app against a stand-in gateway: health, status, metrics, webhooks, channel mounts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from channels.base import Channel, ChannelContext
from gateway.core.channel import Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.errors import ForgedRequest, InvalidEvent, PeerUnavailable, Unsupported
from gateway.core.messages import AccountId, Address, Referrer, RenderedPart, SentMessage
from gateway.http.app import build_app
from gateway.metrics import Metrics
from gateway.status import AccountStatus, StatusReport
from tests.fakes import MemoryCursors, RecordingSink

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
Handler = Callable[[Request], Awaitable[Response]]




def context(account: str = "main") -> ChannelContext:
    return ChannelContext(AccountId(account), AccountConfig(), RecordingSink(), MemoryCursors(), Path("."))


class HookChannel(Channel):
    """A channel whose webhook and routes are whatever the test hands it."""

    name = "hooks"

    def __init__(self, ctx: ChannelContext, handler: Handler | None = None, routes: list[BaseRoute] | None = None,
                 get: Handler | None = None) -> None:
        super().__init__(ctx)
        self.handler = handler
        self.routes = routes or []
        self.get = get

    async def run(self, heartbeat: Heartbeat) -> None:
        await asyncio.Event().wait()

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        raise Unsupported(self.name, "this test channel does not send")

    async def handle_webhook(self, request: Request) -> Response:
        if self.handler is None:
            return await super().handle_webhook(request)
        return await self.handler(request)

    async def verify_webhook(self, request: Request) -> Response:
        if self.get is None:
            return await super().verify_webhook(request)
        return await self.get(request)

    def http_routes(self) -> list[BaseRoute]:
        return list(self.routes)


class FakeGateway:
    """Implements gateway.http.app.ServedGateway with plain state the tests set."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.ready = False
        self.store_failure: str | None = None
        self.channels: dict[tuple[str, str], Channel] = {}
        self.off: dict[tuple[str, str], str] = {}
        """Accounts an operator disabled, and why (the console's switch)."""

    def disabled_reason(self, name: str, account: str) -> str | None:
        return self.off.get((name, account))

    async def status(self) -> StatusReport:
        return StatusReport(
            version="0.1.0",
            started_at=STARTED,
            partners=["study-buddy"],
            accounts=[AccountStatus(channel="hooks", account="main", state="running", restarts=1)],
            unavailable=[],
            responder="echo",
        )

    def channel(self, name: str, account: str) -> Channel | None:
        return self.channels.get((name, account))

    def running_channels(self) -> dict[tuple[str, str], Channel]:
        return dict(self.channels)

    def add(self, name: str, account: str, channel: Channel) -> None:
        self.channels[(name, account)] = channel


@pytest.fixture
def gateway() -> FakeGateway:
    return FakeGateway()


@pytest.fixture
async def client(gateway: FakeGateway):
    transport = httpx.ASGITransport(app=build_app(gateway))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
        yield http


def hook(gateway: FakeGateway, handler: Handler | None) -> HookChannel:
    channel = HookChannel(context(), handler)
    gateway.add("hooks", "main", channel)
    return channel


async def test_healthz_is_503_until_ready_and_200_after(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    starting = await client.get("/healthz")
    assert starting.status_code == 503
    assert starting.json() == {"ok": False}
    gateway.ready = True
    assert (await client.get("/healthz")).json() == {"ok": True}
    gateway.ready = False  # stopping
    assert (await client.get("/healthz")).status_code == 503


async def test_status_is_the_report_as_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/status")
    assert response.status_code == 200
    body = response.json()
    assert body["started_at"] == "2025-01-02T03:04:05Z"
    assert body["partners"] == ["study-buddy"]
    assert body["accounts"][0] == {
        "channel": "hooks", "account": "main", "state": "running", "reason": "", "since": None, "restarts": 1,
        "last_event_at": None, "inbound_pending": 0, "inbound_held": 0, "outbox_open": 0,
        "undelivered": 0, "last_undelivered": "",
    }


async def test_metrics_are_prometheus_text(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    gateway.metrics.messages_in.labels("webchat", "default").inc(3)
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    assert 'partners_messages_in_total{account="default",channel="webchat"} 3.0' in response.text


async def test_webhook_reaches_the_channel_account(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        return JSONResponse({"got": (await request.json())["n"], "account": request.path_params["account"]})

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", json={"n": 7})
    assert response.status_code == 200
    assert response.json() == {"got": 7, "account": "main"}


async def test_a_disabled_accounts_webhook_is_503_to_be_sent_again_and_never_reaches_it(
        client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    reached: list[int] = []

    async def handler(request: Request) -> Response:
        reached.append((await request.json())["n"])
        return JSONResponse({"ok": True})

    hook(gateway, handler)
    gateway.off[("hooks", "main")] = "disabled in the console by ada"
    for method in ("POST", "GET"):
        refused = await client.request(method, "/webhooks/hooks/main", json={"n": 1})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "60"
        assert "disabled in the console by ada" in refused.json()["error"]
    assert reached == []

    del gateway.off[("hooks", "main")]  # enabled again: the platform's retry gets through
    assert (await client.post("/webhooks/hooks/main", json={"n": 2})).status_code == 200
    assert reached == [2]


@pytest.mark.parametrize("path", ["/webhooks/nope/main", "/webhooks/hooks/other"])
async def test_webhook_for_an_unknown_channel_account_is_404(client: httpx.AsyncClient, gateway: FakeGateway, path: str) -> None:
    hook(gateway, None)
    response = await client.post(path, json={})
    assert response.status_code == 404
    assert "no running channel account" in response.json()["error"]


async def test_forged_webhook_is_401_without_details(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        raise ForgedRequest("expected hmac 1f2e3d")

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 401
    assert response.json() == {"error": "request signature does not verify"}


async def test_a_get_on_a_webhook_reaches_the_channels_verify_hook(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def challenge(request: Request) -> Response:
        return PlainTextResponse(request.query_params["hub.challenge"])

    hook(gateway, None).get = challenge
    response = await client.get("/webhooks/hooks/main", params={"hub.challenge": "1158201444"})
    assert response.status_code == 200 and response.text == "1158201444"


async def test_a_get_on_a_channel_without_a_challenge_is_405(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    hook(gateway, None)
    response = await client.get("/webhooks/hooks/main")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json() == {"error": "hooks answers no GET on its webhook"}


async def test_a_wrong_verify_token_is_403_and_the_log_names_the_check(
    client: httpx.AsyncClient, gateway: FakeGateway, caplog: pytest.LogCaptureFixture,
) -> None:
    async def refuse(request: Request) -> Response:
        raise ForgedRequest("hub.verify_token is not this account's verify token", reason="bad_token")

    hook(gateway, None).get = refuse
    with caplog.at_level(logging.WARNING, logger="gateway.http.app"):
        response = await client.get("/webhooks/hooks/main")
    assert response.status_code == 403 and response.json() == {"error": "verify token does not match"}
    assert "check=bad_token" in caplog.text and "Traceback" not in caplog.text


async def test_a_stale_signature_is_401_with_the_reason_in_the_log_only(
    client: httpx.AsyncClient, gateway: FakeGateway, caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(request: Request) -> Response:
        raise ForgedRequest("signed 900 s from now, outside the 300 s window", reason="stale")

    hook(gateway, handler)
    with caplog.at_level(logging.WARNING, logger="gateway.http.app"):
        response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 401 and response.json() == {"error": "request signature does not verify"}
    assert "check=stale" in caplog.text


async def test_a_platform_the_webhook_needs_and_cannot_reach_is_503(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        raise PeerUnavailable("msteams", "cannot fetch the key set")

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 503 and response.headers["retry-after"] == "5"


async def test_invalid_event_is_400_with_the_reason(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        raise InvalidEvent("update has no message field")

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 400
    assert response.json() == {"error": "invalid event: update has no message field"}


async def test_channel_without_webhooks_is_404(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    hook(gateway, None)  # the base class raises Unsupported
    response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 404
    assert response.json() == {"error": "this channel has no webhook"}


async def test_unexpected_error_is_a_generic_500_and_logged(
    client: httpx.AsyncClient, gateway: FakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(request: Request) -> Response:
        raise KeyError("db password is hunter2")

    hook(gateway, handler)
    with caplog.at_level(logging.ERROR, logger="gateway.http.app"):
        response = await client.post("/webhooks/hooks/main", content=b"{}")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert "hunter2" not in response.text
    record = next(r for r in caplog.records if r.name == "gateway.http.app")
    assert "path=/webhooks/hooks/main" in record.getMessage()
    assert record.exc_info is not None and "hunter2" in str(record.exc_info[1])


async def test_oversized_body_is_413(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        return JSONResponse({"size": len(await request.body())})

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", content=b"x" * (4 * 1024 * 1024 + 1))
    assert response.status_code == 413
    assert "error" in response.json()


async def test_channel_routes_are_mounted_under_its_name_and_account(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def hello(request: Request) -> Response:
        return PlainTextResponse(f"hello from {request.url.path}")

    gateway.add("hooks", "main", HookChannel(context(), routes=[Route("/hello", hello)]))
    response = await client.get("/channels/hooks/main/hello")
    assert response.status_code == 200
    assert response.text == "hello from /channels/hooks/main/hello"
    missing = await client.get("/channels/hooks/main/nothing-here")
    assert missing.status_code == 404
    assert missing.json() == {"error": "Not Found"}
    slashless = await client.get("/channels/hooks/main")  # a page's relative links need the slash
    assert slashless.status_code == 307
    assert slashless.headers["location"] == "http://gateway.test/channels/hooks/main/"
    gone = await client.get("/channels/hooks/other/hello")
    assert gone.status_code == 404
    assert "no running channel account" in gone.json()["error"]


async def test_a_replaced_channel_serves_its_own_routes(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    def answering(text: str) -> list[BaseRoute]:
        async def endpoint(request: Request) -> Response:
            return PlainTextResponse(text)

        return [Route("/", endpoint)]

    gateway.add("hooks", "main", HookChannel(context(), routes=answering("first")))
    assert (await client.get("/channels/hooks/main/")).text == "first"
    gateway.add("hooks", "main", HookChannel(context(), routes=answering("restarted")))  # the supervisor rebuilt it
    assert (await client.get("/channels/hooks/main/")).text == "restarted"


async def test_home_redirects_to_the_first_webchat_page(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    nothing = await client.get("/")
    assert nothing.status_code == 404
    gateway.add("hooks", "main", HookChannel(context()))
    gateway.add("webchat", "class-3b", HookChannel(context("class-3b")))
    gateway.add("webchat", "default", HookChannel(context("default")))
    response = await client.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == "/channels/webchat/class-3b/"


async def test_oversized_streamed_body_is_413(client: httpx.AsyncClient, gateway: FakeGateway) -> None:
    async def handler(request: Request) -> Response:
        return JSONResponse({"size": len(await request.body())})

    async def chunks():
        for _ in range(5):
            yield b"x" * (1024 * 1024)

    hook(gateway, handler)
    response = await client.post("/webhooks/hooks/main", content=chunks())  # chunked: no Content-Length
    assert response.status_code == 413
    assert response.json() == {"error": "the request body is larger than 4194304 bytes"}
