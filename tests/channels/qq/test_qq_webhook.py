"""A QQ bot through its webhook and OpenAPI, on the emulator: what the learner sees, what QQ is told.

Each test drives the real gateway over loopback HTTP: the emulator signs and
posts events as QQ does, and records the replies it takes.
"""

from __future__ import annotations

import json
import time

from tests.peers.qq_server import REPLIES, signing_key

LEARNER = "LEARNEROPENID0001"


async def test_a_direct_message_is_answered_with_its_msg_id_and_acknowledged_op_12(qq_rig):
    rig = await qq_rig()
    msg_id = await rig.peer.say(LEARNER, "hello")
    assert await rig.texts(LEARNER, 1) == ["echo: hello"]
    [sent] = rig.peer.sent
    assert sent["msg_id"] == msg_id and sent["msg_seq"] >= 1
    assert json.loads(rig.peer.deliveries[0].body) == {"op": 12, "d": 0}


async def test_a_group_at_message_and_a_guild_channel_message_are_answered_where_they_came_from(qq_rig):
    rig = await qq_rig()
    await rig.peer.say("group:grpopenid77", "from the group", user="member9")
    await rig.peer.say("channel:8800123", "from the guild", user="4411")
    assert await rig.texts("group:grpopenid77", 1) == ["echo: from the group"]
    assert await rig.texts("channel:8800123", 1) == ["echo: from the guild"]  # the bot's <@!id> is not the learner's


async def test_the_op_13_validation_is_answered_with_the_bots_signature(qq_rig):
    rig = await qq_rig()
    answer, holds = await rig.peer.validate()
    assert answer.status_code == 200 and holds


async def test_a_forged_or_stale_event_is_401_and_not_stored(qq_rig):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    rig = await qq_rig()
    body = rig.peer.event("user", "x1", "x1", "forged", msg_id="M-forged", at=time.time())
    forged = await rig.peer.post(body, rig.peer.signed(body, key=Ed25519PrivateKey.generate()))
    stale = await rig.peer.post(body, rig.peer.signed(body, timestamp=str(int(time.time()) - 3600)))
    tampered = await rig.peer.post(body.replace(b"forged", b"f0rged"), rig.peer.signed(body))
    assert [forged.status_code, stale.status_code, tampered.status_code] == [401, 401, 401]
    validation = json.dumps({"op": 13, "d": {"plain_token": "p", "event_ts": "1"}}).encode()
    unsigned = await rig.peer.post(validation, {"Content-Type": "application/json"})
    assert unsigned.status_code == 401 and "plain_token" not in unsigned.text  # no signing oracle
    await rig.quiet()
    assert rig.inbound_rows() == 0 and rig.peer.sent == []


async def test_a_malformed_event_is_400_and_counted_invalid(qq_rig):
    rig = await qq_rig()
    for body in (b"not json", json.dumps({"op": 0, "t": "C2C_MESSAGE_CREATE", "d": {"content": "no id"}}).encode(),
                 json.dumps({"op": 0, "t": "C2C_MESSAGE_CREATE", "d": {"id": "M1", "content": "x", "author": {},
                                                                     "timestamp": "yesterday"}}).encode()):
        answer = await rig.peer.post(body, rig.peer.signed(body))
        assert answer.status_code == 400, answer.text
        assert "Traceback" not in answer.text
    await rig.quiet()
    assert rig.inbound_rows() == 0


async def test_another_event_is_acknowledged_and_not_answered(qq_rig):
    rig = await qq_rig()
    body = json.dumps({"op": 0, "id": "E1", "t": "GROUP_ADD_ROBOT", "d": {"group_openid": "g"}}).encode()
    answer = await rig.peer.post(body, rig.peer.signed(body))
    assert answer.json() == {"op": 12, "d": 0}
    await rig.quiet()
    assert rig.inbound_rows() == 0


async def test_a_repeated_event_is_answered_once(qq_rig):
    rig = await qq_rig()
    msg_id = await rig.peer.say(LEARNER, "once")
    await rig.texts(LEARNER, 1)
    await rig.peer.say(LEARNER, "once", msg_id=msg_id)  # QQ posts the same message again
    await rig.quiet()
    assert rig.peer.texts_to(LEARNER) == ["echo: once"]


def told(rig, *words: str) -> str:
    """The one report the gateway made for the teacher, naming ``words``; QQ itself cannot carry it (it takes
    no message the teacher did not just ask for), so it waits in the store, where the console shows it."""
    [(state, why, said)] = rig.reports()
    assert all(word in said for word in words), said
    assert state != "sent" and "did not ask for" in why, (state, why)
    return said


async def test_a_sixth_reply_is_not_sent_and_the_teacher_is_told(qq_rig):
    from tests.contract.harness import ContractResponder, eventually

    responder = ContractResponder()
    responder.answer = lambda turn: "\n\n".join(f"part {i} " + "y" * 1990 for i in range(REPLIES + 1))
    rig = await qq_rig(responder=responder)
    await rig.peer.say(LEARNER, "a long question")
    await rig.texts(LEARNER, REPLIES)
    await rig.quiet()
    await eventually(rig.reports, what="the teacher's report")
    assert len(rig.peer.texts_to(LEARNER)) == REPLIES
    assert 22009 not in rig.peer.refused  # the outbound path kept to five; QQ never had to refuse
    told(rig)


async def test_qq_refusing_with_22009_is_recorded_and_the_teacher_told(qq_rig):
    from tests.contract.harness import eventually

    rig = await qq_rig()
    rig.peer.fail_next(400, 22009)
    await rig.peer.say(LEARNER, "are you there?")
    await eventually(rig.reports, what="the teacher's report")
    await rig.quiet()
    told(rig, "22009")
    assert rig.peer.texts_to(LEARNER) == []


async def test_a_reply_past_the_five_minute_group_window_is_not_sent_and_the_teacher_is_told(qq_rig):
    from tests.contract.harness import eventually

    rig = await qq_rig()
    await rig.peer.say("group:grpopenid77", "an old question", user="member9", at=time.time() - 6 * 60)
    await eventually(rig.reports, what="the teacher's report")
    await rig.quiet()
    told(rig, "5 minutes")
    assert rig.peer.texts_to("group:grpopenid77") == []


async def test_a_resent_part_is_dropped_by_qq_as_a_duplicate_and_counted_sent(qq_rig):
    from channels.qq.transport import msg_seq

    rig = await qq_rig()
    msg_id = await rig.peer.say(LEARNER, "hi")
    await rig.texts(LEARNER, 1)
    api = rig.gateway.channel("qq", "school").api
    assert await api.reply(LEARNER, "again", msg_id=msg_id, key="k-1") != "k-1"
    assert await api.reply(LEARNER, "again", msg_id=msg_id, key="k-1") == "k-1"  # QQ said 40054005
    assert rig.peer.texts_to(LEARNER) == ["echo: hi", "again"] and msg_seq("k-1") == msg_seq("k-1")


async def test_an_expired_token_is_fetched_again_once(qq_rig):
    rig = await qq_rig()
    await rig.peer.say(LEARNER, "first")
    await rig.texts(LEARNER, 1)
    rig.peer.expire_token()
    await rig.peer.say(LEARNER, "second")
    assert await rig.texts(LEARNER, 2) == ["echo: first", "echo: second"]
    assert rig.peer.tokens_issued == 2


async def test_the_probe_names_the_bot_and_a_wrong_secret(qq_rig):
    rig = await qq_rig()
    channel = rig.gateway.channel("qq", "school")
    result = await channel.probe()
    assert result.ok and "Tutor Bot" in result.checked
    rig.peer.secret = "Zq" + rig.peer.secret[2:][::-1]
    channel.api.tokens.forget()
    refused = await channel.probe()
    assert not refused.ok and rig.peer.secret not in str(refused)


def test_the_signing_key_is_the_platforms(qq_rig):
    from channels._kit.signatures import ed25519_key_from_secret

    secret = "Kx81abq"
    message = b"1700000000payload"
    ours = ed25519_key_from_secret(secret).sign(message)
    signing_key(secret).public_key().verify(ours, message)
