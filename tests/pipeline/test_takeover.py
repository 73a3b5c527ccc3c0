"""Teacher takeovers through the pipeline: hand over, relay, reply, hand back -- each message answered once."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from gateway.pipeline.outbox import reply_key
from gateway.store import ReplyState
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
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 3)
    await channel.inject("thanks!", chat="kid", user="kid")
    await channel.wait_for(lambda sent: texts_to(channel, "kid")[-1] == "re: thanks!")

    await asyncio.sleep(0.2)
    assert await gateway.store.open_inbound() == []
    assert relayed.event_id
    # first answer, the teacher's reply, the hand-back notice (once), the answer after hand-back
    assert texts_to(channel, "kid") == ["re: I feel unsafe at school", "Yes, I'm here. Let's talk after class.",
                                        say(Phrase.HANDED_BACK, ENGLISH, partner="Tutor"), "re: thanks!"]


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


@pytest.mark.parametrize(("languages", "locale", "language"), [
    (["zh-Hans"], "", CHINESE),            # a Chinese partner: Chinese whatever the platform says
    (["en", "zh-Hans"], "zh-CN", CHINESE),  # a bilingual partner: the learner's locale when it was handed over
    (["en", "zh-Hans"], "", ENGLISH),       # ... else the partner's first language
])
async def test_the_learner_hears_in_their_language_once_that_the_partner_answers_again(start_gateway, languages, locale,
                                                                                       language):
    gateway, channel = await start_gateway(partner={**TEACHER, "languages": languages})
    learner = await channel.inject("I need a person", chat="kid", user="kid", locale=locale)
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 1)
    await gateway.teacher.hand_to_teacher(learner.address, "asks for a person", locale)
    code = (await gateway.store.takeovers())[0].code

    handback = await channel.inject(f"/handback {code}", chat="teacher", user="teacher")
    await channel.inject(f"/handback {code}", chat="teacher", user="teacher")  # a second one finds no case
    await channel.wait_for(lambda sent: any("No open case" in t for t in texts_to(channel, "teacher")))
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 2)
    await asyncio.sleep(0.2)

    notice = say(Phrase.HANDED_BACK, language, partner="Tutor")
    assert texts_to(channel, "kid")[1:] == [notice]
    key = reply_key(learner.address, handback.event_id, "handback")
    item = await gateway.store.get_reply(key)
    assert item is not None and item.state is ReplyState.DELIVERED and item.reply.language == language
    assert [s.key for s in channel.sent if s.chat == "kid"][1:] == [f"{key}:0"]  # sent under the outbox's key


async def test_a_repeated_handback_before_the_case_closed_tells_the_learner_once(start_gateway):
    """A crash between the notice and closing the case repeats the command: the notice's key makes it once."""
    gateway, channel = await start_gateway(partner=TEACHER)
    learner = await channel.inject("help", chat="kid", user="kid")
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 1)
    await gateway.teacher.hand_to_teacher(learner.address, "needs a human")
    takeover = (await gateway.store.takeovers())[0]
    command = channel.message(f"/handback {takeover.code}", chat="teacher", user="teacher")

    await gateway.teacher._tell_learner(takeover, command.event_id)  # the notice written, then the crash
    await channel.wait_for(lambda sent: len(texts_to(channel, "kid")) >= 2)
    await channel.context.sink.accept([command])  # the platform redelivers the command after the restart
    await channel.wait_for(lambda sent: any("handed back" in t for t in texts_to(channel, "teacher")))
    await asyncio.sleep(0.2)
    assert texts_to(channel, "kid")[1:] == [say(Phrase.HANDED_BACK, ENGLISH, partner="Tutor")]
    assert await gateway.store.takeovers() == []
    item = await gateway.store.get_reply(reply_key(learner.address, command.event_id, "handback"))
    assert item is not None and item.state is ReplyState.DELIVERED  # not made ready again by the repeat
