"""The Mattermost bot through httpx and the kit's websocket session against the loopback emulator.

Each test posts at the emulator as a Mattermost user would and reads what the
user sees: the bot's posts in the channel, after any patches.
"""

from __future__ import annotations

import json

import pytest

from gateway.core.errors import RateLimited
from gateway.core.messages import Attachment, Media, Referrer, RenderedPart
from tests.contract.harness import counter, eventually

DM, CLASS = "d" + "1" * 25, "o" + "2" * 25


async def test_a_direct_message_is_answered_once_where_it_was_said(rig):
    await rig.server.say("hello", channel=DM, user="ana")
    [answer] = await rig.answers(DM, 1)
    assert answer.message == "echo: hello" and answer.root_id == ""
    [turn] = rig.responder.turns
    assert turn.messages[0].sender.user == "ana" and turn.messages[0].address.conversation.chat == DM


async def test_a_channel_post_is_answered_only_when_mentioned_and_then_in_a_thread_under_it(rig):
    await rig.server.say("just chatting", channel=CLASS, user="ana", kind="O")
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="mattermost") >= 1,
                     what="the unaddressed post to be dropped")
    asked = await rig.server.say("what is a prime?", channel=CLASS, user="ana", kind="O", mention=True)
    [answer] = await rig.answers(CLASS, 1)
    assert answer.root_id == asked.id and answer.message == "echo: what is a prime?"
    assert "@" not in rig.responder.turns[0].messages[0].text


async def test_a_reply_in_the_bots_thread_addresses_it_without_a_mention_and_is_answered_in_that_thread(rig):
    asked = await rig.server.say("first", channel=CLASS, user="ana", kind="O", mention=True)
    await rig.answers(CLASS, 1)
    follow = await rig.server.say("and then?", channel=CLASS, user="ana", kind="O", root_id=asked.id)
    answers = await rig.answers(CLASS, 2)
    assert answers[1].root_id == asked.id and answers[1].message == "echo: and then?"
    assert rig.responder.turns[1].messages[0].address.conversation.thread == asked.id
    assert follow.id != asked.id


async def test_a_streamed_answer_is_one_post_patched_at_most_once_a_second_then_to_the_final_text(rig):
    rig.responder.stream = ["Thinking", " it", " over", " slowly", " and", " carefully:", " yes."]
    rig.responder.delta_delay = 0.4
    await rig.server.say("stream please", channel=DM, user="ana")
    [answer] = await rig.answers(DM, 1)
    assert answer.message == "Thinking it over slowly and carefully: yes."
    assert rig.server.patches >= 2 and answer.edits == rig.server.patches
    previews = [answer.made, *rig.server.patched_at[:-1]]  # the final patch is the delivery, not a preview
    gaps = [b - a for a, b in zip(previews, previews[1:], strict=False)]
    assert gaps and all(gap >= 0.9 for gap in gaps), f"previews patched more than once a second: {gaps}"


async def test_the_partner_shows_typing_on_the_socket_while_it_works(rig):
    rig.responder.stream = ["slow", " answer"]
    rig.responder.delta_delay = 0.6
    await rig.server.say("take your time", channel=DM, user="ana")
    await rig.answers(DM, 1)
    assert any(t.get("channel_id") == DM for t in rig.server.typing)


async def test_a_post_with_a_file_arrives_as_a_reference_fetched_with_the_token(rig):
    info = rig.server.add_file("homework.png", b"\x89PNG-bytes", "image/png")
    await rig.server.say("my homework", channel=DM, user="ana", file_ids=(info["id"],))
    await rig.answers(DM, 1)
    [media] = [e for e in rig.responder.turns[0].messages[0].elements if isinstance(e, Media)]
    assert media.kind == "image" and media.name == "homework.png" and media.ref is not None
    assert media.blob is not None and await rig.gateway.blobs.get(media.blob) == b"\x89PNG-bytes"


async def test_a_file_on_disk_is_uploaded_and_attached_to_the_answer(rig, tmp_path):
    sheet = tmp_path / "sheet.pdf"
    sheet.write_bytes(b"%PDF-1.4 worksheet")
    rig.responder.attachments = (Attachment(kind="file", path=str(sheet), name="sheet.pdf", mime_type="application/pdf"),)
    await rig.server.say("a worksheet?", channel=DM, user="ana")
    await eventually(lambda: any(p.file_ids for p in rig.server.shown(DM)), what="the uploaded file")
    [file_id] = [f for p in rig.server.shown(DM) for f in p.file_ids]
    assert rig.server.file_bytes[file_id] == b"%PDF-1.4 worksheet"


async def test_posts_made_while_the_socket_was_down_are_caught_up_and_answered_once(rig):
    await rig.server.say("before", channel=DM, user="ana")
    await rig.answers(DM, 1)
    await rig.server.drop()
    missed = [await rig.server.say(f"missed {n}", channel=DM, user="ana", push=False) for n in range(3)]
    await rig.server.connected(2)
    answers = await rig.answers(DM, 4)
    await rig.quiet()
    assert [a.message for a in answers] == ["echo: before", *(f"echo: {p.message}" for p in missed)]


async def test_a_restart_catches_up_what_was_said_while_the_gateway_was_down_but_not_before_it_first_ran(open_rig):
    rig = await open_rig(connect=False)
    server = rig.server
    await server.connected()
    await server.say("hello", channel=DM, user="ana")
    await rig.answers(DM, 1)
    await rig.gateway.stop()
    await server.say("while you were away", channel=DM, user="ana", push=False)
    await server.say("in class too", channel=CLASS, user="ben", kind="O", mention=True, push=False)
    again = await open_rig()
    await eventually(lambda: len(server.shown(DM)) == 2 and len(server.shown(CLASS)) == 1, what="the caught-up answers")
    await again.quiet()
    assert [p.message for p in server.shown(DM)] == ["echo: hello", "echo: while you were away"]


async def test_malformed_frames_are_recorded_and_the_account_keeps_answering(rig):
    socket = next(iter(rig.server._sockets))
    await socket.send_str("not json")
    await socket.send_json({"event": "posted", "data": {"post": "{not json", "channel_type": "D"}, "seq": 99})
    await socket.send_json({"event": "posted", "data": {"post": json.dumps({"id": "x"}), "channel_type": "D"}, "seq": 100})
    await rig.server.say("still there?", channel=DM, user="ana")
    [answer] = await rig.answers(DM, 1)
    assert answer.message == "echo: still there?"
    assert counter(rig.gateway, "partners_dropped_total", channel="mattermost", reason="invalid event") == 3


async def test_a_refused_token_stops_the_account_with_the_reason(open_rig):
    rig = await open_rig(token="wrong" * 5, connect=False)

    async def failed():
        [account] = (await rig.gateway.status()).accounts
        return account if account.state == "action_required" else None

    account = await eventually(failed, what="the account to report the refused token")
    assert "401" in account.reason and "wrong" not in account.reason
    assert rig.server.authenticated == 0


async def test_a_system_message_is_not_answered(rig):
    await rig.server.say("ana joined the channel", channel=DM, user="ana", type="system_join_channel")
    await rig.server.say("real question", channel=DM, user="ana")
    [answer] = await rig.answers(DM, 1)
    assert answer.message == "echo: real question"
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["real question"]


async def test_a_429_naming_its_wait_only_in_x_ratelimit_reset_is_rate_limited_for_that_long(rig):
    await rig.server.say("hi", channel=DM, user="ana")
    await rig.answers(DM, 1)
    target = rig.responder.turns[0].messages[0].address
    channel = rig.gateway.channel("mattermost", "school")
    rig.server.reset_only = True
    rig.server.fail_next_send(429, retry_after=3)
    with pytest.raises(RateLimited) as caught:
        await channel.send(target, RenderedPart(index=0, text="direct"), referrer=Referrer(), idempotency_key="k")
    assert caught.value.retry_after == 3


async def test_a_token_the_websocket_refuses_stops_the_account_for_a_human(open_rig):
    rig = await open_rig(connect=False)
    rig.server.refuse_challenge = True
    await rig.server.drop()

    async def stopped():
        [account] = (await rig.gateway.status()).accounts
        return account if account.state == "action_required" else None

    account = await eventually(stopped, what="the account to stop on the refused challenge")
    assert "websocket refused the token" in account.reason
