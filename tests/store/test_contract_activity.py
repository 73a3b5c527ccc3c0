"""Switches and hourly activity, on every engine: accounts turned off, and sums that add up."""

from __future__ import annotations

import asyncio
import time

from gateway.store.activity import ActivityRow


async def test_an_account_switched_off_is_listed_until_switched_on(store):
    await store.set_account_disabled("telegram", "kids", "ada")
    await store.set_account_disabled("telegram", "kids", "bob")  # again: the last one who did it
    assert [(s.channel, s.account, s.by) for s in await store.disabled_accounts()] == [("telegram", "kids", "bob")]
    await store.set_account_disabled("telegram", "kids", None)
    assert await store.disabled_accounts() == []


async def test_activity_adds_into_its_hour_even_written_at_once(store):
    hour = int(time.time()) // 3600 * 3600
    row = ActivityRow(hour, "tutor", "relay", "a", "in", "", 1.0)
    await asyncio.gather(*(store.add_activity([row]) for _ in range(20)))
    await store.add_activity([ActivityRow(hour, "tutor", "relay", "a", "drop", "policy", 2.0)])
    await store.add_activity([])
    sums = {(r.measure, r.label): r.value for r in await store.activity_since(hour)}
    assert sums == {("in", ""): 20.0, ("drop", "policy"): 2.0}
    assert await store.activity_since(hour + 7200) == []
