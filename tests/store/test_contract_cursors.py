"""The cursor table, on every engine: one value per (channel, account, name), and cursors that expire."""

from __future__ import annotations


async def test_cursors_round_trip_and_overwrite(store):
    assert await store.get_cursor("relay", "a", "offset") is None
    await store.put_cursor("relay", "a", "offset", "10")
    await store.put_cursor("relay", "a", "offset", "11")
    assert await store.get_cursor("relay", "a", "offset") == "11"
    assert await store.get_cursor("relay", "b", "offset") is None
    assert await store.get_cursor("other", "a", "offset") is None


async def test_a_cursor_past_its_keep_is_pruned_and_one_written_again_without_it_is_kept(store):
    await store.put_cursor("whatsapp", "a", "status:wamid.1", "read", keep_s=-1.0)
    await store.put_cursor("whatsapp", "a", "status:wamid.2", "sent", keep_s=3600.0)
    await store.put_cursor("whatsapp", "a", "status:wamid.3", "sent", keep_s=-1.0)
    await store.put_cursor("whatsapp", "a", "status:wamid.3", "read")  # written again without keep_s: for good
    await store.put_cursor("whatsapp", "a", "offset", "42")
    assert await store.prune() >= 1
    assert await store.get_cursor("whatsapp", "a", "status:wamid.1") is None
    assert await store.get_cursor("whatsapp", "a", "status:wamid.2") == "sent"
    assert await store.get_cursor("whatsapp", "a", "status:wamid.3") == "read"
    assert await store.get_cursor("whatsapp", "a", "offset") == "42"
