"""The 24-hour customer-service window on the emulator: free-form inside it, a partner's template outside, or nothing.

The window opens at the learner's last message.  A reply to a message older
than 24 h is never sent free-form (Meta would refuse it, 131047): it is a dead
letter and the teacher hears of it.  A message the learner did not ask for (a
reminder) goes free-form while the window is open, as the partner's approved
reminder template outside it, and without one is refused -- when scheduled, and
at send time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.errors import ReplyWindowClosed
from gateway.core.messages import Referrer, RenderedPart
from tests.channels.whatsapp.conftest import TEACHER
from tests.contract.harness import eventually

LEARNER = "15551230007"
DAY_AGO = time.time() - 25 * 3600
TEMPLATES = {"Tutor": {"reminder": {"name": "study_reminder", "language": "en_US"}}}


def part(text: str) -> RenderedPart:
    return RenderedPart(index=0, text=text, plain=text)


async def test_a_reply_to_a_message_older_than_24_hours_is_not_sent_and_the_teacher_is_told(whatsapp_rig):
    rig = await whatsapp_rig()
    await rig.peer.say(LEARNER, "an old question", at=DAY_AGO)
    await eventually(lambda: rig.reports(), what="the teacher's report")
    await rig.quiet()
    assert rig.peer.texts_to(LEARNER) == []
    [(_, _, said)] = rig.reports()
    assert "24 hours" in said


async def test_inside_the_window_a_reminder_goes_free_form(whatsapp_rig):
    rig = await whatsapp_rig(templates=TEMPLATES)
    await rig.peer.say(LEARNER, "remind me later")
    await rig.texts(LEARNER, 1)
    address = rig.responder.turns[0].messages[0].address
    await rig.channel.send(address, part("Time to review fractions"), referrer=Referrer(), idempotency_key="r1:0")
    assert [(s.kind, s.text) for s in rig.peer.shown][1:] == [("text", "Time to review fractions")]


async def test_outside_the_window_a_reminder_goes_as_the_partners_template(whatsapp_rig):
    rig = await whatsapp_rig(templates=TEMPLATES)
    await rig.peer.say(LEARNER, "an old question", at=DAY_AGO)
    await eventually(lambda: rig.reports(), what="the old message's refused reply")
    address = rig.responder.turns[0].messages[0].address
    await rig.channel.send(address, part("Time to review\n\nfractions,     please"), referrer=Referrer(),
                           idempotency_key="r2:0")  # Meta refuses a template parameter with a newline (132018)
    assert [(s.kind, s.text) for s in rig.peer.shown if s.to == LEARNER] == [
        ("template", "Reminder from your tutor: Time to review fractions, please")]


async def test_outside_the_window_without_a_template_a_reminder_is_refused(whatsapp_rig):
    rig = await whatsapp_rig()
    await rig.peer.say(LEARNER, "an old question", at=DAY_AGO)
    await eventually(lambda: rig.reports(), what="the old message's refused reply")
    address = rig.responder.turns[0].messages[0].address
    with pytest.raises(ReplyWindowClosed, match="no reminder template"):
        await rig.channel.send(address, part("Time to review"), referrer=Referrer(), idempotency_key="r3:0")
    assert [s for s in rig.peer.shown if s.to == LEARNER] == []


async def test_a_reminder_due_after_the_window_is_scheduled_only_with_a_template(whatsapp_rig):
    later = datetime.now(UTC) + timedelta(days=2)
    for templates, accepted in ((None, False), (TEMPLATES, True)):
        rig = await whatsapp_rig(templates=templates)
        await rig.peer.say(LEARNER, "remind me in two days")
        await rig.texts(LEARNER, 1)
        address = rig.responder.turns[0].messages[0].address
        outcome = await rig.gateway.reminders.schedule(address, later, "Revise chapter 3")
        assert outcome.accepted is accepted, outcome.reason
        if not accepted:
            assert "24 hours" in outcome.reason


async def test_a_due_reminder_outside_the_window_is_delivered_as_the_template(whatsapp_rig):
    rig = await whatsapp_rig(templates=TEMPLATES)
    await rig.peer.say(LEARNER, "an old question", at=DAY_AGO)
    await eventually(lambda: rig.reports(), what="the old message's refused reply")
    address = rig.responder.turns[0].messages[0].address
    outcome = await rig.gateway.reminders.schedule(address, datetime.now(UTC), "Revise chapter 3")
    assert outcome.accepted, outcome.reason
    await rig.gateway.fire_reminders()
    assert await rig.texts(LEARNER, 1) == ["Reminder from your tutor: Revise chapter 3"]
    assert [s.kind for s in rig.peer.shown if s.to == LEARNER] == ["template"]


async def test_the_teacher_who_has_not_written_for_a_day_gets_the_report_as_the_template(whatsapp_rig):
    rig = await whatsapp_rig(templates=TEMPLATES)
    await rig.peer.say(LEARNER, "an old question", at=DAY_AGO)
    [report] = await rig.texts(TEACHER, 1)
    assert report.startswith("Reminder from your tutor: ") and "24 hours" in report
