"""A WeChat Official Account end to end: WeChat's callbacks in, customer-service messages out, over loopback HTTP.

Every check reads what the emulated WeChat saw (what it was answered, what it
was asked to send) or the gateway's store -- nothing in between is faked.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.channels.weixin.conftest import TEACHER
from tests.contract.harness import ContractResponder, counter, eventually


async def test_the_consoles_url_check_is_answered_with_echostr(open_rig):
    rig = await open_rig()
    answer = await rig.oa.verify_url()
    assert answer.status_code == 200 and answer.text == answer.extensions["echostr"]
    forged = await rig.oa.verify_url(token="not-the-token")
    assert forged.status_code == 401


@pytest.mark.parametrize("mode", ["plaintext", "compatible", "safe"])
async def test_an_answer_ready_in_time_goes_back_in_the_callbacks_response_once(open_rig, mode):
    rig = await open_rig(mode=mode)
    await rig.oa.say("o-learner", "你好, tutor")
    [delivery] = rig.oa.deliveries  # answered in time: WeChat does not retry
    assert delivery.body.startswith("<xml>") and ("<Encrypt>" in delivery.body) == (mode != "plaintext")
    assert rig.oa.texts_to("o-learner") == ["echo: 你好, tutor"]
    await rig.quiet()
    assert rig.oa.cs_texts_to("o-learner") == [] and len(rig.responder.turns) == 1


@pytest.mark.parametrize("mode", ["plaintext", "safe"])
async def test_with_passive_replies_off_the_answer_is_one_customer_service_message(open_rig, mode):
    rig = await open_rig(mode=mode, passive=False)
    await rig.oa.say("o-learner", "你好, tutor")
    assert [d.body for d in rig.oa.deliveries] == ["success"]  # durable, then "success": WeChat stops retrying
    assert await rig.texts("o-learner", 1) == ["echo: 你好, tutor"]
    await rig.quiet()
    assert rig.oa.cs_texts_to("o-learner") == ["echo: 你好, tutor"] and len(rig.responder.turns) == 1


async def test_a_slow_answer_arrives_once_by_customer_service_while_wechat_retries(open_rig):
    rig = await open_rig(mode="safe")
    rig.responder.stream, rig.responder.delta_delay = ["a slow ", "answer"], 3.0  # past WeChat's 5 s
    rig.oa.retry_after_s = 1.0  # WeChat gives up on each try sooner here, so all its retries come while the model works
    msg_id = await rig.oa.say("o-learner", "think hard")
    tries = [d for d in rig.oa.deliveries if d.msg_id == msg_id]
    assert len(tries) >= 2 and tries[0].status == 0  # the first try was not answered in time, so WeChat retried
    assert all(d.body in ("", "success") for d in tries)  # a retry while the first still waits is told "success"
    assert await rig.texts("o-learner", 1) == ["a slow answer"]
    await rig.quiet()
    assert rig.oa.passive == [] and rig.oa.cs_texts_to("o-learner") == ["a slow answer"]
    assert len(rig.responder.turns) == 1


async def test_a_forged_signature_is_refused_401_and_nothing_is_stored(open_rig):
    rig = await open_rig(mode="safe")
    plain = rig.oa.message("o-learner", "let me in")
    query, body = rig.oa.envelope(plain, token="not-the-token")
    assert (await rig.oa.post(query, body)).status_code == 401
    plain_in_safe_mode = rig.oa._query()  # signed right, but not encrypted: safe mode takes no such request
    assert (await rig.oa.post(plain_in_safe_mode, plain)).status_code == 401
    assert rig.inbound_rows() == 0 and rig.responder.turns == []


async def test_a_stale_timestamp_is_refused_and_nothing_is_stored(open_rig):
    rig = await open_rig(mode="plaintext")
    query, body = rig.oa.envelope(rig.oa.message("o-learner", "an old request"), timestamp=int(time.time()) - 3600)
    assert (await rig.oa.post(query, body)).status_code == 401
    assert rig.inbound_rows() == 0


@pytest.mark.parametrize("body", [b"<xml><MsgType>text</MsgType>", b'<!DOCTYPE x [<!ENTITY a "b">]><xml>&a;</xml>',
                                  b"<xml><MsgType>text</MsgType><FromUserName>o</FromUserName></xml>"])
async def test_a_malformed_callback_is_400_and_counted_never_a_traceback(open_rig, body):
    rig = await open_rig(mode="plaintext")
    answer = await rig.oa.post(rig.oa._query(), body)
    assert answer.status_code == 400 and "invalid event" in answer.text
    assert rig.inbound_rows() == 0


async def test_wechats_retries_of_one_msgid_are_answered_once(open_rig):
    rig = await open_rig(mode="safe")
    plain = rig.oa.message("o-learner", "did you get this?", msg_id="424242")
    answers = []
    for _ in range(4):  # the first try and WeChat's three retries (as if each answer were lost), each signed afresh
        answer = await rig.oa.post(*rig.oa.envelope(plain))
        assert answer.status_code == 200
        answers.append(rig.oa.read_answer(answer.content)["Content"])
    assert answers == ["echo: did you get this?"] * 4  # the one answer, repeated to a retry that never saw it
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="weixin") >= 3,
                     what="the retries to be recognised")
    await rig.quiet()
    assert len(rig.responder.turns) == 1 and rig.oa.cs_texts_to("o-learner") == []


async def test_an_expired_access_token_is_fetched_again_once(open_rig):
    rig = await open_rig(mode="plaintext", passive=False)
    await rig.oa.say("o-learner", "first")
    await rig.texts("o-learner", 1)
    assert rig.oa.tokens_issued == 1
    rig.oa.expire_token()  # WeChat answers 40001 to the token the gateway holds
    await rig.oa.say("o-learner", "second")
    assert await rig.texts("o-learner", 2) == ["echo: first", "echo: second"]
    assert rig.oa.tokens_issued == 2


async def test_a_reply_outside_the_48_hour_window_is_not_sent_and_the_teacher_is_told(open_rig):
    rig = await open_rig(mode="plaintext")
    await rig.oa.say(TEACHER, "I am here")  # the teacher's own window is open, so a report can reach them
    await rig.texts(TEACHER, 1)
    await rig.oa.say("o-learner", "an old question", create_time=int(time.time()) - 49 * 3600)
    [report] = (await rig.texts(TEACHER, 2))[1:]
    assert "48 hours" in report
    await rig.quiet()
    assert rig.oa.texts_to("o-learner") == []


async def test_wechat_saying_the_window_closed_is_recorded_and_the_teacher_told(open_rig):
    rig = await open_rig(mode="plaintext", passive=False)
    await rig.oa.say(TEACHER, "I am here")
    await rig.texts(TEACHER, 1)
    rig.oa.fail_next(45015)
    await rig.oa.say("o-learner", "are you there?")
    [report] = (await rig.texts(TEACHER, 2))[1:]
    assert "45015" in report or "window" in report
    await rig.quiet()
    assert rig.oa.texts_to("o-learner") == []


def test_an_account_without_kind_is_personal_wechat_and_an_official_account_must_say_so(monkeypatch):
    from channels.weixin.config import IlinkConfig, WeixinConfig
    from gateway.configfile import parse_config, validate_account
    from gateway.core.errors import ConfigError

    monkeypatch.setenv("WX_TEST_SECRET", "s")
    oa = {"appid": "wx1", "appsecret": "env:WX_TEST_SECRET", "token": "env:WX_TEST_SECRET", "mode": "plaintext"}
    config = parse_config({"data_dir": "/tmp/unused", "partners": [{"id": "t", "name": "T"}],
                           "bindings": [{"partner": "t", "channel": "weixin", "account": "me"}],
                           "channels": {"weixin": {"me": {"kind": "ilink"}, "default": {}, "oa": oa}}})
    for account in ("me", "default"):  # ilink is the platform's default kind
        assert isinstance(validate_account(config, "weixin", account, WeixinConfig), IlinkConfig)
    with pytest.raises(ConfigError, match="write kind: official_account"):
        validate_account(config, "weixin", "oa", WeixinConfig)


def test_an_encoding_aes_key_that_is_not_43_characters_is_refused(monkeypatch):
    from channels.weixin.config import WeixinConfig
    from gateway.configfile import parse_config, validate_account
    from gateway.core.errors import ConfigError

    monkeypatch.setenv("WX_TEST_SECRET", "s")
    monkeypatch.setenv("WX_TEST_KEY", "k" * 42)
    settings = {"kind": "official_account", "appid": "wx1", "appsecret": "env:WX_TEST_SECRET",
                "token": "env:WX_TEST_SECRET", "encoding_aes_key": "env:WX_TEST_KEY"}
    config = parse_config({"data_dir": "/tmp/unused", "partners": [{"id": "t", "name": "T"}],
                           "bindings": [{"partner": "t", "channel": "weixin", "account": "oa"}],
                           "channels": {"weixin": {"oa": settings}}})
    with pytest.raises(ConfigError, match="43 letters and digits"):
        validate_account(config, "weixin", "oa", WeixinConfig)


async def test_following_the_account_is_first_contact_and_is_greeted_once(open_rig):
    from channels._kit.wechat_xml import write_fields

    rig = await open_rig(mode="safe", passive=False)
    stamp = int(time.time())
    follow = write_fields({"ToUserName": "gh_account", "FromUserName": "o-new", "CreateTime": stamp,
                           "MsgType": "event", "Event": "subscribe"})
    rig.oa._last_said["o-new"] = (float(stamp), 0)
    for _ in range(2):  # WeChat's retry of the event carries the same FromUserName and CreateTime
        assert (await rig.oa.post(*rig.oa.envelope(follow))).text == "success"
    [greeting] = await rig.texts("o-new", 1)
    assert greeting
    await rig.quiet()
    assert len(rig.oa.texts_to("o-new")) == 1 and rig.responder.turns == []  # the dispatcher greets; no turn is run
    click = write_fields({"ToUserName": "gh_account", "FromUserName": "o-new", "CreateTime": stamp + 1,
                          "MsgType": "event", "Event": "CLICK", "EventKey": "menu"})
    assert (await rig.oa.post(*rig.oa.envelope(click))).text == "success"  # read, refused, and WeChat told to stop
    assert rig.inbound_rows() == 1


class GatedResponder(ContractResponder):
    """Answers only once the test opens the gate, so a test can act while a callback waits."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def respond(self, turn):
        await self.gate.wait()
        async for event in super().respond(turn):
            yield event


async def test_a_retry_while_the_first_callback_waits_is_told_success_and_the_first_carries_the_answer(open_rig):
    rig = await open_rig(mode="safe", responder=GatedResponder())
    plain = rig.oa.message("o-learner", "a hard one", msg_id="777")
    rig.oa._last_said["o-learner"] = (time.time(), 0)
    first = asyncio.create_task(rig.oa.post(*rig.oa.envelope(plain)))  # still connected: its handler waits
    await eventually(lambda: rig.inbound_rows() == 1, what="the first callback to be stored")
    retry = await rig.oa.post(*rig.oa.envelope(plain))  # WeChat's retry, while the first still waits
    assert retry.status_code == 200 and retry.text == "success"
    rig.responder.gate.set()
    answered = await first
    assert rig.oa.read_answer(answered.content)["Content"] == "echo: a hard one"  # the waiting callback carries it
    await rig.quiet()
    assert rig.oa.cs_texts_to("o-learner") == [] and len(rig.responder.turns) == 1


async def test_a_reminder_for_after_the_learners_48_hour_window_is_refused_when_scheduled(open_rig):
    """The account's own kind decides (48 hours, not personal WeChat's ten minutes), counted from the last message.

    The gateway counts from when it stored the message (WeChat delivers within seconds, retries within 15)."""
    from datetime import UTC, datetime, timedelta

    rig = await open_rig(mode="plaintext")
    await rig.oa.say("o-learner", "remind me later")
    await rig.texts("o-learner", 1)
    await rig.quiet()
    address = rig.responder.turns[0].messages[0].address
    now = datetime.now(UTC)
    inside = await rig.gateway.reminders.schedule(address, now + timedelta(hours=47), "review the vocabulary")
    after = await rig.gateway.reminders.schedule(address, now + timedelta(hours=49), "review the vocabulary")
    assert inside.accepted, inside.reason  # 47 hours after the learner wrote: WeChat still takes it
    assert not after.accepted and "48 hours" in after.reason  # 49 hours after: it would be refused (45015)
    assert await rig.gateway.fire_reminders() == 0  # nothing due now; the refused one was never stored


async def test_an_answer_past_the_five_message_quota_sends_five_and_the_teacher_is_told(open_rig):
    responder = ContractResponder()
    paragraph = "x" * 1500  # two paragraphs never fit one 2,048-byte message, so the parts cannot be merged
    responder.answer = lambda turn: "\n\n".join(f"{i} {paragraph}" for i in range(7)) if "long" in turn.messages[-1].text \
        else "noted"
    rig = await open_rig(mode="plaintext", passive=False, responder=responder)
    await rig.oa.say(TEACHER, "I am here")
    await rig.texts(TEACHER, 1)
    await rig.oa.say("o-learner", "a long one please")
    sent = await rig.texts("o-learner", 5)
    [report] = (await rig.texts(TEACHER, 2))[1:]
    await rig.quiet()
    assert len(rig.oa.texts_to("o-learner")) == 5 == len(sent)
    assert [text.split(" ")[0] for text in sent] == ["0", "1", "2", "3", "4"]
    assert rig.oa.send_calls == 7  # the teacher's two, the learner's five: the gateway never met WeChat's 45047
    assert "left out" in report or "5" in report
