"""A group upgraded to a supergroup: the conversation goes on in the new chat, under its old key.

Against the Bot API emulator, which refuses anything sent to an upgraded
group with 400 and ``parameters.migrate_to_chat_id`` and posts the upgrade's
service messages, as Telegram does.
"""

from __future__ import annotations

from gateway.core.messages import ConversationKind
from tests.channels.telegram.conftest import new_group, new_id
from tests.contract.harness import ContractResponder, counter, eventually


class UpgradingResponder(ContractResponder):
    """Answers like the contract responder, but an admin upgrades the group while the first answer is written."""

    def __init__(self) -> None:
        super().__init__()
        self.users = None
        self.new_chat: int | None = None

    async def respond(self, turn):
        if self.new_chat is None and self.users is not None:
            chat = int(turn.messages[0].address.conversation.chat)
            self.new_chat = await self.users.migrate(chat, notify=False)
        async for event in super().respond(turn):
            yield event


async def _sends(rig) -> list[dict]:
    return [a for a in (await rig.users.attempts())["attempts"] if a["method"] == "sendMessage"]


async def test_a_reply_refused_for_an_upgraded_group_goes_once_to_the_supergroup_and_the_conversation_goes_on(open_rig, tmp_path):
    token, data_dir = "555000222:migration-test-token", tmp_path / "kept"
    responder = UpgradingResponder()
    rig = await open_rig(token=token, data_dir=data_dir, responder=responder)
    responder.users = rig.users
    group, learner = new_group(), new_id()
    await rig.users.open_chat({"id": group, "type": "group", "title": "Year 9"})
    await rig.users.say(group, "what is a prime?", user=learner, mention=True)
    supergroup = await eventually(lambda: responder.new_chat, what="the admin to upgrade the group")
    [reply] = await rig.replies(supergroup, 1)
    await rig.quiet()
    assert "what is a prime?" in reply["text"]
    assert (await rig.users.seen()).get(str(group)) is None
    assert [a["chat_id"] for a in await _sends(rig)] == [group, supergroup]  # refused once, sent once
    assert counter(rig.gateway, "partners_errors_total", channel="telegram") == 0  # not a failed reply

    await rig.users.say(supergroup, "and 9?", user=learner, mention=True)
    await rig.replies(supergroup, 2)
    await rig.quiet()
    second = rig.responder.turns[1].messages[0]
    assert second.address.conversation.chat == str(group)  # the same conversation: history and memory go on
    assert second.address.conversation.kind is ConversationKind.GROUP
    assert len(await _sends(rig)) == 3  # straight to the supergroup now

    await rig.gateway.stop()  # the move is durable: after a restart it is still known
    again = await open_rig(token=token, data_dir=data_dir)
    await again.users.say(supergroup, "still there?", user=learner, mention=True)
    await again.replies(supergroup, 3)
    await again.quiet()
    assert again.responder.turns[0].messages[0].address.conversation.chat == str(group)
    assert len(await _sends(again)) == 4


async def test_the_upgrades_service_messages_teach_the_move_before_any_send_is_refused(open_rig):
    rig = await open_rig()
    group, learner = new_group(), new_id()
    await rig.users.open_chat({"id": group, "type": "group", "title": "Year 10"})
    await rig.users.say(group, "hello", user=learner, mention=True)
    await rig.replies(group, 1)
    await rig.quiet()
    supergroup = await rig.users.migrate(group)
    await rig.users.say(supergroup, "are you still here?", user=learner, mention=True)
    await rig.replies(supergroup, 1)
    await rig.quiet()
    assert [t.messages[0].address.conversation.chat for t in rig.responder.turns] == [str(group), str(group)]
    assert [a["chat_id"] for a in await _sends(rig)] == [group, supergroup]  # nothing refused
    assert counter(rig.gateway, "partners_dropped_total", channel="telegram", reason="invalid event") == 0  # not noise
