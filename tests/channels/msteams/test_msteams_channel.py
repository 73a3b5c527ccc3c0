"""Teams' conversations as the bot sees them: group chats and channels by @-mention, threads, proactive sends, streams."""

from __future__ import annotations

import pytest

from gateway.core.messages import ConversationKind, Mention, Referrer, RenderedPart, StreamChunk
from tests.contract.harness import eventually

CHANNEL = "19:maths@thread.tacv2"


async def test_a_channel_post_that_mentions_the_bot_is_answered_in_its_thread_without_the_mention(teams_rig):
    rig = await teams_rig()
    post = rig.peer.activity(f"{CHANNEL};messageid=1700000000001", "amy", "what is a prime?", kind="channel",
                             mention=True)
    await rig.peer.deliver(post)
    assert await rig.texts(CHANNEL, 1) == ["echo: what is a prime?"]
    [message] = rig.responder.turns[0].messages
    assert message.address.conversation.kind is ConversationKind.GROUP
    assert (message.address.conversation.chat, message.address.conversation.thread) == (CHANNEL, "1700000000001")
    assert any(isinstance(e, Mention) and e.is_self for e in message.elements)
    assert "<at>" not in message.text
    [shown] = rig.peer.seen_in(CHANNEL)
    assert shown.conversation == f"{CHANNEL};messageid=1700000000001"  # the thread, not the channel's top level
    assert shown.reply_to == post["id"]


async def test_a_channel_post_without_the_mention_is_not_answered(teams_rig):
    rig = await teams_rig()
    await rig.peer.deliver(rig.peer.activity(f"{CHANNEL};messageid=1700000000002", "amy", "hi all", kind="channel"))
    await rig.peer.deliver(rig.peer.activity(f"{CHANNEL};messageid=1700000000002", "amy", "tutor?", kind="channel",
                                             mention=True))
    assert await rig.texts(CHANNEL, 1) == ["echo: tutor?"]
    await rig.quiet()
    assert len(rig.responder.turns) == 1 and len(rig.peer.seen_in(CHANNEL)) == 1


async def test_another_mention_stays_as_its_name(teams_rig):
    rig = await teams_rig()
    activity = rig.peer.activity("19:g@thread.v2", "amy", "ask <at>Ben</at> too", kind="groupChat", mention=True)
    activity["entities"].append({"type": "mention", "text": "<at>Ben</at>", "mentioned": {"id": "29:ben", "name": "Ben"}})
    await rig.peer.deliver(activity)
    assert await rig.texts("19:g@thread.v2", 1) == ["echo: ask @Ben too"]


async def test_a_proactive_send_after_a_restart_goes_by_the_stored_conversation_reference(teams_rig):
    first = await teams_rig()
    await first.peer.deliver(first.peer.activity("a:1amy", "amy", "remind me tomorrow"))
    await first.texts("a:1amy", 1)
    address = first.responder.turns[0].messages[0].address
    await first.gateway.stop()
    again = await teams_rig(peer=first.peer, data=first.data_dir)
    channel = again.gateway.channel("msteams", "school")
    sent = await channel.send(address, RenderedPart(index=0, text="Time to practise!"), referrer=Referrer(),
                              idempotency_key="reminder-1")
    shown = first.peer.seen_in("a:1amy")[-1]
    assert (shown.id, shown.text, shown.reply_to) == (sent.message, "Time to practise!", None)


@pytest.mark.parametrize("updates", [0, 1], ids=["stopped-before-any-update", "stopped-then-updated"])
async def test_a_stream_the_learner_stopped_ends_with_the_answer_as_a_message(teams_rig, updates: int):
    rig = await teams_rig()
    await rig.peer.deliver(rig.peer.activity("a:1amy", "amy", "hi"))
    await rig.texts("a:1amy", 1)
    message = rig.responder.turns[0].messages[0]
    channel = rig.gateway.channel("msteams", "school")
    stream = await channel.start(message.address, message.referrer, "s:p")
    opened = rig.peer.shown[-1]
    opened.stopped = True
    for _ in range(updates):
        await channel.append(stream, StreamChunk(delta="Half", so_far=RenderedPart(index=0, text="Half")))
    sent = await channel.finish(stream, RenderedPart(index=0, text="The whole answer."))
    assert rig.peer.refused.count(403) == 1  # once refused, the stream is not tried again
    assert rig.peer.seen_in("a:1amy")[-1].text == "The whole answer."
    assert sent.message == rig.peer.seen_in("a:1amy")[-1].id != opened.id


async def test_a_finish_retried_after_its_answer_was_lost_sends_nothing_more(teams_rig):
    rig = await teams_rig()
    await rig.peer.deliver(rig.peer.activity("a:1amy", "amy", "hi"))
    await rig.texts("a:1amy", 1)
    message = rig.responder.turns[0].messages[0]
    channel = rig.gateway.channel("msteams", "school")
    stream = await channel.start(message.address, message.referrer, "s:p")
    first = await channel.finish(stream, RenderedPart(index=0, text="Done."))
    again = await channel.finish(stream, RenderedPart(index=0, text="Done."))
    assert first == again
    assert [s.text for s in rig.peer.seen_in("a:1amy")] == ["echo: hi", "Done."]


async def test_a_streamed_answer_grows_in_one_bubble(teams_rig):
    rig = await teams_rig()
    rig.responder.stream = ["Plants ", "use light ", "to make sugar."]
    rig.responder.delta_delay = 1.7  # past min_edit_interval: each delta is its own update
    await rig.peer.deliver(rig.peer.activity("a:1amy", "amy", "photosynthesis?"))
    await eventually(lambda: [s for s in rig.peer.seen_in("a:1amy") if s.final], what="the stream to end")
    [shown] = rig.peer.seen_in("a:1amy")
    assert shown.stream and shown.text == "Plants use light to make sugar."
    assert shown.sequence >= 2  # at least one streaming update after the informative one
