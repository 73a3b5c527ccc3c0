"""The kit's pieces together, through the gateway's real HTTP app: verify, accept, then answer.

A small channel built only from the kit (Slack's v0 signature, a replay memory, the ack clock)
is served by ``build_app``; signed requests reach it over httpx.  It shows the pieces fit: a
replay is refused, a failed accept answers 500 and lets the platform's retry of the very same
signed request through, and every refusal is a short JSON body, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from channels._kit.ack import AckClock
from channels._kit.replay import ReplayMemory
from channels._kit.signatures import SLACK_V0, verify_hmac
from channels.base import Channel, ChannelContext
from gateway.core.capabilities import capabilities_of
from gateway.core.channel import Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.errors import Unsupported
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Referrer,
    RenderedPart,
    Sender,
    SentMessage,
    Text,
    UserId,
)
from gateway.http.app import build_app
from gateway.metrics import Metrics
from tests.fakes import MemoryCursors, RecordingSink

SECRET = "signing-secret"
WINDOW = capabilities_of("slack").signature_window_s


class KitChannel(Channel):
    """A webhook channel made of the kit alone."""

    name = "slack"

    def __init__(self, context: ChannelContext) -> None:
        super().__init__(context)
        assert WINDOW is not None
        self.replays = ReplayMemory(WINDOW)
        self.acks = AckClock.of("slack", context.account)

    async def run(self, heartbeat: Heartbeat) -> None:
        await asyncio.Event().wait()

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        raise Unsupported(self.name, "not in this test")

    async def handle_webhook(self, request: Request) -> Response:
        body = await request.body()
        verified = verify_hmac(request.headers, body, SECRET, SLACK_V0, window_s=WINDOW, replays=self.replays)
        event = json.loads(body)["event"]
        message = InboundMessage(
            event_id=EventId(event["id"]), received_at=datetime.now(UTC), sender=Sender(user=UserId(event["user"])),
            address=Address(channel=ChannelName("slack"), account=self.account,
                            conversation=Conversation(chat=ChatId(event["channel"]), kind=ConversationKind.GROUP)),
            elements=(Text(text=event["text"]),),
        )
        return await self.acks.accept_then_answer(self.context.sink, [message], verified=verified, replays=self.replays)


class Served:
    """The least of a gateway the HTTP app needs: one running channel account."""

    def __init__(self, channel: Channel) -> None:
        self.metrics, self.ready, self.store_failure, self._channel = Metrics(), True, None, channel

    async def status(self):  # pragma: no cover - not asked here
        raise AssertionError

    def channel(self, name: str, account: str) -> Channel | None:
        return self._channel if (name, account) == ("slack", "main") else None

    def running_channels(self) -> Mapping[tuple[str, str], Channel]:
        return {("slack", "main"): self._channel}


def signed(event_id: str, *, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"event": {"id": event_id, "user": "U1", "channel": "C1", "text": "hi"}}).encode()
    timestamp = str(int(time.time() if at is None else at))
    return body, {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": SLACK_V0.sign(SECRET.encode(), body, timestamp),
                  "Content-Type": "application/json"}


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def http(sink: RecordingSink):
    channel = KitChannel(ChannelContext(AccountId("main"), AccountConfig(), sink, MemoryCursors(), Path(".")))
    transport = httpx.ASGITransport(app=build_app(Served(channel)))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client


async def test_a_signed_event_is_durable_when_answered_and_its_replay_is_refused(http, sink):
    body, headers = signed("Ev1")
    first = await http.post("/webhooks/slack/main", content=body, headers=headers)
    assert first.status_code == 200 and [m.event_id for m in sink.accepted] == ["Ev1"]
    again = await http.post("/webhooks/slack/main", content=body, headers=headers)
    assert again.status_code == 401 and again.json() == {"error": "request signature does not verify"}
    assert sink.calls == 1


async def test_a_failed_accept_is_a_500_and_the_platforms_retry_of_the_same_request_gets_through(http, sink, caplog):
    sink.failures = 1
    body, headers = signed("Ev2")
    with caplog.at_level(logging.ERROR, logger="gateway.http.app"):
        failed = await http.post("/webhooks/slack/main", content=body, headers=headers)
    assert failed.status_code == 500 and sink.accepted == []
    retried = await http.post("/webhooks/slack/main", content=body, headers=headers)
    assert retried.status_code == 200 and [m.event_id for m in sink.accepted] == ["Ev2"]


async def test_stale_forged_and_unsigned_requests_are_401_and_nothing_is_accepted(http, sink):
    assert WINDOW is not None
    stale_body, stale_headers = signed("Ev3", at=time.time() - WINDOW - 60)
    body, headers = signed("Ev4")
    forged = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
    unsigned = {"Content-Type": "application/json"}
    for content, sent in [(stale_body, stale_headers), (body, forged), (body, unsigned)]:
        response = await http.post("/webhooks/slack/main", content=content, headers=sent)
        assert response.status_code == 401 and "Traceback" not in response.text
    assert sink.calls == 0


async def test_a_get_on_a_channel_without_a_handshake_is_405(http):
    response = await http.get("/webhooks/slack/main")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
