"""The DingTalk channel end to end over loopback: the real SDK's ticket call, the kit's socket, the emulator.

What DingTalk's documentation promises and the channel must keep: a frame is acked only once its
message is durable; a message pushed again is answered once; answers go by the session webhook while
it is open and by the robot's API after; AI cards stream where a template is set; frames the channel
cannot read are recorded, acked where they can be, and the account goes on.

The emulator serves on the test's own event loop, so the SDK's synchronous ticket call (``requests``)
would deadlock every test here if it ran on the loop: it runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.contract.harness import eventually, settled
from tests.extras import need_module

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def test_a_direct_message_is_acked_and_answered_once_through_the_session_webhook(dingtalk_rig):
    rig = await dingtalk_rig()
    said = await rig.server.say("hello")
    [answer] = await rig.answers("learner1", 1)
    assert (answer.via, answer.text) == ("webhook", "echo: hello")
    assert said.frame["headers"]["messageId"] in rig.server.acks and rig.server.unacked() == []
    assert rig.server.subscriptions == [{"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}]
    await rig.server.redeliver(said)  # DingTalk pushes the same msgId again
    await eventually(lambda: len(rig.server.acks) == 2 and settled(rig.gateway), what="the second frame acked")
    assert len(rig.server.in_chat("learner1")) == 1 and len(rig.responder.turns) == 1


async def test_a_group_at_message_is_answered_in_the_group(dingtalk_rig):
    rig = await dingtalk_rig()
    await rig.server.say("what is 2+2", user="learner7", group="cidGroupA")
    [answer] = await rig.answers("cidGroupA", 1)
    assert answer.text == "echo: what is 2+2"
    [turn] = rig.responder.turns
    assert turn.messages[0].sender.user == "learner7"


async def test_an_expired_session_webhook_falls_back_to_the_robots_api(dingtalk_rig):
    rig = await dingtalk_rig()
    rig.server.expire_webhooks = True
    await rig.server.say("late", user="learner2")
    await rig.server.say("late too", user="learner3", group="cidGroupB")
    [direct] = await rig.answers("learner2", 1)
    [group] = await rig.answers("cidGroupB", 1)
    assert (direct.via, direct.text) == ("robot", "echo: late")
    assert (group.via, group.text) == ("robot", "echo: late too")


async def test_an_answer_streams_into_an_ai_card_when_a_template_is_set(dingtalk_rig):
    rig = await dingtalk_rig(card_template_id="tpl-ai-card.schema")
    rig.responder.stream = ["Plants ", "use ", "light ", "to make sugar."]
    rig.responder.delta_delay = 0.3
    await rig.server.say("photosynthesis?")
    [card] = await rig.answers("learner1", 1)
    assert card.via == "card" and card.text == "Plants use light to make sugar."
    assert len(card.updates) >= 2 and card.updates[-1] == card.text  # streamed, then finalized
    assert [s.via for s in rig.server.in_chat("learner1")] == ["card"]


async def test_malformed_frames_are_recorded_and_the_account_goes_on(dingtalk_rig):
    rig = await dingtalk_rig()
    dropped = rig.gateway.metrics.dropped.labels("dingtalk", "school", "invalid event")
    await rig.server.send_raw("not json at all")
    await rig.server.send_raw(json.dumps({"type": "CALLBACK", "headers": {"topic": "x"}}))  # no messageId
    bad = {"specVersion": "1.0", "type": "CALLBACK", "data": json.dumps({"msgId": "m-bad"}),
           "headers": {"messageId": "frame-bad", "topic": "/v1.0/im/bot/messages/get"}}
    await rig.server.send_raw(json.dumps(bad))
    pinged = await rig.server.ping()
    await eventually(lambda: {"frame-bad", pinged} <= set(rig.server.acks), what="the unreadable frame and ping acked")
    await rig.server.say("still here?")
    [answer] = await rig.answers("learner1", 1)
    assert answer.text == "echo: still here?"
    assert dropped._value.get() == 3  # the two without an envelope and the unreadable robot message


async def test_a_dropped_stream_is_opened_again_with_a_new_ticket(dingtalk_rig):
    rig = await dingtalk_rig()
    assert rig.server.tickets_opened == 1
    await rig.server.drop()
    await rig.server.connected()
    assert rig.server.tickets_opened == 2
    await rig.server.say("after the drop")
    [answer] = await rig.answers("learner1", 1)
    assert answer.text == "echo: after the drop"


async def test_stopping_the_gateway_really_stops_the_stream(dingtalk_rig):
    rig = await dingtalk_rig()
    await rig.gateway.stop()
    await asyncio.sleep(1.0)  # long enough for a loop that swallowed the cancel to dial again
    assert rig.server.tickets_opened == 1 and not rig.server.holding()


async def test_a_refused_secret_waits_for_a_human_and_is_not_dialled_again(tmp_path):
    need_module("dingtalk_stream")
    import os
    import uuid

    from gateway.app import Gateway
    from tests.channels.dingtalk.conftest import config
    from tests.contract.harness import ContractResponder
    from tests.peers.dingtalk_server import DingtalkServer

    env, wrong = f"DINGTALK_SECRET_{uuid.uuid4().hex[:8].upper()}", uuid.uuid4().hex
    async with DingtalkServer(secret=uuid.uuid4().hex) as server:
        os.environ[env] = wrong
        gateway = Gateway(config(tmp_path / "data", server, env), responder=ContractResponder())
        await gateway.start()
        try:
            async def parked():
                [account] = (await gateway.status()).accounts
                return account if account.state == "action_required" else None

            account = await eventually(parked, what="the account to wait for a human")
            assert wrong not in account.reason
            assert server.tickets_opened == 0 and server.tokens_issued == 0
        finally:
            await gateway.stop()
            os.environ.pop(env, None)
