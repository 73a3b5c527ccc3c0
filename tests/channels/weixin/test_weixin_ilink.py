"""Personal WeChat (``kind: ilink``) through the real gateway against the iLink emulator, over loopback HTTP."""

from __future__ import annotations

import contextlib
import json
import logging

from gateway.core.channel import ChannelState
from tests.channels.weixin.ilink_rig import TEACHER, start_gateway
from tests.contract.harness import ContractResponder, eventually


async def test_the_qr_login_goes_wait_scanned_confirmed_and_stores_the_session_without_logging_the_token(ilink_rig, caplog):
    caplog.set_level(logging.DEBUG)
    rig = await ilink_rig(start=False)
    assert rig.states == ["wait", "scaned", "confirmed"]
    stored = json.loads(rig.stored("ilink-session") or "{}")
    assert stored["token"] == rig.peer.token and stored["bot_id"] == rig.peer.bot_id
    assert stored["base_url"] == rig.peer.base_url
    await start_gateway(rig, contextlib.AsyncExitStack())
    await rig.peer.say("learner@im.wechat", "hello")
    assert await rig.texts("learner@im.wechat", 1) == ["echo: hello"]
    await rig.quiet()
    await rig.gateway.stop()
    assert rig.peer.token not in caplog.text
    assert rig.peer.token not in (rig.raw["data_dir"] + json.dumps(rig.raw))  # never in the config


async def test_a_message_is_answered_once_with_its_context_token(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say("learner@im.wechat", "what is 2+2?")
    assert await rig.texts("learner@im.wechat", 1) == ["echo: what is 2+2?"]
    await rig.quiet()
    [sent] = rig.peer.sent
    assert sent.context_token == rig.peer.log[0]["context_token"]
    assert rig.inbound_rows() == 1


async def test_the_cursor_survives_a_restart_and_nothing_is_answered_twice(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say("learner@im.wechat", "first")
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    await eventually(lambda: rig.stored("get_updates_buf"), what="the cursor to be stored")
    cursor = rig.stored("get_updates_buf")
    await rig.gateway.stop()
    polls_before = len(rig.peer.polls)
    async with contextlib.AsyncExitStack() as stack:
        await start_gateway(rig, stack)
        await eventually(lambda: len(rig.peer.polls) > polls_before, what="a poll after the restart")
        assert rig.peer.polls[polls_before] == cursor
        await rig.peer.say("learner@im.wechat", "second")
        assert await rig.texts("learner@im.wechat", 2) == ["echo: first", "echo: second"]
        await rig.quiet()
    assert rig.peer.texts_to("learner@im.wechat") == ["echo: first", "echo: second"]


async def test_a_batch_served_again_after_a_lost_cursor_is_answered_once(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say("learner@im.wechat", "once")
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    await rig.gateway.stop()
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(rig.database)) as db, db:  # as if the process died before the cursor was stored
        db.execute("UPDATE cursors SET value = '' WHERE channel = 'weixin' AND name = 'get_updates_buf'")
    async with contextlib.AsyncExitStack() as stack:
        await start_gateway(rig, stack)
        await eventually(lambda: rig.peer.polls[-1] != "", what="the batch to be served again and confirmed")
        await rig.quiet()
    assert rig.peer.texts_to("learner@im.wechat") == ["echo: once"]


async def test_an_answer_past_the_budget_sends_ten_and_the_teacher_is_told(ilink_rig):
    responder = ContractResponder()
    paragraph = "x" * 1500
    responder.answer = lambda turn: "\n\n".join(f"{i} {paragraph}" for i in range(12)) if "long" in turn.messages[-1].text \
        else "noted"
    rig = await ilink_rig(responder=responder)
    await rig.peer.say(TEACHER, "I am here")
    await rig.texts(TEACHER, 1)
    await rig.peer.say("learner@im.wechat", "a long one please")
    sent = await rig.texts("learner@im.wechat", 10)
    [report] = (await rig.texts(TEACHER, 2))[1:]
    await rig.quiet()
    assert len(rig.peer.texts_to("learner@im.wechat")) == 10 == len(sent)
    assert rig.peer.refused == []  # the gateway kept within the platform's budget itself
    assert "left out" in report or "10" in report


async def test_a_stale_context_token_is_recorded_and_the_teacher_told(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say(TEACHER, "I am here")
    await rig.texts(TEACHER, 1)
    rig.peer.stale_next = 1
    await rig.peer.say("learner@im.wechat", "are you there?")
    [report] = (await rig.texts(TEACHER, 2))[1:]
    await rig.quiet()
    assert rig.peer.texts_to("learner@im.wechat") == []
    assert rig.peer.refused == [("learner@im.wechat", "stale context token")]
    assert "context token" in report or "window" in report


async def test_an_expired_session_puts_the_account_in_action_required_with_the_login_command(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.expire_session()
    health = await eventually(lambda: (h := rig.gateway.supervisor.health()["weixin:school"]).state
                              is ChannelState.ACTION_REQUIRED and h, what="action_required")
    assert "scan again" in health.reason and "partners channels login weixin school" in health.reason


async def test_an_account_never_logged_in_asks_for_the_login(ilink_rig):
    rig = await ilink_rig(login=False)
    health = await eventually(lambda: (h := rig.gateway.supervisor.health()["weixin:school"]).state
                              is ChannelState.ACTION_REQUIRED and h, what="action_required")
    assert "partners channels login weixin school" in health.reason


async def test_typing_goes_through_the_ticket_from_getconfig(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say("learner@im.wechat", "hi")
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    channel = rig.gateway.channel("weixin", "school")
    from gateway.core.messages import Address, ChannelName, ChatId, Conversation, ConversationKind

    await channel.typing(Address(channel=ChannelName("weixin"), account=channel.account,
                                 conversation=Conversation(chat=ChatId("learner@im.wechat"), kind=ConversationKind.DIRECT)))
    assert rig.peer.typing == ["learner@im.wechat"]


PICTURE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 5


async def test_an_image_is_fetched_from_the_cdn_after_the_ack_and_decrypted(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say_file("learner@im.wechat", PICTURE)
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    [turn] = rig.responder.turns
    [media] = [e for e in turn.messages[-1].elements if getattr(e, "kind", "") == "image"]
    assert media.blob is not None and not media.missing
    assert await rig.gateway.blobs.get(media.blob) == PICTURE


async def test_a_file_keeps_its_name_and_bytes(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say_file("learner@im.wechat", b"%PDF-1.4 homework" * 50, image=False, name="homework.pdf")
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    [turn] = rig.responder.turns
    [media] = [e for e in turn.messages[-1].elements if getattr(e, "kind", "") == "file"]
    assert await rig.gateway.blobs.get(media.blob) == b"%PDF-1.4 homework" * 50
    assert media.ref is not None and media.ref.name == "homework.pdf"


SILK = b"\x02#!SILK_V3" + bytes(range(200)) * 3
"""A recording as WeChat makes one: the SILK v3 header (with Tencent's leading byte), then frames."""


async def test_a_voice_message_without_a_transcript_reaches_the_turn_as_its_recording(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say_voice("learner@im.wechat", SILK)
    await rig.texts("learner@im.wechat", 1)
    await rig.quiet()
    [turn] = rig.responder.turns
    [media] = [e for e in turn.messages[-1].elements if getattr(e, "kind", "") == "audio"]
    assert media.blob is not None and not media.missing
    assert await rig.gateway.blobs.get(media.blob) == SILK  # fetched from the CDN and decrypted
    assert media.ref is not None and (media.ref.mime_type, media.ref.name) == ("audio/silk", "voice.silk")
    assert rig.peer.refused == [] and rig.inbound_rows() == 1


async def test_a_voice_message_with_a_transcript_is_read_as_words_and_its_codec_is_named_otherwise(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say_voice("learner@im.wechat", SILK, transcript="how do I say cat")
    assert await rig.texts("learner@im.wechat", 1) == ["echo: how do I say cat"]
    await rig.peer.say_voice("learner@im.wechat", b"ID3" + bytes(300), encode_type=7)
    await rig.texts("learner@im.wechat", 2)
    await rig.quiet()
    first, second = rig.responder.turns
    assert [e for e in first.messages[-1].elements if getattr(e, "kind", "") == "audio"] == []
    [mp3] = [e for e in second.messages[-1].elements if getattr(e, "kind", "") == "audio"]
    assert mp3.ref is not None and (mp3.ref.mime_type, mp3.ref.name) == ("audio/mpeg", "voice.mp3")
    assert await rig.gateway.blobs.get(mp3.blob) == b"ID3" + bytes(300)


def test_the_media_key_reads_each_spelling_the_platform_uses():
    import base64

    from channels.weixin.ilink.cipher import media_key

    key = bytes(range(16))
    assert media_key(key.hex()) == key
    assert media_key(base64.b64encode(key).decode()) == key
    assert media_key(base64.b64encode(key.hex().encode()).decode()) == key


async def test_scanning_again_brings_an_expired_account_back_without_a_restart(ilink_rig):
    from tests.channels.weixin.ilink_rig import log_in

    rig = await ilink_rig()
    await rig.peer.expire_session()
    await eventually(lambda: rig.gateway.supervisor.health()["weixin:school"].state is ChannelState.ACTION_REQUIRED,
                     what="action_required")
    rig.peer.token = "tok-second-login-0123456789"
    rig.peer.answered.clear()
    await log_in(rig)
    await eventually(lambda: rig.gateway.supervisor.health()["weixin:school"].state is ChannelState.RUNNING,
                     what="running again")
    await rig.peer.say("learner@im.wechat", "back?")
    assert await rig.texts("learner@im.wechat", 1) == ["echo: back?"]


async def test_a_qr_code_that_expires_is_replaced_by_a_fresh_one(ilink_rig):
    import asyncio

    from channels.weixin.config import IlinkConfig
    from channels.weixin.ilink.login import login
    from gateway.app import AccountCursors
    from gateway.store.sqlite import SqliteStore

    rig = await ilink_rig(login=False, start=False)
    settings = IlinkConfig.model_validate(rig.raw["channels"]["weixin"]["school"])
    rig.database.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(rig.database)
    await store.open()
    links: list[str] = []
    states: list[str] = []
    try:
        task = asyncio.create_task(login(settings, AccountCursors(store, "weixin", "school"), account="school",
                                         show=links.append, said=lambda state: states.append(state.value)))
        await eventually(lambda: "wait" in rig.peer.answered, what="the first code waiting")
        await rig.peer.expire_qr()
        await eventually(lambda: rig.peer.answered.count("wait") >= 2, what="the fresh code waiting")
        await rig.peer.scan()
        await eventually(lambda: "scaned" in rig.peer.answered, what="the scan")
        await rig.peer.confirm()
        session = await asyncio.wait_for(task, 10)
    finally:
        await store.close()
    assert links[0] != links[1]
    assert states == ["wait", "expired", "wait", "scaned", "confirmed"]
    assert session.token.get_secret_value() == rig.peer.token


async def test_a_video_is_recorded_as_refused_and_a_voice_transcript_is_read(ilink_rig):
    rig = await ilink_rig()
    await rig.peer.say_items("learner@im.wechat", [{"type": 5, "video_item": {}}])
    await rig.peer.say_items("learner@im.wechat", [{"type": 3, "voice_item": {"text": "what is a noun"}}])
    assert await rig.texts("learner@im.wechat", 1) == ["echo: what is a noun"]
    await rig.quiet()
    assert rig.peer.texts_to("learner@im.wechat") == ["echo: what is a noun"]
    assert rig.inbound_rows() == 1


async def test_a_login_by_another_bot_than_the_config_names_is_refused_and_nothing_stored(ilink_rig):
    import pytest

    from gateway.core.errors import AuthFailed

    def other_bot(raw: dict) -> dict:
        raw["channels"]["weixin"]["school"]["bot_id"] = "someone-else@im.bot"
        return raw

    rig = await ilink_rig(config=other_bot, responder=ContractResponder(), login=False, start=False)
    from tests.channels.weixin.ilink_rig import log_in

    with pytest.raises(AuthFailed, match="someone-else@im.bot"):
        await log_in(rig)
    assert rig.stored("ilink-session") is None
