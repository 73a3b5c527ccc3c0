"""The Matrix channel against a real Synapse: what the contract suite does not reach.

Sync token persistence and gap filling, the invite policy, threads, replies,
mentions, m.replace streaming, txnId deduplication, media both ways, typing,
and the drops with a reason (encrypted and malformed events).
"""

from __future__ import annotations

import json
import logging

import pytest

from gateway.core.capabilities import capabilities_of
from gateway.core.messages import (
    AccountId,
    Address,
    Attachment,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Media,
    Mention,
    Quote,
    Referrer,
    RenderedPart,
)
from tests.contract.harness import counter, eventually
from tests.peers.matrix_client import q, shown_messages

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")


def address(room: str, kind: ConversationKind = ConversationKind.DIRECT) -> Address:
    return Address(channel=ChannelName("matrix"), account=AccountId("main"),
                   conversation=Conversation(chat=ChatId(room), kind=kind))


def answered(rig) -> list[str]:
    return [m.text for turn in rig.responder.turns for m in turn.messages]


async def membership(user, room: str, member: str) -> str | None:
    response = await user.http.get(f"/_matrix/client/v3/rooms/{q(room)}/state/m.room.member/{q(member)}")
    return response.json().get("membership") if response.status_code == 200 else None


# --------------------------------------------------------------------------- the sync token


async def test_a_restart_resumes_from_the_stored_token_and_answers_what_came_while_down(matrix):
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "before the restart")
    await matrix.replies(room, 1)
    await matrix.quiet()
    token = await matrix.gateway.store.get_cursor("matrix", "main", "sync_token")
    assert token
    await matrix.stop()

    await learner.say(room, "while the gateway was down")
    await matrix.start()
    seen = await matrix.replies(room, 2)
    await matrix.quiet()
    assert answered(matrix) == ["before the restart", "while the gateway was down"]
    assert [s.text for s in seen] == ["<p>echo: before the restart</p>", "<p>echo: while the gateway was down</p>"]
    assert await matrix.gateway.store.get_cursor("matrix", "main", "sync_token") != token


async def test_a_failed_sync_waits_in_place_and_the_account_is_not_restarted(matrix):
    """The kit's long-poll loop retries a transient /sync failure from the same token (ADR 0012): the account
    keeps running and its session; only a permanent error or retries run out end ``run``."""
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "before the blip")
    await matrix.replies(room, 1)
    await matrix.quiet()
    proxy = matrix.harness.proxy
    proxy.fail_next(r"/sync$", 503)  # the sync in flight is already past the proxy: the next one fails
    await eventually(lambda: proxy.outcomes["path_failed_503"] == 1, what="a sync to fail")
    await learner.say(room, "after the blip")
    await matrix.replies(room, 2)
    await matrix.quiet()
    assert answered(matrix) == ["before the blip", "after the blip"]

    async def running():
        [account] = (await matrix.gateway.status()).accounts
        return account if account.state == "running" else None

    account = await eventually(running, what="the account to run again")
    assert account.restarts == 0


async def test_a_gap_longer_than_one_sync_timeline_is_paged_in_not_skipped(matrix):
    await matrix.start(timeline_limit=3)
    learner, room = await matrix.dm()
    await learner.say(room, "first")
    await matrix.replies(room, 1)
    await matrix.quiet()
    await matrix.stop()
    said = [f"offline {n}" for n in range(10)]
    for text in said:
        await learner.say(room, text)
    await matrix.start(timeline_limit=3)
    await eventually(lambda: len(answered(matrix)) == 11, what="all eleven messages answered")
    await matrix.quiet()
    assert answered(matrix) == ["first", *said]


async def test_history_from_before_the_first_start_is_not_answered(matrix):
    learner, room = await matrix.dm()
    bot = matrix.harness.users[0]
    await bot.join(room)  # joined by hand, before the gateway ever ran
    await learner.say(room, "said before the gateway existed")
    await matrix.start()
    await eventually(lambda: matrix.gateway.store.get_cursor("matrix", "main", "sync_token"), what="the first token")
    await learner.say(room, "said after it started")
    await matrix.replies(room, 1)
    await matrix.quiet()
    assert answered(matrix) == ["said after it started"]


# --------------------------------------------------------------------------- invitations


async def test_invites_from_allowed_users_are_joined_and_others_declined(matrix):
    friend, stranger = matrix.learner("friend"), matrix.learner("stranger")
    await matrix.start(invites="allowed", invite_from=[friend.user_id])
    welcome = await friend.create_room(invite=[matrix.bot], direct=True)
    refused = await stranger.create_room(invite=[matrix.bot], direct=True)
    await eventually(lambda: membership(friend, welcome, matrix.bot), what="the friend's invite handled")
    await eventually(lambda: _is(membership(stranger, refused, matrix.bot), "leave"), what="the stranger's invite declined")
    assert await membership(friend, welcome, matrix.bot) == "join"


async def test_a_join_that_fails_for_a_moment_is_tried_again_from_the_same_token(matrix):
    """A transient failure while answering an invite must not store the token past it: the sync is tried
    again in place, lists the invite again, and the bot joins -- without a restart."""
    await matrix.start()
    await eventually(lambda: matrix.gateway.store.get_cursor("matrix", "main", "sync_token"), what="the first start")
    matrix.harness.proxy.fail_next(r"/join(/[^/]+)?$", 503)
    learner, room = await matrix.dm()
    await matrix.bot_joined(room)
    await learner.say(room, "hello after the retry")
    await matrix.replies(room, 1)
    assert matrix.harness.proxy.outcomes["path_failed_503"] == 1
    [account] = (await matrix.gateway.status()).accounts
    assert account.restarts == 0


async def test_invite_policy_never_declines_every_invite(matrix):
    await matrix.start(invites="never")
    learner = matrix.learner()
    room = await learner.create_room(invite=[matrix.bot], direct=True)
    await eventually(lambda: _is(membership(learner, room, matrix.bot), "leave"), what="the invite declined")


async def _is(value, expected) -> bool:
    return (await value) == expected


# --------------------------------------------------------------------------- threads, replies, mentions


async def test_a_threaded_message_is_its_own_conversation_and_the_answer_stays_in_the_thread(matrix):
    await matrix.start()
    learner, room = await matrix.dm()
    root = await learner.say(room, "a new topic")
    await matrix.replies(room, 1)
    await learner.say(room, "in the thread", relates={
        "rel_type": "m.thread", "event_id": root, "is_falling_back": True, "m.in_reply_to": {"event_id": root}})
    seen = await matrix.replies(room, 2)
    await matrix.quiet()
    [message] = matrix.responder.turns[-1].messages
    assert message.address.conversation.thread == root
    assert message.address.conversation.key == f"{room}/{root}"
    assert not any(isinstance(e, Quote) for e in message.elements)  # a thread's reply fallback is not a reply
    events = {e["event_id"]: e for e in await learner.events(room)}
    relates = events[seen[1].id]["content"]["m.relates_to"]
    assert relates["rel_type"] == "m.thread" and relates["event_id"] == root
    assert "m.relates_to" not in events[seen[0].id]["content"]  # a direct room's answer needs no reply pointer


async def test_a_reply_to_the_bot_in_a_group_addresses_it_and_the_answer_replies_to_the_asker(matrix):
    await matrix.start()
    learner, mate, room = await matrix.group()
    asked = await learner.say(room, "Tutor: what is a prime?", mentions=[matrix.bot])
    [first] = await matrix.replies(room, 1)
    assert first.reply_to == asked
    follow_up = await mate.say(room, "and why is 1 not one?", relates={"m.in_reply_to": {"event_id": first.id}})
    seen = await matrix.replies(room, 2)
    await matrix.quiet()
    [message] = matrix.responder.turns[-1].messages
    [quote] = [e for e in message.elements if isinstance(e, Quote)]
    assert quote.is_self and quote.message == first.id and "what is a prime?" in quote.text
    assert message.addressed and message.text == "and why is 1 not one?"
    assert seen[1].reply_to == follow_up



async def test_the_answer_in_a_group_mentions_the_asker_so_their_client_notifies_them(matrix):
    """With ``m.mentions`` present, a homeserver highlights only the users it names: sent as ``{}``, the
    answer to a learner's question in a group room never notified them (Element names the replied-to
    sender in every reply for this reason)."""
    await matrix.start()
    learner, mate, room = await matrix.group()
    await learner.say(room, "Tutor: what is a prime?", mentions=[matrix.bot])
    [answer] = await matrix.replies(room, 1)
    await matrix.quiet()

    async def highlighted():
        response = await learner.http.get("/_matrix/client/v3/notifications", params={"only": "highlight"})
        return [n["event"]["event_id"] for n in response.json()["notifications"]]

    await eventually(lambda: _contains(highlighted(), answer.id), what="the answer among the asker's highlights")
    [event] = [e for e in await learner.events(room) if e["event_id"] == answer.id]
    assert event["content"]["m.mentions"] == {"user_ids": [learner.user_id]}


async def _contains(ids, wanted: str) -> bool:
    return wanted in await ids

async def test_mentions_by_m_mentions_alone_or_by_name_in_the_body_both_address_the_bot(matrix):
    await matrix.start()
    learner, _mate, room = await matrix.group()
    await learner.say(room, "a question with a pill only", mentions=[matrix.bot])
    await learner.say(room, "tutor, a question from an older client")
    await learner.say(room, f"{matrix.bot} by full id")
    await learner.say(room, "just chatting, the tutor is not meant", mentions=[])
    await eventually(lambda: len(answered(matrix)) == 3, what="three addressed messages answered")  # turns may merge
    await eventually(lambda: counter(matrix.gateway, "partners_dropped_total", channel="matrix") >= 1,
                     what="the unaddressed message dropped")
    await matrix.quiet()
    messages = [m for turn in matrix.responder.turns for m in turn.messages]
    # What was said, the leading mention set aside (it stays an element: the assertion below).
    assert [m.text for m in messages] == ["a question with a pill only", "a question from an older client", "by full id"]
    assert all(any(isinstance(e, Mention) and e.is_self for e in m.elements) for m in messages)
    assert all(m.address.conversation.kind is ConversationKind.GROUP for m in messages)


# --------------------------------------------------------------------------- outbound


async def test_a_streamed_reply_is_one_event_whose_m_replace_edits_carry_m_new_content(matrix):
    matrix.responder.stream = ["Let me", " think.", " Done."]
    matrix.responder.delta_delay = 0.4
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "stream please")
    await eventually(lambda: _final(matrix, room, "Let me think. Done."), what="the final text")
    await matrix.quiet()
    events = [e for e in await learner.events(room) if e["sender"] == matrix.bot and e["type"] == "m.room.message"]
    originals = [e for e in events if "m.new_content" not in e["content"]]
    edits = [e for e in events if "m.new_content" in e["content"]]
    assert len(originals) == 1 and edits
    for edit in edits:
        assert edit["content"]["m.relates_to"] == {"rel_type": "m.replace", "event_id": originals[0]["event_id"]}
        assert edit["content"]["body"].startswith("* ")
        assert edit["content"]["m.new_content"]["format"] == "org.matrix.custom.html"
    [shown] = shown_messages(await learner.events(room), matrix.bot)
    assert shown["content"]["body"] == "Let me think. Done."


async def _final(rig, room, text) -> bool:
    seen = await rig.harness.seen(room)
    return len(seen) == 1 and text in seen[0].text


async def test_a_retried_send_with_the_same_key_is_deduplicated_by_the_homeserver(matrix):
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "hello")
    await matrix.replies(room, 1)
    await matrix.quiet()
    part = RenderedPart(index=0, text="<p>sent <b>twice</b></p>", plain="sent twice")
    first = await matrix.channel.send(address(room), part, referrer=Referrer(), idempotency_key="reply-1:0")
    again = await matrix.channel.send(address(room), part, referrer=Referrer(), idempotency_key="reply-1:0")
    other = await matrix.channel.send(address(room), part, referrer=Referrer(), idempotency_key="reply-2:0")
    assert first.message == again.message != other.message
    texts = [s.text for s in await matrix.harness.seen(room)]
    assert texts.count("<p>sent <b>twice</b></p>") == 2  # reply-1 once, reply-2 once
    [event] = [e for e in await learner.events(room) if e["event_id"] == first.message]
    assert event["content"]["body"] == "sent twice"


async def test_media_in_is_fetched_into_the_blob_store_and_media_out_is_uploaded(matrix, tmp_path):
    drawing = tmp_path / "answer.png"
    drawing.write_bytes(PNG + b"from the tutor")
    matrix.responder.attachments = (Attachment(kind="image", path=str(drawing), name="answer.png", mime_type="image/png"),)
    await matrix.start()
    learner, room = await matrix.dm()
    mxc = await learner.upload(PNG + b"from the learner", content_type="image/png", filename="homework.png")
    await learner.send(room, {"msgtype": "m.image", "body": "homework.png", "url": mxc,
                              "info": {"mimetype": "image/png", "size": len(PNG) + 16}})
    seen = await matrix.replies(room, 2)
    await matrix.quiet()
    [media] = [e for e in matrix.responder.turns[0].messages[0].elements if isinstance(e, Media)]
    assert media.kind == "image" and media.ref is not None and media.ref.locator == mxc and media.name == "homework.png"
    assert media.blob is not None and media.blob.endswith(".png") and media.mime_type == "image/png"
    assert await matrix.gateway.blobs.get(media.blob) == PNG + b"from the learner"
    [image] = [s for s in seen if s.attachments]
    assert image.attachments[0].startswith("mxc://")
    assert await learner.download(image.attachments[0]) == PNG + b"from the tutor"


async def test_media_declared_over_the_limit_is_not_fetched_but_the_message_still_arrives(matrix):
    await matrix.start()
    learner, room = await matrix.dm()
    mxc = await learner.upload(PNG, content_type="image/png", filename="huge.png")
    await learner.send(room, {"msgtype": "m.file", "body": "huge.bin", "url": mxc, "info": {"size": 10**10}})
    await matrix.replies(room, 1)
    [message] = matrix.responder.turns[0].messages
    [media] = [e for e in message.elements if isinstance(e, Media)]
    assert media.blob is None and media.ref is not None and media.ref.locator == mxc and media.size == 10**10
    assert "the learner sent a file (huge.bin) that could not be fetched: too large (9536.7 MB > 50.0 MB)" in message.text
    assert matrix.harness.proxy.downloads == 0


async def test_a_media_event_with_an_unparsable_mxc_url_does_not_stop_the_account(matrix):
    """nio parses the URL with urlparse, which raises ValueError on "mxc://[x/y"; raised out of the sync
    loop it restarted the account onto the same token and the same event, forever.  Now it is a note."""
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.send(room, {"msgtype": "m.image", "body": "cat.png", "url": "mxc://[broken/cat"})
    await matrix.replies(room, 1)  # answered on its own: sent together, both could come in one sync and one turn
    await learner.say(room, "and a question after it")
    await matrix.replies(room, 2)
    await matrix.quiet()
    first, second = (turn.messages[0] for turn in matrix.responder.turns)
    [media] = [e for e in first.elements if isinstance(e, Media)]
    assert media.blob is None and "unreadable mxc URL" in media.missing
    assert second.text == "and a question after it"
    [account] = (await matrix.gateway.status()).accounts
    assert account.state == "running" and account.restarts == 0


async def test_the_sync_token_is_stored_before_the_file_is_fetched(matrix):
    """With the media repository stuck, the sync that brought a photo must still be taken: its token
    stored (the next /sync asks from it) and the next message's words read; the file follows later."""
    proxy = matrix.harness.proxy
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "hello")
    await matrix.replies(room, 1)
    proxy.media_hold = True
    try:
        mxc = await learner.upload(PNG + b"page", content_type="image/png", filename="page.png")
        event = await learner.send(room, {"msgtype": "m.image", "body": "page.png", "url": mxc})

        def token_stored():
            tokens = [json.loads(body).get("next_batch") for body in proxy.syncs if event.encode() in body]
            return bool(tokens) and any(t in proxy.sinces for t in tokens)

        await eventually(token_stored, what="a /sync from past the photo's sync while its file cannot be fetched")
        assert proxy.downloads == 0 and len(matrix.responder.turns) == 1
    finally:
        proxy.media_hold = False
    await matrix.replies(room, 2)
    [media] = [e for e in matrix.responder.turns[1].messages[0].elements if isinstance(e, Media)]
    assert await matrix.gateway.blobs.get(media.blob or "") == PNG + b"page"


async def test_a_media_repository_that_fails_gives_a_note_and_one_answer(matrix):
    proxy = matrix.harness.proxy
    proxy.media_status = 502
    await matrix.start()
    learner, room = await matrix.dm()
    mxc = await learner.upload(PNG, content_type="image/png", filename="graph.png")
    await learner.send(room, {"msgtype": "m.image", "body": "graph.png", "url": mxc})
    await matrix.replies(room, 1)
    await matrix.quiet()
    [turn] = matrix.responder.turns
    assert "could not be fetched: matrix did not hand it over (file download answered HTTP 502)" in turn.messages[0].text
    assert len(await matrix.harness.seen(room)) == 1


async def test_typing_is_shown_while_the_partner_thinks(matrix):
    matrix.responder.stream = ["", "thinking done"]
    matrix.responder.delta_delay = 1.5
    await matrix.start()
    learner, room = await matrix.dm()
    since = (await learner.sync())["next_batch"]
    await learner.say(room, "are you typing?")

    async def typing_seen():
        nonlocal since
        batch = await learner.sync(since, timeout_ms=500)
        since = batch["next_batch"]
        ephemeral = batch.get("rooms", {}).get("join", {}).get(room, {}).get("ephemeral", {}).get("events", [])
        return any(e["type"] == "m.typing" and matrix.bot in e["content"]["user_ids"] for e in ephemeral)

    await eventually(typing_seen, what="the bot's typing notification")
    await matrix.replies(room, 1)


# --------------------------------------------------------------------------- drops with a reason


async def test_an_encrypted_event_is_dropped_with_a_reason_and_the_room_keeps_working(matrix, caplog):
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.send(room, {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnAc", "sender_key": "k",
                              "device_id": "D", "session_id": "s"}, event_type="m.room.encrypted")
    await learner.say(room, "a plain message after it")
    with caplog.at_level(logging.INFO):
        await matrix.replies(room, 1)
        await eventually(lambda: counter(matrix.gateway, "partners_dropped_total", channel="matrix",
                                         reason="encrypted") >= 1, what="the encrypted event dropped")
    assert "end-to-end encryption is not supported" in caplog.text
    assert answered(matrix) == ["a plain message after it"]


@pytest.mark.parametrize("content, reason", [
    ({"msgtype": "m.text", "body": 42}, "msgtype and body must be strings"),
    ({"body": "no msgtype"}, "'msgtype'"),
    ("not an object", "must be a string, a string and an object"),
    ({"msgtype": "m.image", "body": "cat.png"}, "has no mxc url"),
], ids=["body-not-a-string", "no-msgtype", "content-not-an-object", "image-without-url"])
async def test_malformed_message_content_is_invalid_with_the_reason(matrix, caplog, content, reason):
    """Synapse's client API refuses such content, so it comes the way a laxer server's would: in a /sync answer."""
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "the first one")
    await matrix.replies(room, 1)
    matrix.harness.proxy.inject(room, {"type": "m.room.message", "event_id": "$malformed-1", "sender": learner.user_id,
                                       "origin_server_ts": 1, "content": content})
    await learner.say(room, "a good one " + "x" * 5000 + " \u202e\U0001f600")
    with caplog.at_level(logging.WARNING):
        await matrix.replies(room, 2)
        await eventually(lambda: counter(matrix.gateway, "partners_dropped_total", channel="matrix",
                                         reason="invalid event") >= 1, what="the malformed event dropped")
    await matrix.quiet()
    assert reason in caplog.text
    assert len(answered(matrix)) == 2 and answered(matrix)[1].startswith("a good one")


# --------------------------------------------------------------------------- logging in


async def test_password_login_keeps_one_device_so_a_send_repeated_after_a_restart_is_deduplicated(matrix, monkeypatch):
    monkeypatch.setenv("MATRIX_TEST_PASSWORD", matrix.harness.bot.password)
    login = {"access_token": None, "password": "env:MATRIX_TEST_PASSWORD", "device_id": "PARTNERS"}
    await matrix.start(**login)
    learner, room = await matrix.dm()
    await learner.say(room, "hello by password")
    await matrix.replies(room, 1)
    await matrix.quiet()
    part = RenderedPart(index=0, text="<p>once</p>", plain="once")
    before = await matrix.channel.send(address(room), part, referrer=Referrer(), idempotency_key="resumed:0")
    await matrix.stop()
    await matrix.start(**login)  # a fresh login: a new access token, the same device
    after = await matrix.channel.send(address(room), part, referrer=Referrer(), idempotency_key="resumed:0")
    assert after.message == before.message
    bot = matrix.harness.users[0]
    devices = [d["device_id"] for d in (await bot.call("GET", "/devices"))["devices"]]
    assert devices.count("PARTNERS") == 1


async def test_a_revoked_token_asks_for_a_human_with_the_homeservers_reason(matrix, monkeypatch):
    monkeypatch.setenv(matrix.harness.env, "syt_not_a_real_token")
    await matrix.start()

    async def failing():
        [account] = (await matrix.gateway.status()).accounts
        return account if account.state == "action_required" else None

    account = await eventually(failing, what="the account to report the bad token")  # no restart loop: a human must act
    assert "M_UNKNOWN_TOKEN" in account.reason


async def test_a_file_over_the_upload_limit_goes_by_name_checked_once_before_the_channel(matrix, tmp_path):
    """The outbound path measures files against media_max_bytes (gateway.pipeline.budget); the channel does not
    check again.  The big file is sparse: its size is over the limit, its disk use nothing."""
    limit = capabilities_of("matrix").media_max_bytes
    scan = tmp_path / "scan.png"
    with scan.open("wb") as handle:
        handle.truncate(limit + 1)
    drawing = tmp_path / "answer.png"
    drawing.write_bytes(PNG + b"small enough")
    matrix.responder.attachments = (Attachment(kind="image", path=str(scan), name="scan.png", mime_type="image/png"),
                                    Attachment(kind="image", path=str(drawing), name="answer.png", mime_type="image/png"))
    await matrix.start()
    learner, room = await matrix.dm()
    await learner.say(room, "both scans please")
    seen = await matrix.replies(room, 2)
    await matrix.quiet()
    [text] = [s for s in seen if not s.attachments]
    assert "[image: scan.png]" in text.text
    [image] = [s for s in seen if s.attachments]
    assert await learner.download(image.attachments[0]) == PNG + b"small enough"
