"""First contact on Telegram: ``/start`` (the Start button) is answered with the partner's greeting.

Through python-telegram-bot against the Bot API emulator: the learner's
``/start`` arrives as a ``bot_command``, the gateway answers it itself (the
responder never sees it), and the greeting is a reply in the outbox like any
other -- so a restart while Telegram refuses it sends it once, not twice.
"""

from __future__ import annotations

import pytest

from tests.channels.telegram.conftest import new_id
from tests.contract.harness import eventually

pytestmark = pytest.mark.timeout(120)

PERSONA_GREETING = "Hi! I'm Study Buddy. Tell me what you're working on and we'll figure it out together."


async def test_start_gets_the_greeting_and_the_next_message_the_responder(open_rig):
    rig = await open_rig()
    chat = new_id()

    await rig.users.say(chat, "/start")
    [greeting] = await rig.replies(chat, 1, what="greeting")
    await rig.users.say(chat, "What is 7 x 8?")
    _greeting, answer = await rig.replies(chat, 2, what="greeting and answer")
    await rig.quiet()

    assert greeting["text"] == PERSONA_GREETING  # the partner sets none, so its persona's
    assert answer["text"] == "echo: What is 7 x 8?"
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["What is 7 x 8?"]


async def test_a_partner_greeting_with_a_deep_link_payload_is_still_the_greeting(open_rig):
    rig = await open_rig()
    chat = new_id()

    await rig.users.say(chat, "/start from-the-school-website")
    [greeting] = await rig.replies(chat, 1, what="greeting")
    await rig.quiet()

    assert greeting["text"] == PERSONA_GREETING and rig.responder.turns == []


async def test_a_restart_while_telegram_refuses_the_greeting_sends_it_once(open_rig, tmp_path):
    token, data_dir, chat = f"{new_id()}:greeting-restart-token", tmp_path / "kept", new_id()
    first = await open_rig(token=token, data_dir=data_dir)
    await first.users.faults(next=["503"] * 50)
    await first.users.say(chat, "/start")

    async def refused() -> bool:
        return (await first.users.attempts())["summary"].get("unavailable", 0) >= 1

    await eventually(refused, timeout=60, what="Telegram to refuse the greeting once")
    await first.gateway.stop()
    assert (await first.users.seen()).get(str(chat), []) == []
    await first.users.faults(next=[])

    second = await open_rig(token=token, data_dir=data_dir)
    [greeting] = await second.replies(chat, 1, what="greeting after the restart")
    await second.quiet()

    assert greeting["text"] == PERSONA_GREETING
    assert len((await second.users.seen())[str(chat)]) == 1
    assert second.responder.turns == [] and first.responder.turns == []
