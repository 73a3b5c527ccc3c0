"""The shared pipeline end to end, in process, on the durable SQLite path."""

from __future__ import annotations

import asyncio

from gateway.core.capabilities import EditMode
from gateway.core.errors import BadRequest, PeerUnavailable, RateLimited
from gateway.core.messages import ConversationKind
from gateway.pipeline.delivery import APOLOGY
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder
from tests.pipeline.memory_channel import DEFAULT_CAPS
from tests.waits import tries


def finals(channel):
    return [s for s in channel.sent if s.final]


async def test_message_in_reply_out(start_gateway):
    gateway, channel = await start_gateway()
    await channel.inject("what is 2+2?")
    await channel.wait_for(lambda sent: any(s.final for s in sent))
    assert list(channel.visible().values()) == ["re: what is 2+2?"]


async def test_redelivered_event_is_answered_once(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder)
    await channel.inject("hello", event="42")
    await channel.inject("hello", event="42")
    await channel.wait_for(lambda sent: any(s.final for s in sent))
    await asyncio.sleep(0.2)
    assert len(responder.turns) == 1
    assert len(channel.visible()) == 1
    assert gateway.metrics.dedup_hits.labels("memory", "acct")._value.get() == 1


async def test_burst_is_coalesced_into_one_turn(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder, pipeline={"coalesce_window_s": 0.3})
    for text in ("so", "about the", "homework"):
        await channel.inject(text)
        await asyncio.sleep(0.05)
    await channel.wait_for(lambda sent: any(s.final for s in sent))
    await asyncio.sleep(0.4)
    assert len(responder.turns) == 1
    assert list(channel.visible().values()) == ["re: so | about the | homework"]


async def test_bursts_from_different_group_members_get_separate_turns(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder, access={"group": "always"}, pipeline={"coalesce_window_s": 0.2})
    await channel.inject("from ann", user="ann", kind=ConversationKind.GROUP, chat="g")
    await channel.inject("from bob", user="bob", kind=ConversationKind.GROUP, chat="g")
    await channel.wait_for(lambda sent: len(sent) >= 2)
    assert sorted(t.sender.user for t in responder.turns) == ["ann", "bob"]


async def test_message_during_a_turn_is_queued_for_the_next_turn(start_gateway):
    responder = ScriptedResponder()
    responder.gate = asyncio.Event()
    gateway, channel = await start_gateway(responder)
    await channel.inject("first")
    while not responder.turns:
        await asyncio.sleep(0.01)
    await channel.inject("second")
    responder.gate.set()
    await channel.wait_for(lambda sent: len(sent) >= 2)
    assert [s.text for s in channel.sent] == ["re: first", "re: second"]


async def test_message_during_a_turn_merges_into_it_for_merge_partners(start_gateway):
    class MergingResponder(ScriptedResponder):
        async def respond(self, turn):
            self.turns.append(turn)
            await self.gate.wait()  # a round boundary comes after the learner typed again
            extra = turn.take_arrivals()
            from gateway.core.events import StreamEnd, TurnEnd
            yield StreamEnd(markdown="re: " + " | ".join(m.text for m in [*turn.messages, *extra]))
            yield TurnEnd()

    responder = MergingResponder()
    responder.gate = asyncio.Event()
    gateway, channel = await start_gateway(responder, partner={"mid_turn": "merge"})
    await channel.inject("first")
    while not responder.turns:
        await asyncio.sleep(0.01)
    second = await channel.inject("second")
    await asyncio.sleep(0.05)
    responder.gate.set()
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.2)
    assert [s.text for s in channel.sent] == ["re: first | second"]
    assert len(responder.turns) == 1
    assert await gateway.store.open_inbound() == []
    item = await gateway.store.get_reply(channel.sent[0].key.rsplit(":", 1)[0])
    assert second.event_id in item.reply.in_reply_to


async def test_messages_left_over_from_a_merge_turn_are_answered_in_the_order_they_came(start_gateway):
    """Bob asked before Carl; Ann's turn does not take Carl's arrival, so Bob is answered first, then Carl."""
    responder = ScriptedResponder()
    responder.gate = asyncio.Event()
    gateway, channel = await start_gateway(
        responder, partner={"mid_turn": "merge"}, access={"group": "always"}, pipeline={"coalesce_window_s": 0.2},
    )
    await channel.inject("from ann", user="ann", kind=ConversationKind.GROUP, chat="g")
    await channel.inject("from bob", user="bob", kind=ConversationKind.GROUP, chat="g")
    while not responder.turns:  # ann's turn holds at the gate; bob waits in the queue
        await asyncio.sleep(0.01)
    await channel.inject("from carl", user="carl", kind=ConversationKind.GROUP, chat="g")
    await asyncio.sleep(0.05)
    responder.gate.set()
    await channel.wait_for(lambda sent: sum(s.final for s in sent) >= 3)
    assert [t.sender.user for t in responder.turns] == ["ann", "bob", "carl"]
    assert [s.text for s in finals(channel)] == ["re: from ann", "re: from bob", "re: from carl"]


async def test_rate_limited_send_is_retried_after_retry_after_and_arrives_once(start_gateway):
    gateway, channel = await start_gateway()
    channel.failures = [RateLimited("memory", retry_after=0.3), PeerUnavailable("memory", "502")]
    loop = asyncio.get_running_loop()
    started = loop.time()
    await channel.inject("hello")
    await channel.wait_for(lambda sent: any(s.final for s in sent))
    assert loop.time() - started >= 0.3
    assert [s.text for s in channel.sent] == ["re: hello"]
    key = channel.sent[0].key.rsplit(":", 1)[0]
    item = await gateway.store.get_reply(key)
    assert item.state is ReplyState.DELIVERED and item.attempts == 2


async def test_permanent_error_is_a_dead_letter_with_its_reason(start_gateway):
    gateway, channel = await start_gateway()
    channel.failures = [BadRequest("memory", "chat not found", code=400)]
    await channel.inject("hello")
    for _ in tries(0.02):
        if gateway.metrics.dead_letters.labels("memory", "acct")._value.get() == 1:
            break
        await asyncio.sleep(0.02)
    assert channel.sent == []
    depths = await gateway.store.queue_depths()
    assert depths.outbox_open == {}
    assert gateway.metrics.dead_letters.labels("memory", "acct")._value.get() == 1


async def test_long_reply_is_split_in_the_channels_unit(start_gateway):
    responder = ScriptedResponder(lambda turn: ("word " * 100).strip())
    gateway, channel = await start_gateway(responder)
    await channel.inject("long please")
    await channel.wait_for(lambda sent: len(sent) >= 3)
    assert all(len(s.text) <= DEFAULT_CAPS.text_limit for s in channel.sent)
    assert " ".join(s.text for s in channel.sent).split() == ["word"] * 100


async def test_streamed_reply_is_one_message_edited_in_place(start_gateway):
    responder = ScriptedResponder(lambda turn: "one two three four five six", chunks=6, delay=0.06)
    gateway, channel = await start_gateway(responder)
    await channel.inject("stream it")
    await channel.wait_for(lambda sent: any(s.kind == "edit" and s.final for s in sent))
    sends = [s for s in channel.sent if s.kind == "send"]
    assert len(sends) == 1, channel.sent
    assert sends[0].key.endswith(":p")
    assert any(s.kind == "edit" and not s.final for s in channel.sent)
    assert channel.visible() == {sends[0].message: "one two three four five six"}


async def test_channel_without_edit_gets_only_the_final_message(start_gateway):
    from tests.pipeline.memory_channel import MemoryChannel
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NONE})
    responder = ScriptedResponder(lambda turn: "one two three", chunks=3, delay=0.06)
    gateway, channel = await start_gateway(responder)
    await channel.inject("go")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.1)
    assert [(s.kind, s.text) for s in channel.sent] == [("send", "one two three")]


async def test_own_messages_are_ignored(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder)
    echo = await channel.inject("my own reply", from_self=True)
    await asyncio.sleep(0.2)
    assert responder.turns == [] and channel.sent == []
    assert gateway.metrics.dropped.labels("memory", "acct", "own message")._value.get() == 1
    assert echo.dedup_key


async def test_unaddressed_group_chatter_is_dropped_silently(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder)
    await channel.inject("lunch?", kind=ConversationKind.GROUP, chat="g", addressed=False)
    await channel.inject("@bot help", kind=ConversationKind.GROUP, chat="g", addressed=True)
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [t.text for t in responder.turns] == ["@bot help"]


async def test_responder_failure_sends_a_generic_apology_not_the_error(start_gateway):
    class Broken(ScriptedResponder):
        async def respond(self, turn):
            raise RuntimeError("database password is hunter2")
            yield  # pragma: no cover

    gateway, channel = await start_gateway(Broken())
    await channel.inject("hi")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [s.text for s in channel.sent] == [APOLOGY]
    assert "hunter2" not in channel.sent[0].text


async def test_pairing_holds_the_message_and_answers_after_approval(start_gateway):
    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder, access={"dm": "pairing"})
    await channel.inject("can you help?", user="newkid")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    notice = channel.sent[0].text
    requests = await gateway.store.pairing_list()
    assert len(requests) == 1 and requests[0].code in notice
    assert responder.turns == []
    await channel.inject("hello??", user="newkid")
    await asyncio.sleep(0.2)
    assert len(channel.sent) == 1  # the notice is rate-limited, the second message is held too
    assert (await gateway.store.queue_depths()).inbound_held == {"memory:acct": 2}
    await gateway.store.pairing_resolve(requests[0].code, approve=True)
    assert await gateway.dispatcher.release_approved() == 2
    await channel.wait_for(lambda sent: len(sent) >= 2)
    assert channel.sent[1].text == "re: can you help? | hello??"


async def test_refused_sender_gets_one_rate_limited_notice(start_gateway):
    gateway, channel = await start_gateway(access={"dm": "allowlist", "allow_from": ["friend"]})
    await channel.inject("hi", user="stranger")
    await channel.inject("hi again", user="stranger")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.2)
    assert len(channel.sent) == 1 and "can't answer" in channel.sent[0].text
    pending = await gateway.store.open_inbound()
    assert pending == []


async def test_status_reports_accounts_and_queues(start_gateway):
    gateway, channel = await start_gateway()
    report = await gateway.status()
    assert [(a.channel, a.account) for a in report.accounts] == [("memory", "acct")]
    assert report.partners == ["tutor"]


async def test_attachments_the_platform_cannot_carry_become_links(start_gateway):
    from gateway.core.events import StreamEnd, TurnEnd
    from gateway.core.messages import Attachment

    class WithWorksheet(ScriptedResponder):
        async def respond(self, turn):
            yield StreamEnd(markdown="Here is the worksheet.",
                            attachments=(Attachment(kind="file", url="https://school.example/ws.pdf", name="ws.pdf"),))
            yield TurnEnd()

    gateway, channel = await start_gateway(WithWorksheet())
    await channel.inject("worksheet please")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert channel.sent[0].text == "Here is the worksheet.\n\nws.pdf (https://school.example/ws.pdf)"


async def test_a_preview_whose_response_was_lost_is_edited_not_repeated(start_gateway):
    # The first delta's preview is posted but its answer is lost; the turn ends before the next
    # preview would have been tried, so only the outbox row knows a preview may be on screen.
    responder = ScriptedResponder(lambda turn: "the whole answer", chunks=2, delay=0.01)
    gateway, channel = await start_gateway(responder)
    channel.lost_responses = [PeerUnavailable("memory", "504 gateway timeout", code=504)]
    await channel.inject("question")
    await channel.wait_for(lambda sent: any(s.kind == "edit" and s.final for s in sent))
    assert len([s for s in channel.sent if s.kind == "send"]) == 1
    assert list(channel.visible().values()) == ["the whole answer"]


async def test_a_final_send_whose_response_was_lost_is_not_repeated(start_gateway):
    from tests.pipeline.memory_channel import MemoryChannel
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NONE})
    gateway, channel = await start_gateway()
    channel.lost_responses = [PeerUnavailable("memory", "504 gateway timeout", code=504)]
    await channel.inject("question")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(1.5)  # past the retry's backoff
    assert [s.text for s in channel.sent] == ["re: question"]


async def test_stop_cancels_the_running_turn_and_answers_both_messages_once(start_gateway):
    from gateway.pipeline.lanes import STOPPED

    responder = ScriptedResponder()
    responder.gate = asyncio.Event()  # the turn never finishes on its own
    gateway, channel = await start_gateway(responder)
    question = await channel.inject("explain everything")
    while not responder.turns:
        await asyncio.sleep(0.01)
    stop = await channel.inject("/stop")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await asyncio.sleep(0.2)
    assert [s.text for s in channel.sent] == [STOPPED]
    assert await gateway.store.open_inbound() == []
    key = channel.sent[0].key.rsplit(":", 1)[0]
    item = await gateway.store.get_reply(key)
    assert set(item.reply.in_reply_to) == {question.event_id, stop.event_id}


async def test_stop_with_nothing_running_says_so(start_gateway):
    from gateway.pipeline.lanes import NOTHING_TO_STOP

    responder = ScriptedResponder()
    gateway, channel = await start_gateway(responder)
    await channel.inject("/stop")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [s.text for s in channel.sent] == [NOTHING_TO_STOP] and responder.turns == []
