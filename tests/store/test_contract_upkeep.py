"""The store as a whole, on every engine: pruning, queue depths, the write probe."""

from __future__ import annotations

from gateway.store import InboundState, ReplyState
from gateway.store.health import StoreState
from tests.store.rows import message, reply


async def test_prune_forgets_expired_dedup_keys_only_when_finished(store):
    done, waiting, dropped = message("1"), message("2"), message("3")
    await store.accept([done, waiting, dropped], retention_s=-1)
    await store.mark_inbound([done.dedup_key], InboundState.ANSWERED)
    await store.mark_inbound([dropped.dedup_key], InboundState.DROPPED, "policy")
    await store.accept([message("4")], retention_s=3600)
    await store.mark_inbound([message("4").dedup_key], InboundState.ANSWERED)
    assert await store.prune() == 2
    assert await store.accept([done, message("4")], 60) == [True, False]  # past retention the key is forgotten
    assert [i.message.event_id for i in await store.open_inbound()] == ["2", "1"]


async def test_prune_keeps_open_and_recent_replies(store):
    await store.put_reply(reply("open"), ReplyState.READY)
    await store.put_reply(reply("done"), ReplyState.DELIVERED)
    await store.prune()
    assert await store.get_reply("open") is not None and await store.get_reply("done") is not None


async def test_queue_depths_count_per_account(store):
    held = message("3")
    await store.accept([message("1"), message("2", channel="webchat"), held], 60)
    await store.mark_inbound([held.dedup_key], InboundState.HELD, "pairing")
    await store.put_reply(reply("r1"), ReplyState.READY)
    await store.put_reply(reply("r2"), ReplyState.STREAMING)
    await store.put_reply(reply("r3"), ReplyState.DELIVERED)
    depths = await store.queue_depths()
    assert depths.inbound_pending == {"relay:a": 1, "webchat:a": 1}
    assert depths.inbound_held == {"relay:a": 1}
    assert depths.outbox_open == {"relay:a": 2}


async def test_the_write_probe_commits_and_health_stays_ok(store):
    await store.probe_write()
    assert store.health.condition().state is StoreState.OK
    assert await store.get_cursor("gateway", "store", "write-probe") is None  # added and removed
