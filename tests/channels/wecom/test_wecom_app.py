"""A WeCom self-built app end to end: WeCom's encrypted callbacks in, app messages out, over loopback HTTP.

Every check reads what the emulated WeCom saw (what it was answered, what it was
asked to send) or the gateway's store -- nothing in between is faked.
"""

from __future__ import annotations

import time

import pytest

from tests.contract.harness import counter, eventually

LONG = "光合作用把光能变成化学能。" * 200  # 13 characters, 39 bytes, 200 times: 2,600 characters, 7,800 bytes


async def test_the_consoles_url_check_is_answered_with_the_decrypted_echostr(app_rig):
    rig = await app_rig()
    answer = await rig.peer.verify_url()
    assert answer.status_code == 200 and answer.text == answer.extensions["echostr"]
    forged = await rig.peer.verify_url(token="not-the-token")
    assert forged.status_code == 401 and answer.extensions["echostr"] not in forged.text


async def test_a_members_message_is_stored_answered_empty_and_replied_to_once(app_rig):
    rig = await app_rig()
    await rig.peer.say("zhangsan", "你好, tutor")
    [delivery] = rig.peer.deliveries  # answered in time: WeCom does not retry
    assert (delivery.status, delivery.body) == (200, "")
    assert await rig.texts("zhangsan", 1) == ["echo: 你好, tutor"]
    await rig.quiet()
    [sent] = rig.peer.sent
    assert sent["agentid"] == rig.peer.agentid and sent["msgtype"] == "text" and sent["enable_duplicate_check"] == 0
    assert len(rig.responder.turns) == 1 and rig.inbound_rows() == 1


async def test_a_forged_signature_or_an_unencrypted_body_is_refused_401_and_nothing_is_stored(app_rig):
    rig = await app_rig()
    plain = rig.peer.message("zhangsan", "let me in")
    query, body = rig.peer.envelope(plain, token="not-the-token")
    assert (await rig.peer.post(query, body)).status_code == 401
    signed_query, _ = rig.peer.envelope(plain)
    assert (await rig.peer.post(signed_query, plain)).status_code == 401  # no <Encrypt>: WeCom never sends one
    from channels._kit.msgcrypt import WechatCrypto
    from channels._kit.wechat_xml import write_fields

    other = WechatCrypto(rig.peer.aes_key, "ww-another-company").encrypt(plain)  # right key, another corpid
    body = write_fields({"ToUserName": "ww-another-company", "Encrypt": other})
    assert (await rig.peer.post(rig.peer._query(other), body)).status_code == 401
    await rig.quiet()
    assert rig.inbound_rows() == 0 and rig.responder.turns == [] and rig.peer.sent == []


async def test_a_stale_timestamp_is_refused_and_nothing_is_stored(app_rig):
    rig = await app_rig()
    query, body = rig.peer.envelope(rig.peer.message("zhangsan", "an old request"), timestamp=int(time.time()) - 3600)
    assert (await rig.peer.post(query, body)).status_code == 401
    assert rig.inbound_rows() == 0


async def test_a_malformed_callback_is_400_and_counted_never_a_traceback(app_rig):
    rig = await app_rig()
    no_msgid = b"<xml><MsgType>text</MsgType><FromUserName>zhangsan</FromUserName><CreateTime>1</CreateTime></xml>"
    answer = await rig.peer.post(*rig.peer.envelope(no_msgid))
    assert answer.status_code == 400 and "invalid event" in answer.text
    assert rig.inbound_rows() == 0
    assert counter(rig.gateway, "partners_dropped_total", channel="wecom", reason="invalid event") == 1


async def test_wecoms_retries_of_one_msgid_are_answered_once(app_rig):
    rig = await app_rig()
    await rig.peer.say("zhangsan", "did you get this?", msg_id="424242", attempts=4)  # as if each 200 were lost
    assert [d.status for d in rig.peer.deliveries] == [200] * 4
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="wecom") >= 3,
                     what="the retries to be recognised")
    await rig.quiet()
    assert rig.peer.texts_to("zhangsan") == ["echo: did you get this?"] and len(rig.responder.turns) == 1


async def test_an_expired_access_token_is_fetched_again_once(app_rig):
    rig = await app_rig()
    await rig.peer.say("zhangsan", "first")
    await rig.texts("zhangsan", 1)
    assert rig.peer.tokens_issued == 1
    rig.peer.expire_token()  # WeCom answers 42001 to the token the gateway holds
    await rig.peer.say("zhangsan", "second")
    assert await rig.texts("zhangsan", 2) == ["echo: first", "echo: second"]
    assert rig.peer.tokens_issued == 2 and rig.peer.refused == [42001]


async def test_a_long_chinese_answer_is_split_in_bytes_under_2048(app_rig):
    rig = await app_rig()
    rig.responder.answer = lambda turn: LONG
    await rig.peer.say("zhangsan", "讲讲光合作用")
    await eventually(lambda: "".join(rig.peer.texts_to("zhangsan")).replace("\n", "").replace(" ", "")
                     == LONG or None, what="the whole answer")
    await rig.quiet()
    parts = rig.peer.texts_to("zhangsan")
    assert len(parts) >= 4  # 7,800 bytes do not fit in three parts of 2,048 bytes
    assert all(len(part.encode()) <= 2048 for part in parts) and rig.peer.refused == []


async def test_a_rate_limit_is_waited_out_and_the_answer_still_arrives_once(app_rig):
    rig = await app_rig()
    rig.peer.fail_next(45009)
    await rig.peer.say("zhangsan", "hello")
    assert await rig.texts("zhangsan", 1) == ["echo: hello"]
    await rig.quiet()
    assert rig.peer.refused == [45009] and rig.peer.texts_to("zhangsan") == ["echo: hello"]


@pytest.mark.parametrize("kind", ["location", "event"])
async def test_other_message_types_are_answered_and_refused_not_stored(app_rig, kind):
    from channels._kit.wechat_xml import write_fields

    rig = await app_rig()
    plain = write_fields({"ToUserName": rig.peer.corpid, "FromUserName": "zhangsan", "CreateTime": int(time.time()),
                          "MsgType": kind, "Event": "enter_agent", "MsgId": "9"})
    answer = await rig.peer.post(*rig.peer.envelope(plain))
    assert (answer.status_code, answer.text) == (200, "")
    assert rig.inbound_rows() == 0
