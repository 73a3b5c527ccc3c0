"""DingTalk's HTTP callback mode (``mode: http``) end to end: the emulator POSTs signed robot messages to
the gateway's webhook route on loopback, as DingTalk does when the robot's receiving mode is HTTP.

What DingTalk's documentation promises and the channel must keep (K2): a request is DingTalk's only when
``sign`` is the HMAC of its ``timestamp`` and the app secret, and only within an hour of it; anything else
is refused with 401 and stored nowhere; a message posted again is answered once; the answer goes through
the message's session webhook, like a stream message's.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing

import pytest

from tests.contract.harness import eventually, settled
from tests.e2e.rig import served

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def stored(rig) -> int:
    with closing(sqlite3.connect(rig.gateway.config.database_path)) as db:
        return db.execute("SELECT count(*) FROM inbound WHERE channel = 'dingtalk'").fetchone()[0]


def message(msg_id: str = "msgForged1", text: str = "let me in") -> str:
    return json.dumps({"msgId": msg_id, "conversationType": "1", "conversationId": "cid-x", "senderStaffId": "intruder",
                       "msgtype": "text", "text": {"content": text}})


async def test_a_signed_callback_is_stored_answered_through_the_session_webhook_and_once_when_posted_again(dingtalk_rig):
    rig = await dingtalk_rig(mode="http")
    said = await rig.server.say("hello by http")
    [answer] = await rig.answers("learner1", 1)
    assert (answer.via, answer.text) == ("webhook", "echo: hello by http")
    assert rig.server.callback_answers == [200]
    assert rig.server.tickets_opened == 0  # no stream in HTTP mode
    await rig.server.redeliver(said)
    await eventually(lambda: len(rig.server.callback_answers) == 2 and settled(rig.gateway), what="the repeat answered")
    assert rig.server.callback_answers == [200, 200]
    assert len(rig.server.in_chat("learner1")) == 1 and len(rig.responder.turns) == 1


async def test_group_at_messages_by_http_are_answered_in_the_group(dingtalk_rig):
    rig = await dingtalk_rig(mode="http")
    await rig.server.say("2+2?", user="learner4", group="cidGroupH")
    [answer] = await rig.answers("cidGroupH", 1)
    assert answer.text == "echo: 2+2?"


@pytest.mark.parametrize("why", ["no sign", "wrong secret", "an hour and more old", "not a number", "sign of another time"])
async def test_a_forged_or_stale_callback_gets_401_and_is_not_stored(dingtalk_rig, why):
    rig = await dingtalk_rig(mode="http")
    now = str(int(time.time() * 1000))
    old = str(int((time.time() - 3700) * 1000))
    headers = {
        "no sign": {"timestamp": now},
        "wrong secret": {"timestamp": now, "sign": rig.server.sign(now, secret="not-the-app-secret")},
        "an hour and more old": {"timestamp": old, "sign": rig.server.sign(old)},
        "not a number": {"timestamp": "soon", "sign": rig.server.sign("soon")},
        "sign of another time": {"timestamp": now, "sign": rig.server.sign(old)},
    }[why]
    status = await rig.server.post_callback(message(), headers=headers)
    assert status == 401
    assert stored(rig) == 0 and rig.responder.turns == []


async def test_a_signed_body_that_is_not_a_robot_message_gets_400_and_the_account_goes_on(dingtalk_rig):
    rig = await dingtalk_rig(mode="http")
    stamp = str(int(time.time() * 1000))
    status = await rig.server.post_callback('{"msgtype": "text"', headers={"timestamp": stamp,
                                                                            "sign": rig.server.sign(stamp)})
    assert status == 400
    await rig.server.say("still here")
    [answer] = await rig.answers("learner1", 1)
    assert answer.text == "echo: still here"


async def test_a_type_not_read_is_acknowledged_and_recorded_not_answered(dingtalk_rig):
    rig = await dingtalk_rig(mode="http")
    stamp = str(int(time.time() * 1000))
    body = json.dumps({"msgId": "msgPoll1", "conversationType": "1", "conversationId": "cid-p",
                       "senderStaffId": "learner5", "msgtype": "interactiveCard"})
    status = await rig.server.post_callback(body, headers={"timestamp": stamp, "sign": rig.server.sign(stamp)})
    assert status == 200  # DingTalk would post it again otherwise
    assert stored(rig) == 0 and rig.responder.turns == []


async def test_a_stream_account_refuses_callbacks_and_stores_nothing(dingtalk_rig):
    rig = await dingtalk_rig()
    async with served(rig.gateway) as url:
        rig.server.callback_url = f"{url}/webhooks/dingtalk/school"
        status = await rig.server.post_callback(message("msgNoHttp"))
    assert 400 <= status < 500
    assert stored(rig) == 0 and rig.responder.turns == []
