"""The inbox role, on every engine: dedup and inbox in one write, state moves, files, reply windows."""

from __future__ import annotations

import asyncio
import time

from gateway.core.messages import Media, MediaRef
from gateway.store import InboundState
from tests.store.rows import message


def with_file(event: str, user: str = "u1", blob: str | None = None):
    media = Media.inbound("image", MediaRef(locator=f"file-{event}"))
    if blob is not None:
        media = media.model_copy(update={"blob": blob})
    return message(event, user=user, elements=(media,))


async def test_accept_deduplicates_by_channel_account_and_event(store):
    first = await store.accept([message("1"), message("2")], retention_s=60)
    again = await store.accept([message("2"), message("3"), message("1", channel="other")], retention_s=60)
    assert first == [True, True]
    assert again == [False, True, True]
    pending = await store.open_inbound()
    assert [i.message.event_id for i in pending] == ["1", "2", "3", "1"]
    assert [i.seq for i in pending] == sorted(i.seq for i in pending)


async def test_one_event_accepted_many_times_at_once_is_new_exactly_once(store):
    results = await asyncio.gather(*(store.accept([message("same")], 60) for _ in range(20)))
    assert sorted(r[0] for r in results) == [False] * 19 + [True]
    assert len(await store.open_inbound()) == 1


async def test_marked_messages_leave_the_open_inbox_and_held_ones_come_back_released(store):
    a, b, c = message("1", user="kid"), message("2", user="kid"), message("3", user="other")
    await store.accept([a, b, c], 60)
    await store.mark_inbound([a.dedup_key, b.dedup_key], InboundState.HELD, "pairing")
    await store.mark_inbound([c.dedup_key], InboundState.DROPPED, "policy")
    assert await store.open_inbound() == []
    assert await store.release_held("relay", "a", "nobody") == []
    released = await store.release_held("relay", "a", "kid")
    assert [(i.message.event_id, i.state) for i in released] == [("1", InboundState.PENDING), ("2", InboundState.PENDING)]
    assert [i.message.event_id for i in await store.open_inbound()] == ["1", "2"]
    assert await store.release_held("relay", "a", "kid") == []  # released once


async def test_recorded_media_replaces_the_payload_and_keeps_place_and_state(store):
    first, fetched = with_file("1"), message("2")
    await store.accept([first, fetched], 60)
    before = await store.open_inbound()
    await store.record_media(with_file("1", blob="blob-1"))
    after = await store.open_inbound()
    assert [i.seq for i in after] == [i.seq for i in before]
    media = after[0].message.elements[0]
    assert isinstance(media, Media) and media.blob == "blob-1"
    assert after[0].state is InboundState.PENDING


async def test_blobs_in_use_are_those_of_open_or_recent_messages(store):
    open_one, done = with_file("1", blob="open-blob"), with_file("2", blob="done-blob")
    await store.accept([open_one, done, message("3")], 60)
    await store.mark_inbound([done.dedup_key], InboundState.ANSWERED)
    assert await store.blobs_in_use(received_before=time.time() + 3600) == {"open-blob"}
    assert await store.blobs_in_use(received_before=time.time() - 3600) == {"open-blob", "done-blob"}


async def test_erasing_a_senders_files_leaves_notes_and_other_senders_alone(store):
    await store.accept([with_file("1", user="kid", blob="kid-blob"), with_file("2", user="other", blob="other-blob")], 60)
    erased = await store.erase_sender_files("relay", "a", "kid", "erased on request")
    assert erased == {"kid-blob"}
    by_event = {i.message.event_id: i.message.elements[0] for i in await store.open_inbound()}
    kid, other = by_event["1"], by_event["2"]
    assert isinstance(kid, Media) and kid.blob is None and kid.missing == "erased on request"
    assert isinstance(other, Media) and other.blob == "other-blob"
    assert await store.blobs_in_use(received_before=time.time() + 3600) == {"other-blob"}
    assert await store.erase_sender_files("relay", "a", "kid", "again") == set()


async def test_last_inbound_at_is_the_latest_message_of_the_conversation(store):
    key = message("x").address.conversation_key
    assert await store.last_inbound_at(key) is None
    started = time.time()
    await store.accept([message("1"), message("2", chat="elsewhere")], 60)
    at = await store.last_inbound_at(key)
    assert at is not None and started - 5 <= at <= time.time() + 5
