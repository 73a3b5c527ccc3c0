"""The Discord channel through discord.py against the emulator: sessions, intents, threads, commands, limits."""

from __future__ import annotations

import asyncio

from channels.discord.channel import DiscordChannel
from gateway.core.capabilities import TextUnit
from gateway.core.messages import Attachment, Media, Quote
from gateway.core.probes import Gravity
from gateway.pipeline.lanes import NOTHING_TO_STOP
from tests.contract.discord_harness import seen_from
from tests.contract.harness import ContractResponder, eventually, units
from tests.peers.discord_server import LOADING

# --------------------------------------------------------------------------- the session


async def test_a_dropped_socket_resumes_the_session_and_what_was_said_meanwhile_is_answered_once(open_rig):
    rig = await open_rig()
    first = await rig.peer.say("before the drop")
    await rig.replies(first["channel_id"], 1)
    await rig.peer.drop()
    meanwhile = await rig.peer.say("said while the socket was down", user=first["author"]["id"])
    shown = await rig.replies(first["channel_id"], 2, what="the answer replayed by the resume")
    await rig.quiet()
    assert rig.peer.identifies == 1 and rig.peer.resumes == 1
    assert [s.text for s in shown] == ["echo: before the drop", "echo: said while the socket was down"]
    assert shown[1].reply_to == meanwhile["id"]
    assert len(rig.responder.turns) == 2


async def test_a_replayed_dispatch_is_answered_once(open_rig):
    rig = await open_rig()
    said = await rig.peer.say("only once, please")
    await rig.replies(said["channel_id"], 1)
    session = next(iter(rig.peer.sessions.values()))
    frame = next(f for f in session.buffer if f["t"] == "MESSAGE_CREATE" and f["d"]["id"] == said["id"])
    await rig.peer.drop()
    session.buffer.append({**frame, "s": session.seq + 1})  # the Gateway replays it on resume
    session.seq += 1
    await eventually(lambda: rig.peer.resumes == 1, what="the resume")
    await eventually(lambda: rig.metric("partners_dedup_hits_total") >= 1, what="the replay to be recognised")
    await rig.quiet()
    assert len(rig.responder.turns) == 1 and len(rig.peer.seen(said["channel_id"])) == 1


async def test_an_invalidated_session_identifies_again_and_keeps_answering(open_rig):
    rig = await open_rig()
    await rig.peer.invalidate()
    await eventually(lambda: rig.peer.identifies == 2 and rig.peer.connected(), what="a new session")
    said = await rig.peer.say("new session?")
    [reply] = await rig.replies(said["channel_id"], 1)
    assert reply.text == "echo: new session?"


async def test_a_reconnect_request_resumes(open_rig):
    rig = await open_rig()
    await rig.peer.request_reconnect()
    await eventually(lambda: rig.peer.resumes == 1 and rig.peer.connected(), what="the resume after op 7")
    said = await rig.peer.say("still there?")
    await rig.replies(said["channel_id"], 1)


async def test_an_outage_is_reported_and_the_session_resumes_with_nothing_lost(open_rig):
    rig = await open_rig()
    said = await rig.peer.say("hello")
    await rig.replies(said["channel_id"], 1)
    await rig.peer.outage(True)

    async def failing():
        account = await rig.account()
        return account if account.state == "error" else None

    account = await eventually(failing, what="the account to report the dropped connection")
    assert "Gateway" in account.reason
    during = await rig.peer.say("anyone home?", user=said["author"]["id"])
    await rig.peer.outage(False)
    shown = await rig.replies(said["channel_id"], 2, what="the answer after the outage")
    assert shown[1].reply_to == during["id"]
    await eventually(lambda: rig.account(), what="status")
    assert (await rig.account()).state == "running"


# --------------------------------------------------------------------------- intents


async def test_without_message_content_it_answers_dms_mentions_and_replies_and_drops_chatter(open_rig):
    rig = await open_rig(peer={"message_content": False}, message_content=False)
    dm = await rig.peer.say("a DM is read in full")
    assert (await rig.replies(dm["channel_id"], 1))[0].text == "echo: a DM is read in full"
    room = await rig.peer.new_channel()
    await rig.peer.say("chatter the bot cannot read", channel=room)
    await eventually(lambda: rig.metric("partners_dropped_total") >= 1, what="the chatter to be dropped")
    await rig.peer.say("what is a noun?", channel=room, mention=True)
    [answer] = await rig.replies(room, 1)
    assert answer.text == "echo: what is a noun?"  # the leading mention is set aside
    bot_message = rig.peer.seen(room)[0]
    await rig.peer.say("and a verb?", channel=room, reply_to=bot_message)
    shown = await rig.replies(room, 2)
    await rig.quiet()
    assert shown[1].text == "echo: and a verb?"
    quote = rig.responder.turns[-1].messages[0].elements[0]
    assert isinstance(quote, Quote) and quote.is_self
    assert len(rig.responder.turns) == 3


async def test_doctor_says_which_intent_is_missing(open_rig):
    rig = await open_rig(peer={"message_content": False}, message_content=False)
    result = await rig.channel.probe()
    assert result.ok
    [warning] = result.problems
    assert warning.gravity is Gravity.WARNING and "MESSAGE CONTENT" in warning.message
    asked = DiscordChannel(rig.channel.context.__class__(**{**rig.channel.context.__dict__,
                                                            "config": rig.channel.settings.model_copy(update={"message_content": True})}))
    try:
        result = await asked.probe()
    finally:
        await asked.close()
    assert not result.ok
    [error] = result.problems
    assert "MESSAGE CONTENT" in error.message and "4014" in error.message and "Privileged Gateway Intents" in error.fix


async def test_doctor_says_when_public_key_is_not_the_applications(open_rig):
    rig = await open_rig()

    async def probe(public_key: str):
        settings = rig.channel.settings.model_copy(update={"public_key": public_key})
        channel = DiscordChannel(rig.channel.context.__class__(**{**rig.channel.context.__dict__, "config": settings}))
        try:
            return await channel.probe()
        finally:
            await channel.close()

    assert (await probe(rig.peer.public_key)).problems == ()
    assert (await probe(rig.peer.public_key.upper())).problems == ()  # the portal's hex, in either case
    result = await probe("ab" * 32)
    assert not result.ok
    [problem] = result.problems
    assert "public_key" in problem.message and "refuse every request" in problem.message
    assert rig.peer.public_key[:8] in problem.message and "General Information" in problem.fix


async def test_asking_for_an_intent_the_application_lacks_waits_for_a_human(open_rig):
    rig = await open_rig(peer={"message_content": False}, connect=False)

    async def parked():
        account = await rig.account()
        return account if account.state == "action_required" else None

    account = await eventually(parked, what="the account to wait for the intent")
    assert "MESSAGE CONTENT" in account.reason
    assert rig.peer.identifies == 0  # not refused by the Gateway over and over: found before connecting


# --------------------------------------------------------------------------- where answers go


async def test_an_answer_to_a_thread_stays_in_the_thread_and_replies_to_the_learner(open_rig):
    rig = await open_rig()
    thread = await rig.peer.open_thread("Homework")
    asked = await rig.peer.say("help with question 3", channel=thread, mention=True)
    [answer] = await rig.replies(thread, 1)
    await rig.quiet()
    assert answer.reply_to == asked["id"] and answer.text == "echo: help with question 3"
    [message] = rig.responder.turns[0].messages
    assert message.address.conversation.chat == rig.peer.channel_id
    assert message.address.conversation.thread == thread
    assert rig.peer.seen(rig.peer.channel_id) == []


async def test_a_streamed_answer_is_edited_in_place_no_faster_than_the_declared_interval(open_rig):
    rig = await open_rig()
    rig.responder.stream = [f"part {i}. " for i in range(24)]
    rig.responder.delta_delay = 0.15
    said = await rig.peer.say("stream it")
    await rig.replies(said["channel_id"], 1)
    await rig.quiet()
    [message] = rig.peer.seen(said["channel_id"])
    assert message["content"].strip() == "".join(rig.responder.stream).strip()
    edits = [r["at"] for r in rig.peer.requests if r["method"] == "PATCH" and r["channel"] == said["channel_id"]]
    assert message["edits"] == len(edits) >= 1
    interval = DiscordChannel.capabilities().min_edit_interval
    previews = edits[:-1]  # the final edit goes as soon as the answer is complete
    assert len(previews) >= 2
    assert all(b - a >= interval * 0.9 for a, b in zip(previews, previews[1:], strict=False)), edits


async def test_typing_is_shown_while_the_partner_writes(open_rig):
    rig = await open_rig()
    rig.responder.stream = ["thinking", " done"]
    rig.responder.delta_delay = 0.5
    said = await rig.peer.say("type first")
    await rig.replies(said["channel_id"], 1)
    assert any(r["route"].endswith("/typing") and r["channel"] == said["channel_id"] for r in rig.peer.requests)


# --------------------------------------------------------------------------- rate limits: one layer


async def test_one_429_is_one_rate_limited_and_one_paced_retry(open_rig):
    rig = await open_rig()
    rig.peer.fail_next(429, retry_after=0.4)
    said = await rig.peer.say("busy?")
    [reply] = await rig.replies(said["channel_id"], 1)
    await rig.quiet()
    posts = [r for r in rig.peer.requests if r["method"] == "POST" and r["route"] == "channels/{id}/messages"
             and r["channel"] == said["channel_id"]]
    assert [p["status"] for p in posts] == [429, 200]  # discord.py did not retry it on its own
    assert posts[1]["at"] - posts[0]["at"] >= 0.4 * 0.9  # the outbound path waited retry_after
    assert rig.metric("partners_errors_total", kind="RateLimited") == 1
    assert reply.text == "echo: busy?"


async def test_a_5xx_is_retried_by_the_outbound_path_only(open_rig):
    rig = await open_rig()
    rig.peer.fail_next(502)
    said = await rig.peer.say("flaky?")
    await rig.replies(said["channel_id"], 1)
    await rig.quiet()
    posts = [r["status"] for r in rig.peer.requests if r["method"] == "POST" and r["channel"] == said["channel_id"]
             and r["route"] == "channels/{id}/messages"]
    assert posts == [502, 200]
    assert rig.metric("partners_errors_total", kind="PeerUnavailable") == 1


# --------------------------------------------------------------------------- slash commands


async def test_slash_commands_are_registered_deferred_and_answered_by_follow_up(open_rig):
    rig = await open_rig()
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    assert sorted(c["name"] for c in rig.peer.commands) == ["ask", "link", "stop"]
    interaction = await rig.peer.command("ask", {"question": "what is 2 + 2?"})
    await eventually(lambda: any(m["content"] for m in rig.peer.seen(interaction["channel_id"])),
                     what="the placeholder to be filled")
    await rig.quiet()
    [shown] = rig.peer.seen(interaction["channel_id"])
    assert shown["content"] == "echo: what is 2 + 2?" and not shown["flags"] & 128
    assert interaction["answered"] == 5  # deferred (type 5), then the follow-up filled the placeholder
    order = [r["route"] for r in rig.peer.requests if r["route"].startswith(("interactions", "webhooks"))]
    assert order[0] == "interactions/{id}/{id}/callback" and order[1].startswith("webhooks/")
    [message] = rig.responder.turns[0].messages
    assert message.event_id == interaction["id"] and message.addressed


async def test_stop_and_link_commands_read_as_the_gateway_commands(open_rig):
    rig = await open_rig()
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    user = "4242"
    stop = await rig.peer.command("stop", user=user)
    await eventually(lambda: any(m["content"] for m in rig.peer.seen(stop["channel_id"])), what="the answer to /stop")
    assert rig.peer.seen(stop["channel_id"])[0]["content"] == NOTHING_TO_STOP  # the gateway's own /stop, in its follow-up
    await rig.peer.command("link", {"code": "ABCD1234"}, user=user)
    await rig.replies(stop["channel_id"], 2)
    await rig.quiet()
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["/link ABCD1234"]  # the brain reads it as /link


async def test_an_instant_answer_waits_for_its_deferral_and_fills_the_placeholder(open_rig):
    rig = await open_rig()
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    rig.peer.callback_latency = 0.5  # the gateway's own /stop answer is ready long before Discord took the deferral
    stop = await rig.peer.command("stop")
    await eventually(lambda: any(m["content"] for m in rig.peer.seen(stop["channel_id"])), what="the answer to /stop")
    await rig.quiet()
    [shown] = rig.peer.seen(stop["channel_id"])
    assert shown["content"] == NOTHING_TO_STOP and not shown["flags"] & LOADING
    assert not channel_posts(rig, stop["channel_id"]) and not refused_followups(rig)


def channel_posts(rig, channel: str) -> list[dict]:
    """The bot's answered POSTs of a plain channel message (not a follow-up) in ``channel``."""
    return [r for r in rig.peer.requests
            if r["method"] == "POST" and r["route"] == "channels/{id}/messages" and r["channel"] == channel]


def refused_followups(rig) -> list[dict]:
    return [r for r in rig.peer.requests if r["route"].startswith("webhooks/") and r["status"] == 404]


async def test_a_command_whose_token_discord_invalidated_is_answered_by_one_channel_message(open_rig):
    rig = await open_rig()
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    ask = rig.peer.interaction("ask", {"question": "what is a verb?"}, channel=rig.peer.channel_id)
    rig.peer.expire_interaction(ask["token"])  # no initial response reached Discord within its 3 s
    await rig.peer.dispatch("INTERACTION_CREATE", ask)
    [shown] = await rig.replies(rig.peer.channel_id, 1, what="the answer as a channel message")
    await rig.quiet()
    assert shown.text == "echo: what is a verb?"
    assert [m["content"] for m in rig.peer.seen(rig.peer.channel_id)] == ["echo: what is a verb?"]
    assert len(channel_posts(rig, rig.peer.channel_id)) == 1 and len(refused_followups(rig)) == 1
    assert rig.metric("partners_dead_letters_total") == 0


async def test_a_fallback_message_whose_answer_was_lost_is_retried_into_the_same_message(open_rig):
    rig = await open_rig()
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    ask = rig.peer.interaction("ask", {"question": "what is a noun?"}, channel=rig.peer.channel_id)
    rig.peer.expire_interaction(ask["token"])
    rig.peer.fail_next(504, route="messages")  # Discord posts the channel message, the answer is lost
    await rig.peer.dispatch("INTERACTION_CREATE", ask)
    await rig.replies(rig.peer.channel_id, 1, what="the answer as a channel message")
    await eventually(lambda: len(channel_posts(rig, rig.peer.channel_id)) == 2, what="the retry of the lost post")
    await rig.quiet()
    assert [m["content"] for m in rig.peer.seen(rig.peer.channel_id)] == ["echo: what is a noun?"]  # the nonce held
    assert len(refused_followups(rig)) == 2  # the retry asked the dead token again and went the same way


class HeldResponder(ContractResponder):
    """Answers only once ``release`` is set: a turn that outlives its interaction token."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def respond(self, turn):
        await self.release.wait()
        async for event in super().respond(turn):
            yield event


async def test_an_answer_after_the_token_expired_goes_to_the_channel_and_the_placeholder_stays(open_rig):
    responder = HeldResponder()
    rig = await open_rig(responder=responder)
    await eventually(lambda: rig.peer.commands, what="the commands to be registered")
    ask = await rig.peer.command("ask", {"question": "why is ice slippery?"})
    await eventually(lambda: ask.get("answered") == 5, what="the command to be deferred")
    rig.peer.expire_interaction(ask["token"])  # the answer comes after the token's 15 minutes
    responder.release.set()
    await rig.replies(ask["channel_id"], 2, what="the answer beside the placeholder")
    await rig.quiet()
    placeholder, answer = rig.peer.seen(ask["channel_id"])
    assert placeholder["flags"] & LOADING and not placeholder["content"]
    assert answer["content"] == "echo: why is ice slippery?" and not answer["flags"] & LOADING
    assert len(channel_posts(rig, ask["channel_id"])) == 1 and len(refused_followups(rig)) == 1


# --------------------------------------------------------------------------- attachments

PICTURE = bytes(range(256)) * 16


def media_of(message) -> Media:
    [media] = [e for e in message.elements if isinstance(e, Media)]
    return media


async def test_an_image_sent_in_a_dm_is_fetched_after_the_ack_and_the_model_sees_the_file(open_rig):
    rig = await open_rig()
    picture = rig.peer.attachment("leaf.png", PICTURE, "image/png")
    said = await rig.peer.say("what leaf is this?", attachments=(picture,))
    await rig.replies(said["channel_id"], 1)
    [message] = rig.responder.turns[0].messages
    media = media_of(message)
    assert (media.kind, media.ref.locator, media.name) == ("image", picture["url"], "leaf.png")
    assert media.blob is not None and not media.missing and media.mime_type == "image/png"
    assert await rig.gateway.blobs.get(media.blob) == PICTURE  # the bytes the CDN served
    assert rig.peer.downloads == [f"{picture['id']}/leaf.png"]
    assert "what leaf is this?" in message.text


async def test_an_attachment_the_cdn_no_longer_serves_reaches_the_model_as_a_note(open_rig):
    rig = await open_rig()
    gone = rig.peer.attachment("essay.pdf", b"%PDF-1.4", "application/pdf", served=False)
    said = await rig.peer.say("please mark my essay", attachments=(gone,))
    await rig.replies(said["channel_id"], 1)
    [message] = rig.responder.turns[0].messages
    media = media_of(message)
    assert media.blob is None and "404" in (media.missing or "")
    assert "the learner sent a file (essay.pdf) that could not be fetched" in message.text
    assert rig.peer.downloads == [f"{gone['id']}/essay.pdf"]  # asked for once, after the message was stored


async def test_an_attachment_over_the_limit_is_not_downloaded_and_the_model_reads_why(open_rig):
    rig = await open_rig()
    limit = DiscordChannel.capabilities().media_max_bytes
    video = rig.peer.attachment("lesson.mp4", b"small here", "video/mp4", size=limit + 1)
    liar = rig.peer.attachment("notes.txt", b"x" * (limit + 1), "text/plain", size=10)  # says 10 bytes, serves more
    said = await rig.peer.say("two files", attachments=(video, liar))
    await rig.replies(said["channel_id"], 1)
    [message] = rig.responder.turns[0].messages
    declared, served = (e for e in message.elements if isinstance(e, Media))
    assert declared.blob is None and "too large" in (declared.missing or "")
    assert served.blob is None and "too large" in (served.missing or "")
    assert rig.peer.downloads == [f"{liar['id']}/notes.txt"]  # the declared size alone kept the video off the wire
    assert "could not be fetched: too large" in message.text


async def test_a_file_in_the_answer_is_uploaded_and_one_over_the_limit_becomes_its_name_in_the_text(open_rig, tmp_path):
    rig = await open_rig()
    sheet = tmp_path / "sheet.txt"
    sheet.write_text("1. 2 + 2 = ?\n")
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * (DiscordChannel.capabilities().media_max_bytes + 1))
    rig.responder.attachments = (Attachment(kind="file", path=str(sheet), name="sheet.txt"),
                                 Attachment(kind="file", path=str(big), name="big.bin"))
    said = await rig.peer.say("send me the worksheet")
    shown = await rig.replies(said["channel_id"], 2)
    await rig.quiet()
    text, upload = rig.peer.seen(said["channel_id"])
    assert text["content"].startswith("echo: send me the worksheet") and "big.bin" in text["content"]
    assert [(a["filename"], a["size"]) for a in upload["attachments"]] == [("sheet.txt", sheet.stat().st_size)]
    assert len(shown) == 2  # the oversized file was never posted: Discord would have answered 413
    assert all(r["status"] != 413 for r in rig.peer.requests)


# --------------------------------------------------------------------------- a long answer opens a thread

LONG = " ".join(f"Step {i}: carry the one and write the next digit down." for i in range(90))  # about 5,000 characters


async def test_a_long_answer_to_a_channel_mention_continues_in_a_thread_started_from_the_learners_message(open_rig):
    rig = await open_rig()
    rig.responder.answer = lambda turn: LONG
    room = await rig.peer.new_channel()
    asked = await rig.peer.say("explain long addition", channel=room, mention=True)
    continued = await rig.replies(asked["id"], 2, what="the rest of the answer in the thread")  # the thread has its id
    await rig.quiet()
    [first] = [seen_from(m) for m in rig.peer.seen(room)]
    assert first.reply_to == asked["id"]  # the first part answers the learner where they asked
    assert rig.peer.threads_started == [asked["id"]]
    thread = rig.peer.channels[asked["id"]]
    assert thread["parent_id"] == room and thread["name"] == "The whole answer"
    assert " ".join([first.text, *(c.text for c in continued)]).split() == LONG.split()
    assert all(units(c.text, TextUnit.UTF16) <= 2000 for c in [first, *continued])
    assert len(rig.responder.turns) == 1


async def test_a_short_answer_a_dm_and_an_answer_inside_a_thread_open_no_thread(open_rig):
    rig = await open_rig()
    room = await rig.peer.new_channel()
    short = await rig.peer.say("what is 2 + 2?", channel=room, mention=True)
    await rig.replies(room, 1)
    rig.responder.answer = lambda turn: LONG
    dm = await rig.peer.say("explain it at length")
    dm_parts = await rig.replies(dm["channel_id"], 3)
    thread = await rig.peer.open_thread("Homework", parent=room)
    await rig.peer.say("and here, at length", channel=thread, mention=True)
    thread_parts = await rig.replies(thread, 3)
    await rig.quiet()
    assert rig.peer.threads_started == [] and short["id"] not in rig.peer.channels
    assert len(dm_parts) == len(thread_parts) == 3 and len(rig.peer.seen(room)) == 1


async def test_a_retried_thread_start_finds_the_thread_it_opened_and_no_second_one(open_rig):
    """The start's answer is lost (504 after Discord made the thread): the retry is told 160004 and uses it."""
    rig = await open_rig()
    rig.responder.answer = lambda turn: LONG
    rig.peer.fail_next(504, route="threads")
    room = await rig.peer.new_channel()
    asked = await rig.peer.say("explain long addition", channel=room, mention=True)
    continued = await rig.replies(asked["id"], 2, what="the rest of the answer in the thread")
    await rig.quiet()
    starts = [r["status"] for r in rig.peer.requests if r["route"].endswith("/threads")]
    assert starts[0] == 504 and rig.peer.threads_started == [asked["id"]]
    assert len(rig.peer.seen(room)) == 1 and len(continued) == 2
    assert " ".join(c.text for c in [seen_from(rig.peer.seen(room)[0]), *continued]).split() == LONG.split()


async def test_an_existing_thread_from_the_learners_message_is_used_when_discord_says_so(open_rig):
    """A thread started from the message before (a run that crashed, another program): 400/160004, then posted there."""
    rig = await open_rig(long_answer_thread="Long answers")
    rig.responder.answer = lambda turn: LONG
    room = await rig.peer.new_channel()
    asked = rig.peer.post_offline("explain long addition", channel=room, mention=True)
    await rig.peer.open_thread("Started elsewhere", parent=room, tid=asked["id"], announce=False)  # unknown to discord.py
    await rig.peer.redeliver(asked)
    await rig.replies(asked["id"], 2, what="the rest of the answer in the existing thread")
    await rig.quiet()
    starts = [r["status"] for r in rig.peer.requests if r["route"].endswith("/threads")]
    assert starts[0] == 400 and rig.peer.threads_started == []  # 160004: it is there
    assert rig.peer.channels[asked["id"]]["name"] == "Started elsewhere" and len(rig.peer.seen(room)) == 1


async def test_without_a_thread_name_a_long_answer_stays_in_the_channel(open_rig):
    rig = await open_rig(long_answer_thread=None)
    rig.responder.answer = lambda turn: LONG
    room = await rig.peer.new_channel()
    await rig.peer.say("explain long addition", channel=room, mention=True)
    assert len(await rig.replies(room, 3)) == 3
    await rig.quiet()
    assert rig.peer.threads_started == []
