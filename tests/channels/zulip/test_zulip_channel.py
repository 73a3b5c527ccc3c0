"""The Zulip bot through its httpx client against the loopback emulator: DMs, streams and topics, the queue.

Each test says something at the emulator as a Zulip user would and reads what
the people there see: the messages the bot sent, as edited.
"""

from __future__ import annotations

from tests.contract.harness import counter, eventually
from tests.peers.zulip_server import BOT_ID


async def test_a_direct_message_is_answered_once_to_that_person(rig):
    said = await rig.server.say("hello", user="Ada")
    [answer] = await rig.answers(said.chat, 1)
    assert answer.content == "echo: hello" and answer.topic is None
    [turn] = rig.responder.turns
    assert turn.messages[0].sender.user == str(said.message["sender_id"]) and turn.messages[0].addressed


async def test_a_stream_message_is_answered_in_its_own_topic_and_only_when_mentioned(rig):
    await rig.server.say("just chatting", stream="algebra", topic="homework 3")
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="zulip") >= 1,
                     what="the unaddressed stream message to be dropped")
    said = await rig.server.say("what is a prime?", stream="algebra", topic="homework 3", mention=True)
    [answer] = await rig.answers(said.chat, 1)
    assert answer.topic == "homework 3" and answer.content == "echo: what is a prime?"
    [turn] = rig.responder.turns
    message = turn.messages[0]
    assert message.text == "what is a prime?" and message.addressed
    assert message.address.conversation.thread == "homework 3" and message.address.conversation.title == "algebra"


async def test_two_topics_of_one_stream_are_two_conversations(rig):
    first = await rig.server.say("first topic", stream="algebra", topic="primes", mention=True)
    await rig.server.say("second topic", stream="algebra", topic="fractions", mention=True)
    answers = await rig.answers(first.chat, 2)
    assert {(a.topic, a.content) for a in answers} == {("primes", "echo: first topic"), ("fractions", "echo: second topic")}
    keys = {t.messages[0].address.conversation.key for t in rig.responder.turns}
    assert len(keys) == 2


async def test_a_group_dm_is_one_conversation_of_everyone_in_it(rig):
    said = await rig.server.say("can you help us?", user="Ada", with_users=("Grace",), mention=True)
    [answer] = await rig.answers(said.chat, 1)
    assert said.chat.startswith("dm:") and str(BOT_ID) in said.chat
    assert answer.content == "echo: can you help us?"


async def test_a_lost_queue_is_registered_again_and_caught_up_without_a_gap_or_a_repeat(rig):
    before = await rig.server.say("before the loss")
    await rig.answers(before.chat, 1)
    rig.server.expire_queues()  # Zulip's garbage collection; nobody polls for the messages below
    gap = [await rig.server.say(f"said while no queue existed {n}", user=f"Learner {n}") for n in range(3)]
    after = await eventually(lambda: rig.server.registers >= 2, what="a new queue")
    assert after
    later = await rig.server.say("said on the new queue", user="Learner 9")
    for said in (*gap, later):
        [answer] = await rig.answers(said.chat, 1)
        assert answer.content == "echo: " + said.message["content"]
    await rig.quiet()
    assert rig.server.catch_ups >= 1
    assert len(rig.responder.turns) == 5
    assert len(rig.server.sent) == 5


async def test_a_restart_resumes_the_same_queue_and_answers_what_came_meanwhile(open_rig):
    first = await open_rig()
    said = await first.server.say("before the restart")
    await first.answers(said.chat, 1)
    await first.gateway.stop()
    meanwhile = await first.server.say("while the gateway was down")
    second = await open_rig()
    answers = await second.answers(meanwhile.chat, 2)
    assert [a.content for a in answers] == ["echo: before the restart", "echo: while the gateway was down"]
    await second.quiet()
    assert second.server.registers == 1, "the stored queue was resumed, not registered afresh"


async def test_latex_in_dollars_and_math_fences_reaches_zulip_as_written(rig):
    rig.responder.answer = lambda turn: "The area is $$\\pi r^2$$ and $$x_1 * x_2$$.\n\n```math\n\\int_0^1 x_1^2 dx\n```"
    said = await rig.server.say("formulas please")
    [answer] = await rig.answers(said.chat, 1)
    assert "$$\\pi r^2$$" in answer.content and "$$x_1 * x_2$$" in answer.content
    assert "```math\n\\int_0^1 x_1^2 dx\n```" in answer.content


async def test_a_streamed_answer_is_one_message_edited_in_place(rig):
    rig.responder.stream = ["Photosynthesis ", "turns light ", "into sugar."]
    rig.responder.delta_delay = 0.4
    said = await rig.server.say("explain photosynthesis")

    async def final():
        shown = rig.server.shown(said.chat)
        return shown if shown and shown[-1].content == "Photosynthesis turns light into sugar." else None

    [answer] = await eventually(final, what="the final text")
    await rig.quiet()
    assert answer.edits >= 1 and len(rig.server.shown(said.chat)) == 1


async def test_an_event_the_channel_cannot_read_is_recorded_and_does_not_block_the_queue(rig):
    for queue in rig.server.queues.values():
        queue.push({"type": "message", "id": 999_999, "message": {"id": "not a number"}})
    said = await rig.server.say("and after it?")
    [answer] = await rig.answers(said.chat, 1)
    assert answer.content == "echo: and after it?"
    assert counter(rig.gateway, "partners_dropped_total", channel="zulip", reason="invalid event") >= 1
