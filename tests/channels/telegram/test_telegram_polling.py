"""The Telegram channel in polling mode against the Bot API emulator, through a real gateway.

What users see is read from the emulator's record only: which messages the
bot posted where (chat, forum topic, what they reply to), after edits.
"""

from __future__ import annotations

from gateway.core.messages import ConversationKind, Referrer, RenderedPart
from tests.channels.telegram.conftest import new_group, new_id
from tests.contract.harness import counter, eventually


async def test_commands_are_registered_with_telegram_at_start(open_rig):
    rig = await open_rig(commands={"start": "Say hello", "quiz": "A short quiz"})
    info = await eventually(lambda: _commands(rig), what="setMyCommands")
    assert info == [{"command": "start", "description": "Say hello"}, {"command": "quiz", "description": "A short quiz"}]


async def _commands(rig):
    return (await rig.users.info())["commands"]


async def test_a_reply_in_a_forum_topic_stays_in_that_topic_and_answers_the_question(open_rig):
    rig = await open_rig()
    forum = {"id": new_group(), "type": "supergroup", "is_forum": True, "title": "Maths"}
    asked = await rig.users.say(forum, "what is 7 x 8?", user=new_id(), thread=55, mention=True)
    [reply] = await rig.replies(forum["id"], 1)
    assert reply["thread"] == 55
    assert reply["reply_to"] == asked["message_id"]
    [turn] = rig.responder.turns
    assert turn.messages[0].address.conversation.thread == "55"


async def test_privacy_mode_lets_mentions_replies_and_commands_through_and_nothing_else(open_rig):
    rig = await open_rig(privacy=True)
    group, learner = new_group(), new_id()
    unheard = await rig.users.say(group, "chatting among ourselves", user=learner)
    assert not unheard["delivered"]  # Telegram keeps it from a bot in privacy mode
    await rig.users.say(group, "what is a prime?", user=learner, mention=True)
    [first] = await rig.replies(group, 1)
    await rig.users.say(group, "and 9?", user=learner, reply_to=first["message_id"])
    await rig.replies(group, 2)  # one at a time: a message during a turn may merge into it
    await rig.users.say(group, "fractions", user=learner, command="help", command_to=rig.bot["username"])
    await rig.replies(group, 3)
    await rig.quiet()
    said = [m.text for turn in rig.responder.turns for m in turn.messages]
    assert said[0].endswith("what is a prime?") and said[1].endswith("and 9?") and said[2] == "/help fractions"
    assert all(m.addressed for turn in rig.responder.turns for m in turn.messages)


async def test_a_command_for_another_bot_is_not_answered(open_rig):
    rig = await open_rig(privacy=False)
    group = new_group()
    await rig.users.say(group, "x", user=new_id(), command="help", command_to="someone_else_bot")
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="telegram") >= 1,
                     what="the other bot's command to be dropped")
    await rig.users.say(group, "now me", user=new_id(), command="help")
    await rig.replies(group, 1)
    await rig.quiet()
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["/help now me"]


async def test_markup_telegram_refuses_is_sent_again_as_plain_text(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "hi")
    await rig.replies(chat, 1)
    [turn] = rig.responder.turns
    target = turn.messages[0].address
    bad = RenderedPart(index=0, text="<b>bold without an end &amp; more", plain="bold without an end & more")
    sent = await rig.channel.send(target, bad,
                                  referrer=Referrer(), idempotency_key="bad-html")
    shown = (await rig.users.seen())[str(chat)]
    assert shown[-1]["message_id"] == int(sent.message)
    assert shown[-1]["parse_mode"] is None and shown[-1]["text"] == "bold without an end & more"
    refused = [a for a in (await rig.users.attempts())["attempts"] if a["outcome"] == "bad_request"]
    assert len(refused) == 1
    # an edit with bad markup falls back the same way
    unclosed = RenderedPart(index=0, text="<i>edited, unclosed", plain="edited, unclosed")
    await rig.channel.edit(target, sent.ref, unclosed, referrer=Referrer())
    assert (await rig.users.seen())[str(chat)][-1]["text"] == "edited, unclosed"


async def test_previews_in_private_chats_are_drafts_and_the_answer_one_message(open_rig):
    rig = await open_rig()
    rig.responder.stream = ["Let me think", " about that.", " It is 42."]
    rig.responder.delta_delay = 0.6
    chat = new_id()
    await rig.users.say(chat, "stream it")
    [reply] = await rig.replies(chat, 1)
    await rig.quiet()
    assert reply["text"] == "Let me think about that. It is 42." and reply["edits"] == 0
    drafts = [d for d in (await rig.users.info())["drafts"] if d["chat_id"] == chat]
    assert drafts, "the preview should have been shown as a draft"
    assert len({d["draft_id"] for d in drafts}) == 1  # one draft, animated, not a new one per update
    assert len((await rig.users.seen())[str(chat)]) == 1


async def test_a_server_without_drafts_gets_previews_edited_in_place_instead(open_rig):
    rig = await open_rig(knows_drafts=False)  # an older self-hosted Bot API server
    rig.responder.stream = ["Let me think", " about that.", " It is 42."]
    rig.responder.delta_delay = 0.6
    chat = new_id()
    await rig.users.say(chat, "stream it")
    await rig.replies(chat, 1)
    await rig.quiet()
    [reply] = (await rig.users.seen())[str(chat)]
    assert reply["text"] == "Let me think about that. It is 42." and reply["edits"] >= 1


async def test_previews_in_groups_are_one_message_edited_in_place(open_rig):
    rig = await open_rig(privacy=False)
    rig.responder.stream = ["Let me think", " about that.", " It is 42."]
    rig.responder.delta_delay = 0.6
    group = new_group()
    await rig.users.say(group, "stream it", user=new_id(), mention=True)
    await rig.replies(group, 1)
    await rig.quiet()
    [reply] = (await rig.users.seen())[str(group)]
    assert reply["text"] == "Let me think about that. It is 42."
    assert reply["edits"] >= 1
    assert not [d for d in (await rig.users.info())["drafts"] if d["chat_id"] == group]


async def test_the_typing_indicator_is_shown_while_the_partner_works(open_rig):
    rig = await open_rig()
    rig.responder.stream = ["thinking"]
    rig.responder.delta_delay = 0.3
    chat = new_id()
    await rig.users.say(chat, "hard question")
    await rig.replies(chat, 1)
    assert (await rig.users.info())["actions"].get(f"{chat}:typing", 0) >= 1


async def test_a_malformed_update_is_recorded_as_invalid_and_does_not_block_the_queue(open_rig):
    rig = await open_rig()
    await rig.users.raw({"message": {"message_id": 1, "chat": "not a chat"}})
    await rig.users.raw({"edited_message": {"message_id": 2, "date": 1, "chat": {"id": 5, "type": "private"}, "text": "x"}})
    chat = new_id()
    await rig.users.say(chat, "still there?")
    await rig.replies(chat, 1)
    assert counter(rig.gateway, "partners_dropped_total", channel="telegram", reason="invalid event") == 2
    [turn] = rig.responder.turns
    assert turn.messages[0].address.conversation.kind is ConversationKind.DIRECT


async def test_the_offset_survives_a_restart_so_nothing_is_answered_twice_or_lost(open_rig, tmp_path):
    token, data_dir, chat = "555000111:restart-test-token", tmp_path / "kept", new_id()
    first = await open_rig(token=token, data_dir=data_dir)
    await first.users.say(chat, "before the restart")
    await first.replies(chat, 1)
    await first.quiet()
    await first.gateway.stop()
    polls_before = len((await first.users.info())["polls"])
    await first.users.say(chat, "while it was down")
    second = await open_rig(token=token, data_dir=data_dir)
    replies = await second.replies(chat, 2)
    await second.quiet()
    assert [m.text for t in second.responder.turns for m in t.messages] == ["while it was down"]
    assert counter(second.gateway, "partners_dedup_hits_total", channel="telegram") == 0  # not even handed out again
    assert len(replies) == 2 and "while it was down" in replies[1]["text"]
    polls = (await second.users.info())["polls"]
    assert polls[polls_before] == 2  # the restarted gateway asked from the stored offset, past update 1
    assert await second.gateway.store.get_cursor("telegram", "main", "offset") == "3"


async def test_a_wrong_token_asks_for_action_on_the_status_page_as_telegram_saying_401(open_rig):
    rig = await open_rig(register=False)  # BotFather never issued this token

    async def failing():
        [account] = (await rig.gateway.status()).accounts
        return account if account.state == "action_required" else None

    account = await eventually(failing, what="the account to report the bad token")
    assert "telegram says 401" in account.reason and "getMe" in account.reason
