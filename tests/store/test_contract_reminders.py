"""The reminder role, on every engine: a due reminder becomes one READY reply, once."""

from __future__ import annotations

import asyncio
import time

from gateway.store import Reminder, ReplyState
from tests.store.rows import address


def key_of(reminder_id: str) -> str:
    return f"reminder-{reminder_id}"


async def test_a_due_reminder_fires_once_into_the_outbox_and_a_later_one_waits(store):
    now = time.time()
    await store.add_reminder(Reminder(id="r1", target=address(), text="practice", due_at=now - 1))
    await store.add_reminder(Reminder(id="r1", target=address(), text="twice", due_at=now - 1))  # same id: kept once
    await store.add_reminder(Reminder(id="r2", target=address(), text="later", due_at=now + 3600))
    fired = await store.fire_due_reminders(now, key_of)
    assert [(i.reply.idempotency_key, i.reply.markdown, i.state) for i in fired] == [("reminder-r1", "practice", ReplyState.READY)]
    assert await store.fire_due_reminders(now, key_of) == []
    assert [i.reply.idempotency_key for i in await store.open_replies()] == ["reminder-r1"]
    later = await store.fire_due_reminders(now + 7200, key_of)
    assert [i.reply.idempotency_key for i in later] == ["reminder-r2"]


async def test_reminders_fired_from_many_callers_at_once_fire_once_each(store):
    now = time.time()
    for i in range(5):
        await store.add_reminder(Reminder(id=f"r{i}", target=address(), text=f"t{i}", due_at=now - 10 + i))
    batches = await asyncio.gather(*(store.fire_due_reminders(now, key_of) for _ in range(10)))
    keys = [i.reply.idempotency_key for batch in batches for i in batch]
    assert sorted(keys) == [f"reminder-r{i}" for i in range(5)]
    assert len(await store.open_replies()) == 5
