"""A webhook answered past its platform's deadline shows on /metrics, counted per account.

The kit's ack clock measures the accept and tells the channel's sink; the gateway's ingest
counts it.  A channel made of the kit alone runs in a real gateway behind the real HTTP app;
its store takes longer than Slack's three seconds to make an event durable -- on the ack
clock's own clock, which the store moves, so the test waits for nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import Response

from channels._kit.ack import AckClock
from channels.base import Channel, ChannelContext
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.capabilities import capabilities_of
from gateway.core.channel import Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.errors import Unsupported
from gateway.core.messages import (
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
from gateway.store.sqlite import SqliteStore
from tests.pipeline.conftest import ScriptedResponder

DEADLINE_S = capabilities_of("slack").ack_deadline_s


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


CLOCK = Clock()


class SlowStore(SqliteStore):
    """Takes ``next_accept_s`` of the ack clock's time to make a batch durable."""

    next_accept_s = 0.0

    async def accept(self, messages: Sequence[InboundMessage], retention_s: float) -> list[bool]:
        fresh = await super().accept(messages, retention_s)
        CLOCK.now += self.next_accept_s
        return fresh


class HookChannel(Channel[AccountConfig]):
    """A webhook channel of the kit alone: decode, then the ack clock's accept-then-answer."""

    name = "slack"
    config_model = AccountConfig

    def __init__(self, context: ChannelContext[AccountConfig]) -> None:
        super().__init__(context)
        self.acks = AckClock("slack", context.account, DEADLINE_S, clock=CLOCK)

    async def run(self, heartbeat: Heartbeat) -> None:
        while True:
            heartbeat.beat()
            await asyncio.sleep(1)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        raise Unsupported(self.name, "this test sends nothing")

    async def handle_webhook(self, request: Request) -> Response:
        event = json.loads(await request.body())
        message = InboundMessage(
            event_id=EventId(event["id"]), received_at=datetime.now(UTC), sender=Sender(user=UserId("U1")),
            address=Address(channel=ChannelName("slack"), account=self.account,
                            conversation=Conversation(chat=ChatId("C1"), kind=ConversationKind.GROUP)),
            elements=(Text(text="hi"),),
        )
        return await self.acks.accept_then_answer(self.context.sink, [message])


def late_acks(metrics_text: str) -> dict[tuple[str, str], float]:
    return {(s.labels["channel"], s.labels["account"]): s.value
            for family in text_string_to_metric_families(metrics_text) if family.name == "partners_late_acks"
            for s in family.samples if s.name == "partners_late_acks_total"}


async def test_a_webhook_made_durable_after_the_deadline_is_counted_on_metrics(tmp_path):
    assert DEADLINE_S is not None
    config = parse_config({
        "data_dir": str(tmp_path),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "slack", "account": "main"}],
        "channels": {"slack": {"main": {}}},
        "pipeline": {"coalesce_window_s": 0},
    })
    store = SlowStore(config.database_path)
    gateway = Gateway(config, responder=ScriptedResponder(), store=store, channel_classes={"slack": HookChannel})
    await gateway.start()
    try:
        transport = httpx.ASGITransport(app=build_app(gateway))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8780") as http:
            store.next_accept_s = DEADLINE_S - 1  # in time
            assert (await http.post("/webhooks/slack/main", content=json.dumps({"id": "Ev1"}))).status_code == 200
            assert late_acks((await http.get("/metrics")).text).get(("slack", "main"), 0.0) == 0.0
            store.next_accept_s = DEADLINE_S + 1.5  # the platform gave up waiting and will send it again
            assert (await http.post("/webhooks/slack/main", content=json.dumps({"id": "Ev2"}))).status_code == 200
            assert late_acks((await http.get("/metrics")).text) == {("slack", "main"): 1.0}
    finally:
        await gateway.stop()
