"""The takeover role, on every engine: one running takeover per conversation, found by conversation or code."""

from __future__ import annotations

import asyncio

from tests.store.rows import address


async def test_a_takeover_is_idempotent_found_by_code_and_ended_once(store):
    kid = address("kid")
    first = await store.start_takeover("tutor", kid, "worried", locale="zh-CN")
    again = await store.start_takeover("tutor", kid, "asks again")
    assert again == first and first.reason == "worried" and first.locale == "zh-CN" and first.target == kid
    assert await store.takeover_of(kid.conversation_key) == first
    assert await store.takeover_by_code(f" {first.code.lower()} ") == first
    assert await store.takeover_of(address("other").conversation_key) is None
    assert await store.end_takeover(first.code) == first
    assert await store.end_takeover(first.code) is None
    assert await store.takeover_of(kid.conversation_key) is None and await store.takeovers() == []


async def test_takeovers_started_at_once_for_one_conversation_are_one(store):
    results = await asyncio.gather(*(store.start_takeover("tutor", address("kid"), f"r{i}") for i in range(10)))
    assert len({t.code for t in results}) == 1
    await store.start_takeover("tutor", address("kid-2"), "other")
    assert [t.target.conversation.chat for t in await store.takeovers()] == ["kid", "kid-2"]
