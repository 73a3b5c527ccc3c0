"""The WeCom AI bot through the real wecom-aibot-sdk against the loopback emulator.

Each test says something at the emulator as a learner would and reads what the
learner's WeCom shows: the streams the bot answered with, their updates, and
whether each finished once.
"""

from __future__ import annotations

import asyncio

from tests.contract.harness import eventually
from tests.extras import need_module
from tests.peers.wecom_server import BOT_NAME


async def test_a_direct_message_is_answered_once_as_a_finished_stream(rig):
    said = await rig.server.say("hello")
    [answer] = await rig.answers("learner1", 1)
    assert answer.content == "echo: hello"
    assert answer.req_id == said.req_id  # the reply names the callback it answers
    assert answer.finished == 1 and answer.after_finish == 0
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["hello"]


async def test_a_group_at_message_is_answered_in_the_group_without_the_mention(rig):
    await rig.server.say("what is a noun?", user="learner2", group="wrGROUP1")
    [answer] = await rig.answers("wrGROUP1", 1)
    assert answer.content == "echo: what is a noun?"
    [turn] = rig.responder.turns
    assert f"@{BOT_NAME}" not in turn.messages[0].text
    assert rig.server.answers("learner2") == []  # not answered privately


async def test_a_redelivered_callback_is_answered_once(rig):
    said = await rig.server.say("only once")
    await rig.answers("learner1", 1)
    await rig.server.redeliver(said)
    later = await rig.server.say("and then this")  # after the redelivery, on the same socket
    await eventually(lambda: len(rig.server.answers("learner1")) >= 2, what="the later answer")
    await rig.quiet()
    shown = [a.content for a in rig.server.answers("learner1")]
    assert shown == ["echo: only once", "echo: and then this"]
    assert later.req_id != said.req_id


async def test_after_the_connection_drops_the_bot_subscribes_again_and_answers(rig):
    await rig.server.say("before")
    await rig.answers("learner1", 1)
    await rig.server.drop()
    await eventually(lambda: rig.server.subscribes >= 2, what="a second subscribe")
    await rig.server.say("after")
    shown = await rig.answers("learner1", 2)
    assert [a.content for a in shown] == ["echo: before", "echo: after"]


async def test_streamed_deltas_arrive_as_stream_updates_and_the_stream_finishes_once(rig):
    rig.responder.stream = ["Nouns ", "name ", "things, ", "places ", "and people."]
    rig.responder.delta_delay = 0.6  # over min_edit_interval, so updates show between deltas
    await rig.server.say("tell me about nouns")
    [answer] = await rig.answers("learner1", 1)
    assert answer.content == "Nouns name things, places and people."
    assert answer.finished == 1 and answer.after_finish == 0
    assert len(answer.updates) >= 2  # at least one update before the finished one
    assert all(answer.content.startswith(u.rstrip()) for u in answer.updates)  # each replaces with more


async def test_an_expired_stream_is_finished_as_markdown_to_the_chat(rig):
    rig.server.expired = True
    await rig.server.say("late answer please")
    pushed = await eventually(lambda: rig.server.pushed, what="the markdown sent instead")
    await rig.quiet()
    [body] = pushed
    assert body["chatid"] == "learner1"
    assert body["msgtype"] == "markdown" and body["markdown"]["content"] == "echo: late answer please"
    assert rig.server.streams == {}


async def test_a_voice_callback_is_refused_with_a_reason_not_answered(rig):
    said = await rig.server.say("text first")
    await rig.answers("learner1", 1)
    voice = dict(said.frame["body"], msgid="voice1", msgtype="voice", voice={"content": "spoken words"})
    voice.pop("text")
    await rig.server._push(voice, "learner1")
    await rig.server.say("text after")
    await rig.answers("learner1", 2)
    await asyncio.sleep(0)  # nothing else is waited for: the voice message was refused synchronously
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["text first", "text after"]


async def test_a_refused_secret_waits_for_a_human_and_is_not_retried_over_and_over(tmp_path):
    need_module("wecom_aibot_sdk")
    import os
    import uuid

    from gateway.app import Gateway
    from tests.channels.wecom.conftest import config
    from tests.contract.harness import ContractResponder
    from tests.peers.wecom_server import WecomServer

    env = f"WECOM_SECRET_{uuid.uuid4().hex[:8].upper()}"
    async with WecomServer() as server:
        os.environ[env] = "not-the-secret"
        gateway = Gateway(config(tmp_path / "data", server, env), responder=ContractResponder())
        await gateway.start()
        try:
            async def parked():
                [account] = (await gateway.status()).accounts
                return account if account.state == "action_required" else None

            account = await eventually(parked, what="the account to wait for a human")
            assert "bot_id and secret" in account.reason and "not-the-secret" not in account.reason
            assert server.subscribes == 1  # neither the SDK nor the supervisor dialled again
        finally:
            await gateway.stop()
            os.environ.pop(env, None)


async def test_unanswered_pings_are_a_dead_connection_and_the_bot_subscribes_again(tmp_path):
    need_module("wecom_aibot_sdk")
    """The SDK's ping is the one liveness check: two left unanswered close the socket, and the
    supervisor's restart (the one reconnect layer) subscribes again and answers."""
    import os
    import uuid

    from gateway.app import Gateway
    from tests.channels.wecom.conftest import config
    from tests.contract.harness import ContractResponder
    from tests.peers.wecom_server import WecomServer

    env = f"WECOM_SECRET_{uuid.uuid4().hex[:8].upper()}"
    async with WecomServer() as server:
        os.environ[env] = server.secret
        gateway = Gateway(config(tmp_path / "data", server, env, heartbeat_s=0.2), responder=ContractResponder())
        await gateway.start()
        try:
            await server.connected()
            await eventually(lambda: server.pings >= 2, what="pings on a live connection")
            server.mute_pings = True
            await eventually(lambda: server.subscribes >= 2, what="a second subscribe after the pings went unanswered")
            server.mute_pings = False
            await server.say("still there?")
            await eventually(lambda: server.answers("learner1"), what="the answer on the new connection")
            assert server.answers("learner1")[0].content == "echo: still there?"
        finally:
            await gateway.stop()
            os.environ.pop(env, None)
