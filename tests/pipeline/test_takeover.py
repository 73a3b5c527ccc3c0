"""Teacher takeovers through the pipeline: hand over, relay, reply, hand back -- each message answered once."""

from __future__ import annotations

import asyncio

from tests.pipeline.conftest import ScriptedResponder

TEACHER = {"owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]}


def texts_to(channel, chat):
    return [s.text for s in channel.sent if s.chat == chat and s.final]


async def test_a_conversation_handed_to_the_teacher_round_trips(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder, partner=TEACHER)
    learner = await channel.inject("I feel unsafe at school", chat="kid", user="kid")
    await channel.wait_for(lambda sent: len(sent) >= 1)

    told_model = await gateway.teacher.hand_to_teacher(learner.address, "the learner may be at risk")
    code = (await gateway.store.takeovers())[0].code
    assert code in told_model
    await channel.wait_for(lambda sent: any(s.chat == "teacher" for s in sent))
    assert f"/reply {code}" in texts_to(channel, "teacher")[0]

    turns_before = len(responder.turns)
    relayed = await channel.inject("are you there?", chat="kid", user="kid")
    await channel.wait_for(lambda sent: len(texts_to(channel, "teacher")) >= 2)
    assert texts_to(channel, "teacher")[1] == f"[{code}] kid: are you there?"
    assert len(responder.turns) == turns_before  # the model stays quiet while the teacher has it

    await channel.inject(f"/reply {code} Yes, I'm here. Let's talk after class.", chat="teacher", user="teacher")
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 2)
    assert texts_to(channel, "kid")[-1] == "Yes, I'm here. Let's talk after class."

    await channel.inject(f"/handback {code}", chat="teacher", user="teacher")
    await channel.wait_for(lambda sent: any("handed back" in t for t in texts_to(channel, "teacher")))
    await channel.inject("thanks!", chat="kid", user="kid")
    await channel.wait_for(lambda sent: texts_to(channel, "kid")[-1] == "re: thanks!")

    await asyncio.sleep(0.2)
    assert await gateway.store.open_inbound() == []
    assert relayed.event_id
    assert len(texts_to(channel, "kid")) == 3  # first answer, the teacher's reply, the answer after hand-back


async def test_owner_commands_with_unknown_codes_get_a_clear_answer(start_gateway):
    gateway, channel = await start_gateway(partner=TEACHER)
    await channel.inject("/reply NOPE hello", chat="teacher", user="teacher")
    await channel.inject("/takeovers", chat="teacher", user="teacher")
    await channel.wait_for(lambda sent: len(sent) >= 2)
    replies = texts_to(channel, "teacher")
    assert "No open case NOPE" in replies[0]
    assert replies[1] == "No conversations are waiting for you."


async def test_learners_cannot_use_teacher_commands(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder, partner=TEACHER)
    await channel.inject("/takeovers", chat="kid", user="kid")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert texts_to(channel, "kid") == ["re: /takeovers"]


async def test_a_partner_without_a_teacher_says_so(start_gateway):
    gateway, channel = await start_gateway()
    learner = await channel.inject("help", chat="kid", user="kid")
    told = await gateway.teacher.hand_to_teacher(learner.address, "worried")
    assert "No teacher is configured" in told
    assert await gateway.store.takeovers() == []
