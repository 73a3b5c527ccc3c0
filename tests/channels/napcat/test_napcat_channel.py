"""The NapCat channel end to end against the OneBot emulator: opt-in, tokens, bad frames, groups, replies, errors."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from channels.napcat.config import OPT_IN
from gateway.core.errors import AuthFailed, BadRequest, ConfigError, Unsupported
from gateway.core.messages import Mention, Quote
from gateway.core.probes import Gravity
from tests.channels.napcat.conftest import NapcatRig, account_settings, config
from tests.contract.harness import counter, eventually
from tests.peers.napcat_server import NapcatServer


def test_without_the_opt_in_the_config_is_refused_naming_the_setting(tmp_path, token_env):
    os.environ[token_env] = uuid.uuid4().hex
    settings = {"ws_url": "ws://127.0.0.1:3001", "access_token": f"env:{token_env}"}
    with pytest.raises(ConfigError) as refused:
        from channels.napcat import NapcatChannel
        from gateway.configfile import validate_account

        validate_account(config(tmp_path, settings), "napcat", "qq", NapcatChannel.config_model)
    assert OPT_IN in str(refused.value) and "ban" in str(refused.value)
    assert os.environ[token_env] not in str(refused.value)


def test_doctor_warns_of_the_ban_risk_on_every_check(tmp_path, token_env):
    from channels.napcat import NapcatChannel, NapcatConfig

    os.environ[token_env] = uuid.uuid4().hex
    settings = NapcatConfig.model_validate({OPT_IN: True, "access_token": f"env:{token_env}"})
    [problem] = NapcatChannel.check(settings)
    assert problem.gravity is Gravity.WARNING and "ban" in problem.message and "QQ" in problem.message


async def test_a_private_message_is_answered_as_a_reply(rig: NapcatRig):
    said = await rig.server.say("hello tutor", user=20001)
    [shown] = await rig.shown("20001", 1)
    assert shown.text == "echo: hello tutor"
    assert shown.reply_to == str(said.message_id)
    [turn] = rig.responder.turns
    assert turn.messages[0].event_id == f"{rig.server.self_id}:{said.message_id}"


async def test_group_message_without_at_is_dropped_and_with_at_answered(rig: NapcatRig):
    await rig.server.say("just chatting", user=20002, group=900001)
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="napcat") >= 1,
                     what="the unaddressed group message dropped")
    await rig.server.say("what is a prime?", user=20002, group=900001, mention=True)
    [shown] = await rig.shown("g900001", 1)
    assert shown.text == "echo: what is a prime?"
    [turn] = rig.responder.turns
    assert any(isinstance(e, Mention) and e.is_self for e in turn.messages[0].elements)
    action = [a for a in rig.server.actions if a["action"] == "send_group_msg"][0]
    assert action["params"]["group_id"] == 900001


async def test_a_reply_segment_is_a_quote_and_a_reply_to_the_bot_addresses_it_in_a_group(rig: NapcatRig):
    await rig.server.say("hi", user=20003, group=900002, mention=True)
    [first] = await rig.shown("g900002", 1)
    await rig.server.say("and then?", user=20003, group=900002, reply_to=first.message_id)
    await rig.shown("g900002", 2)
    second = rig.responder.turns[1].messages[0]
    [quote] = [e for e in second.elements if isinstance(e, Quote)]
    assert quote.message == str(first.message_id) and quote.is_self
    assert second.addressed


async def test_malformed_frames_are_recorded_invalid_and_the_account_goes_on(rig: NapcatRig):
    for wire in ("not json", "[1, 2]", json.dumps({"hello": "world"}),
                 json.dumps({"post_type": "message", "message_type": "private", "self_id": rig.server.self_id}),
                 json.dumps({"post_type": "message", "message_type": "private", "self_id": rig.server.self_id,
                             "message_id": 1, "user_id": 5, "message": "[CQ:face,id=1]"})):
        await rig.server.raw(wire)
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="napcat", reason="invalid event") >= 5,
                     what="five invalid frames recorded")
    await rig.server.say("still there?", user=20004)
    [shown] = await rig.shown("20004", 1)
    assert shown.text == "echo: still there?"


async def test_a_dropped_socket_reconnects_and_a_replayed_event_is_answered_once(rig: NapcatRig):
    said = await rig.server.say("one", user=20005)
    await rig.shown("20005", 1)
    await rig.server.drop()
    await rig.server.connected()
    await rig.server.redeliver(said)
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="napcat") >= 1,
                     what="the replay recognised")
    await rig.quiet()
    assert len(rig.server.shown("20005")) == 1


async def test_failed_retcodes_are_the_gateways_errors(rig: NapcatRig):
    from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind, Referrer, RenderedPart

    channel = rig.gateway.channel("napcat", "qq")
    target = Address(channel=ChannelName("napcat"), account=AccountId("qq"), conversation=Conversation(
        chat=ChatId("20006"), kind=ConversationKind.DIRECT))
    part = RenderedPart(index=0, text="hi", plain="hi")
    for retcode, error in ((1401, AuthFailed), (1404, Unsupported), (1400, BadRequest), (200, BadRequest)):
        rig.server.fail_sends = retcode
        with pytest.raises(error) as raised:
            await channel.send(target, part, referrer=Referrer(), idempotency_key=f"k{retcode}")
        assert raised.value.code == retcode
    rig.server.fail_sends = None
    sent = await channel.send(target, part, referrer=Referrer(), idempotency_key="ok")
    assert rig.server.shown("20006")[-1].message_id == int(sent.message)


async def test_a_wrong_token_is_refused_by_napcat_and_the_account_stops_as_auth_failed(tmp_path, token_env):
    async with NapcatServer(token=uuid.uuid4().hex) as server:
        os.environ[token_env] = uuid.uuid4().hex  # not the server's
        from channels.base import ChannelContext
        from channels.napcat import NapcatChannel, NapcatConfig
        from gateway.core.messages import AccountId
        from tests.fakes import MemoryCursors, RecordingHeartbeat, RecordingSink

        settings = NapcatConfig.model_validate(account_settings(server, token_env))
        channel = NapcatChannel(ChannelContext(account=AccountId("qq"), config=settings, sink=RecordingSink(),
                                               cursors=MemoryCursors(), data_dir=tmp_path))
        with pytest.raises(AuthFailed) as refused:
            await channel.run(RecordingHeartbeat())
        assert refused.value.code == 401 and server.refused == 1
        assert os.environ[token_env] not in str(refused.value)
