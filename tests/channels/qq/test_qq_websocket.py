"""A QQ bot on QQ's websocket gateway (``mode: websocket``), on the emulator: the real socket, the real gateway.

The emulator serves the gateway the way QQ documents it (hello, identify or
resume, READY/RESUMED, dispatches with ``s``, heartbeats) and records what the
client sent on it; replies go to the same OpenAPI as in webhook mode.
"""

from __future__ import annotations

import pytest

from channels._kit.websocket import SEQUENCE_KEY
from channels.qq.wire import INTENTS
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.channel import ChannelState
from tests.contract.harness import eventually
from tests.peers.qq_server import QQPeer

LEARNER = "LEARNEROPENID0001"


def state(rig) -> tuple[ChannelState, str]:
    health = rig.gateway.supervisor.health()["qq:school"]
    return health.state, health.reason or ""


async def running(rig) -> None:
    await eventually(lambda: state(rig)[0] is ChannelState.RUNNING, what="the qq account to run")


def identifies(peer: QQPeer) -> list[dict]:
    return [first for first in peer.opened if first["op"] == 2]


def resumes(peer: QQPeer) -> list[dict]:
    return [first for first in peer.opened if first["op"] == 6]


async def test_a_direct_and_a_group_message_are_answered_once_through_the_socket(qq_rig):
    rig = await qq_rig(websocket=True)
    await running(rig)
    [identify] = identifies(rig.peer)
    assert identify["d"]["token"].startswith("QQBot ") and identify["d"]["intents"] & INTENTS == INTENTS
    c2c = await rig.peer.say(LEARNER, "hello")
    group = await rig.peer.say("group:grpopenid77", "from the group", user="member9")
    assert await rig.texts(LEARNER, 1) == ["echo: hello"]
    assert await rig.texts("group:grpopenid77", 1) == ["echo: from the group"]
    assert {m["msg_id"] for m in rig.peer.sent} == {c2c, group}
    await rig.quiet()
    assert len(rig.peer.sent) == 2 and rig.peer.deliveries == []  # nothing went by webhook


async def test_op_7_resumes_the_session_and_a_replayed_frame_is_not_answered_twice(qq_rig):
    rig = await qq_rig(websocket=True)
    await running(rig)
    first = await rig.peer.say(LEARNER, "one")
    assert await rig.texts(LEARNER, 1) == ["echo: one"]
    cursors = rig.gateway.channel("qq", "school").context.cursors
    await eventually(lambda: cursors.get(SEQUENCE_KEY), what="the sequence to be stored")
    await cursors.put(SEQUENCE_KEY, "1")  # as if killed after the store took "one", before its s was written
    await rig.peer.reconnect()
    await eventually(lambda: resumes(rig.peer), what="a resume")
    [resume] = resumes(rig.peer)
    assert resume["d"]["session_id"] == rig.peer._session.id and resume["d"]["seq"] == 1
    await eventually(lambda: [s for s, m in rig.peer.pushed if m == first][1:], what="the replay of 'one'")
    await rig.peer.say(LEARNER, "two")
    assert await rig.texts(LEARNER, 2) == ["echo: one", "echo: two"]
    await rig.quiet()
    assert rig.peer.texts_to(LEARNER) == ["echo: one", "echo: two"] and len(identifies(rig.peer)) == 1


async def test_op_9_invalid_session_is_answered_by_a_fresh_identify(qq_rig):
    rig = await qq_rig(websocket=True)
    await running(rig)
    await rig.peer.say(LEARNER, "before")
    assert await rig.texts(LEARNER, 1) == ["echo: before"]
    await rig.peer.invalidate()
    await eventually(lambda: len(identifies(rig.peer)) == 2, what="a second identify")
    assert resumes(rig.peer) == [] and rig.peer.sessions() == 1  # the old session is gone, a new one stands
    await rig.peer.say(LEARNER, "after")
    assert await rig.texts(LEARNER, 2) == ["echo: before", "echo: after"]


async def test_a_close_qq_resumes_is_resumed_and_one_it_does_not_is_followed_by_a_fresh_identify(qq_rig):
    rig = await qq_rig(websocket=True)
    await running(rig)
    await rig.peer.close_live(4009, "connection expired")  # QQ: reconnect and resume
    await eventually(lambda: resumes(rig.peer), what="a resume")
    await rig.peer.close_live(4006, "invalid session id")  # QQ: resume refused, identify
    await eventually(lambda: len(identifies(rig.peer)) == 2, what="a second identify")
    assert len(resumes(rig.peer)) == 1
    await rig.peer.say(LEARNER, "after")
    assert await rig.texts(LEARNER, 1) == ["echo: after"]


@pytest.mark.parametrize(("code", "told"), [(4004, "access token"), (4915, "banned")])
async def test_a_credentials_close_stops_the_account_for_a_human(qq_rig, code, told):
    rig = await qq_rig(websocket=True)
    await running(rig)
    rig.peer.close_next = code
    await rig.peer.reconnect()  # the resume is refused with the close code
    await eventually(lambda: state(rig)[0] is ChannelState.ACTION_REQUIRED, what="the account to need a human")
    reason = state(rig)[1]
    assert str(code) in reason and told in reason and rig.peer.closed_with == [code]
    assert rig.peer._tokens.isdisjoint({w for w in reason.split()})  # the token is not in the reason
    connections = len(rig.peer.opened)
    await rig.quiet()
    assert len(rig.peer.opened) == connections  # not reconnecting


async def test_an_unanswered_heartbeat_reconnects_and_resumes(qq_rig):
    rig = await qq_rig(websocket=True, heartbeat_ms=300)
    await running(rig)
    await rig.peer.say(LEARNER, "one")
    assert await rig.texts(LEARNER, 1) == ["echo: one"]
    await eventually(lambda: 2 in rig.peer.beats, what="a heartbeat naming the s of 'one'")  # READY was 1
    rig.peer.mute = True
    await eventually(lambda: resumes(rig.peer), what="a resume after the silent heartbeat")
    rig.peer.mute = False
    await rig.peer.say(LEARNER, "two")
    assert await rig.texts(LEARNER, 2) == ["echo: one", "echo: two"]
    assert len(identifies(rig.peer)) == 1


async def test_a_restarted_gateway_resumes_from_the_stored_sequence(qq_rig):
    rig = await qq_rig(websocket=True)
    await running(rig)
    await rig.peer.say(LEARNER, "one")
    assert await rig.texts(LEARNER, 1) == ["echo: one"]
    await rig.quiet()
    stored = await rig.gateway.channel("qq", "school").context.cursors.get(SEQUENCE_KEY)
    await rig.gateway.stop()
    await rig.peer.say(LEARNER, "said while the gateway was down")
    again = Gateway(parse_config(rig.raw), responder=rig.responder)
    await again.start()
    try:
        await eventually(lambda: resumes(rig.peer), what="the restarted gateway to resume")
        [resume] = resumes(rig.peer)
        assert str(resume["d"]["seq"]) == stored and len(identifies(rig.peer)) == 1
        assert await rig.texts(LEARNER, 2) == ["echo: one", "echo: said while the gateway was down"]
    finally:
        await again.stop()
    assert rig.peer.texts_to(LEARNER) == ["echo: one", "echo: said while the gateway was down"]


async def test_a_webhook_post_to_a_websocket_account_is_refused_and_not_stored(qq_rig):
    import json
    import time

    rig = await qq_rig(websocket=True)
    await running(rig)
    body = rig.peer.event("user", LEARNER, LEARNER, "by webhook", msg_id="M-hook", at=time.time())
    answer = await rig.peer.post(body, rig.peer.signed(body))
    assert answer.status_code >= 400 and json.loads(answer.text or "{}").get("op") != 12
    await rig.quiet()
    assert rig.inbound_rows() == 0


def test_the_mode_defaults_to_the_webhook_and_a_wrong_one_names_both(monkeypatch):
    from channels.qq.config import QQConfig
    from gateway.accounts import validate_settings
    from gateway.core.errors import ConfigError

    monkeypatch.setenv("QQ_MODE_SECRET", "s3cret-s3cret-s3cret")
    given = {"app_id": "102345678", "app_secret": "env:QQ_MODE_SECRET"}
    assert validate_settings(QQConfig, given, where="qq/school").mode == "webhook"
    with pytest.raises(ConfigError) as refused:
        validate_settings(QQConfig, given | {"mode": "socket"}, where="qq/school")
    assert "mode" in str(refused.value) and "websocket" in str(refused.value) and "s3cret" not in str(refused.value)
