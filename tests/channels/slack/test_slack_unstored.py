"""An event the gateway could not store is not acknowledged, so Slack delivers it again.

The channel is the real one, with slack-bolt dispatching and slack_sdk asking
the emulator who the bot is; only the inbound sink fails, as a full disk makes
the store fail.  Bolt must then answer 500: in Socket Mode that leaves the
envelope unacked (Slack redelivers it), over HTTP Slack retries the callback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from slack_bolt.request.async_request import AsyncBoltRequest

from channels.base import ChannelContext
from channels.slack import SlackChannel, SlackConfig
from gateway.core.messages import AccountId, InboundMessage
from tests.contract.slack_harness import SlackHarness


class FullDisk:
    def __init__(self) -> None:
        self.tried = 0

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        self.tried += 1
        raise OSError(28, "No space left on device")

    def invalid(self, reason: str) -> None:
        raise AssertionError(reason)

    def refused(self, rule: str, detail: str) -> None:
        raise AssertionError(detail)


class NoCursors:
    async def get(self, name: str) -> str | None:
        return None

    async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None:
        pass


async def test_an_event_that_could_not_be_stored_is_answered_500_and_not_acked(slack_api, tmp_path):
    harness = SlackHarness(slack_api)
    await harness.start(tmp_path)
    sink = FullDisk()
    config = SlackConfig.model_validate({"bot_token": f"env:{harness.env['bot']}", "app_token": f"env:{harness.env['app']}",
                                         "api_base": f"{slack_api}/api/"})
    channel = SlackChannel(ChannelContext(account=AccountId("school"), config=config, sink=sink, cursors=NoCursors(),
                                          data_dir=tmp_path))
    try:
        body = {"type": "event_callback", "team_id": harness.users.ids["team_id"], "event_id": "Ev1",
                "event": {"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "hi",
                          "ts": "1700000000.000100"}}
        answer = await channel._bolt().async_dispatch(AsyncBoltRequest(body=json.dumps(body), mode="socket_mode"))
        assert sink.tried == 1
        assert answer.status == 500  # the Socket Mode adapter acks only a 200
    finally:
        await channel.close()
        await harness.stop()
