"""The access role, on every engine: approvals, pairing codes and their limits, holds, refusal notices."""

from __future__ import annotations

import asyncio

from gateway.store import InboundState
from tests.store.rows import message


async def held(store, event: str, user: str):
    m = message(event, user=user)
    await store.accept([m], 60)
    await store.mark_inbound([m.dedup_key], InboundState.HELD, "pairing")
    return m


async def test_pairing_issue_approve_and_release(store):
    await held(store, "1", "stranger")
    assert not await store.is_approved("relay", "a", "stranger")
    request = await store.pairing_request("relay", "a", "stranger", "S", ttl_s=60, max_pending=3)
    again = await store.pairing_request("relay", "a", "stranger", "S", ttl_s=60, max_pending=3)
    assert request is not None and again is not None
    assert request.code == again.code and len(request.code) == 8
    assert [r.code for r in await store.pairing_list()] == [request.code]
    assert await store.pairing_resolve("nope", approve=True) is None
    resolved = await store.pairing_resolve(request.code.lower(), approve=True)
    assert resolved is not None and resolved.user == "stranger"
    assert await store.pairing_resolve(request.code, approve=True) is None  # a code is taken once
    assert await store.pairing_list() == []
    assert await store.is_approved("relay", "a", "stranger")
    assert not await store.is_approved("relay", "b", "stranger")
    released = await store.release_approved()
    assert [i.message.event_id for i in released] == ["1"]
    assert [i.message.event_id for i in await store.open_inbound()] == ["1"]
    assert await store.release_approved() == []


async def test_pairing_caps_pending_codes_and_deny_drops_held(store):
    codes = [await store.pairing_request("relay", "a", f"u{i}", "", 60, max_pending=2) for i in range(3)]
    assert codes[0] and codes[1] and codes[2] is None
    await held(store, "1", "u0")
    await store.pairing_resolve(codes[0].code, approve=False)
    assert not await store.is_approved("relay", "a", "u0")
    assert await store.release_approved() == []
    assert await store.open_inbound() == []
    assert await store.pairing_request("relay", "a", "u9", "", 60, max_pending=2) is not None  # a place was freed


async def test_max_pending_bounds_a_source_and_max_account_the_whole_account(store):
    def ask(user: str, source: str):
        return store.pairing_request("relay", "a", user, "", 60, max_pending=2, source=source, max_account=3)

    assert [await ask(u, "group-1") is not None for u in ("u1", "u2", "u3")] == [True, True, False]
    assert [await ask(u, "group-2") is not None for u in ("u4", "u5")] == [True, False]
    assert await store.pairing_request("relay", "other", "u6", "", 60, max_pending=2, max_account=3) is not None


async def test_many_pairing_requests_at_once_never_pass_the_limits(store):
    results = await asyncio.gather(*(store.pairing_request("relay", "a", f"u{i}", "", 60, max_pending=3)
                                     for i in range(20)))
    assert sum(r is not None for r in results) == 3
    same = await asyncio.gather(*(store.pairing_request("relay", "b", "one", "", 60, max_pending=3) for _ in range(10)))
    assert len({r.code for r in same if r is not None}) == 1 and all(same)
    assert len(await store.pairing_list()) == 4


async def test_an_expired_code_is_gone_and_the_sender_gets_a_new_one(store):
    old = await store.pairing_request("relay", "a", "u1", "", ttl_s=-1, max_pending=1)
    assert old is not None
    assert await store.pairing_list() == []
    assert await store.pairing_resolve(old.code, approve=True) is None
    new = await store.pairing_request("relay", "a", "u1", "", ttl_s=60, max_pending=1)
    assert new is not None and new.code != old.code


async def test_a_code_resolved_many_times_at_once_is_resolved_once(store):
    request = await store.pairing_request("relay", "a", "u1", "", 60, max_pending=3)
    assert request is not None
    results = await asyncio.gather(*(store.pairing_resolve(request.code, approve=True) for _ in range(10)))
    assert sum(r is not None for r in results) == 1
    assert await store.is_approved("relay", "a", "u1")


async def test_expired_holds_are_dropped_and_pending_messages_kept(store):
    await held(store, "1", "stranger")
    await store.accept([message("2")], 60)
    assert await store.drop_expired_holds(older_than_s=3600) == 0
    assert await store.drop_expired_holds(older_than_s=-1) == 1
    assert await store.release_held("relay", "a", "stranger") == []
    assert [i.message.event_id for i in await store.open_inbound()] == ["2"]


async def test_notice_is_rate_limited_per_sender(store):
    assert await store.notice_due("relay", "a", "u1", 3600)
    assert not await store.notice_due("relay", "a", "u1", 3600)
    assert await store.notice_due("relay", "a", "u2", 3600)
    assert await store.notice_due("relay", "b", "u1", 3600)
    assert await store.notice_due("relay", "a", "u1", 0)


async def test_a_notice_asked_for_many_times_at_once_is_due_exactly_once(store):
    results = await asyncio.gather(*(store.notice_due("relay", "a", "u1", 3600) for _ in range(25)))
    assert sum(results) == 1
