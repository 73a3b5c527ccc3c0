"""Reminders: accepted only when the platform will let them through, delivered once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.core.capabilities import Proactive
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def test_a_due_reminder_is_delivered_exactly_once(start_gateway):
    gateway, channel = await start_gateway()
    message = await channel.inject("remind me")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    outcome = await gateway.reminders.schedule(message.address, soon(-1), "Time to review fractions!")
    assert outcome.accepted
    assert await gateway.fire_reminders() == 1
    assert await gateway.fire_reminders() == 0
    await channel.wait_for(lambda sent: len(sent) >= 2)
    assert [s.text for s in channel.sent][1:] == ["Time to review fractions!"]


async def test_a_reminder_not_yet_due_waits(start_gateway):
    gateway, channel = await start_gateway()
    message = await channel.inject("remind me")
    await gateway.reminders.schedule(message.address, soon(3600), "later")
    assert await gateway.fire_reminders() == 0


async def test_reminders_beyond_the_reply_window_are_refused_with_the_reason(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 86400.0})
    gateway, channel = await start_gateway()
    message = await channel.inject("remind me in two days")
    refused = await gateway.reminders.schedule(message.address, soon(2 * 86400), "hello")
    accepted = await gateway.reminders.schedule(message.address, soon(3600), "hello")
    assert not refused.accepted and "24 hours" in refused.reason
    assert accepted.accepted


async def test_platforms_without_proactive_messages_refuse(start_gateway):
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"proactive": Proactive.NONE})
    gateway, channel = await start_gateway()
    message = await channel.inject("remind me")
    outcome = await gateway.reminders.schedule(message.address, soon(60), "hello")
    assert not outcome.accepted and "does not allow" in outcome.reason


async def test_a_refused_reminder_is_reported_to_the_teacher(start_gateway):
    from gateway.app import _ReportedReminders

    # A windowed platform: the teacher wrote recently, so a report may reach them; the reminder is too late.
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"reply_window_s": 86400.0})
    gateway, channel = await start_gateway(partner={"owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]})
    await channel.inject("hello", chat="teacher", user="teacher")
    message = await channel.inject("remind me", chat="kid", user="kid")
    outcome = await _ReportedReminders(gateway).schedule(message.address, soon(2 * 86400), "revise fractions")
    assert not outcome.accepted
    await channel.wait_for(lambda sent: any(s.chat == "teacher" and "could not be scheduled" in s.text for s in sent))
    report = next(s.text for s in channel.sent if s.chat == "teacher" and "could not be scheduled" in s.text)
    assert "revise fractions" in report and "24 hours" in report


async def test_no_report_reaches_a_teacher_where_the_platform_takes_no_unasked_message(start_gateway):
    from gateway.app import _ReportedReminders

    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"proactive": Proactive.NONE})
    gateway, channel = await start_gateway(partner={"owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]})
    message = await channel.inject("remind me", chat="kid", user="kid")
    outcome = await _ReportedReminders(gateway).schedule(message.address, soon(60), "revise fractions")
    assert not outcome.accepted and "does not allow" in outcome.reason
    await gateway.lanes.drain()
    assert not any(s.chat == "teacher" for s in channel.sent)
    assert "does not allow" in (await gateway.status()).accounts[0].last_undelivered  # recorded, not lost silently
