"""Blob collection: a file goes once no stored message needs it and the retention is past; a forgotten
learner's files go at once, unless someone else sent the very same bytes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator

import pytest

import gateway.app
from brain.commands import FORGOTTEN
from brain.memory.scopes import Identity
from gateway.app import Gateway
from gateway.blob_gc import ERASED, BlobCollector
from gateway.blobs import LocalBlobs
from gateway.core.messages import Media, MediaRef, Text
from gateway.store import InboundState
from gateway.store.sqlite import SqliteStore
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import make_message
from tests.pipeline.test_media import PHOTO, FileChannel, reset
from tests.waits import HANG_S

DAY = 24 * 3600.0
RETENTION = 30 * DAY


async def once(body: bytes) -> AsyncIterator[bytes]:
    yield body


def carrying(event: str, blob: str, *, user: str = "u1"):
    message = make_message("look", event=event, user=user)
    media = Media.inbound("image", MediaRef(locator=event)).model_copy(update={"blob": blob})
    return message.model_copy(update={"elements": (media, Text(text="look"))})


def last_stored(blobs: LocalBlobs, key: str, at: float) -> None:
    os.utime(blobs.path(key), (at, at))


@pytest.fixture
async def kept(tmp_path):
    store = SqliteStore(tmp_path / "gateway.db")
    await store.open()
    yield store, LocalBlobs(tmp_path / "blobs"), tmp_path / "gateway.db"
    await store.close()


async def test_only_files_no_stored_message_needs_and_past_the_retention_go(kept):
    store, blobs, _ = kept
    now = time.time()
    keys = {name: (await blobs.put(once(name.encode()), limit=100, suffix=".png")).key
            for name in ("pending", "answered", "unrecorded", "stale", "resent")}
    await store.accept([carrying("e-pending", keys["pending"]), carrying("e-answered", keys["answered"])], 60)
    await store.mark_inbound([carrying("e-answered", keys["answered"]).dedup_key], InboundState.ANSWERED)
    # "unrecorded": fetched, its row not yet written; "stale" and "resent": their rows long pruned.
    last_stored(blobs, keys["stale"], now - RETENTION - DAY)
    last_stored(blobs, keys["resent"], now - RETENTION - DAY)
    await blobs.put(once(b"resent"), limit=100, suffix=".png")  # the same photo sent again: its age starts over

    def present() -> set[str]:
        return {name for name, key in keys.items() if blobs.path(key).exists()}

    assert await BlobCollector(store, blobs, RETENTION).collect() == 1
    assert present() == {"pending", "answered", "unrecorded", "resent"}  # within the retention, answered or not

    later = now + RETENTION + DAY
    last_stored(blobs, keys["unrecorded"], later - DAY)
    crashed = blobs.root / "tmp" / "crashed.part"
    crashed.write_bytes(b"half")
    assert await BlobCollector(store, blobs, RETENTION, clock=lambda: later).collect() == 2
    assert present() == {"pending", "unrecorded"}  # a pending message's file waits for its turn, however old
    assert not crashed.exists()


async def test_forgetting_a_sender_erases_their_files_but_not_bytes_someone_else_sent(kept):
    store, blobs, path = kept
    own = (await blobs.put(once(b"ann's drawing"), limit=100)).key
    shared = (await blobs.put(once(b"the worksheet"), limit=100)).key
    await store.accept([carrying("a1", own, user="ann"), carrying("a2", shared, user="ann"),
                        carrying("b1", shared, user="bob")], 60)
    removed = await BlobCollector(store, blobs, RETENTION).forget([Identity("memory", "acct", "ann")])
    assert removed == 1 and not blobs.path(own).exists() and blobs.path(shared).exists()
    conn = sqlite3.connect(path)
    try:
        payloads = dict(conn.execute("SELECT event_id, payload FROM inbound").fetchall())
    finally:
        conn.close()
    assert own not in payloads["a1"] and shared not in payloads["a2"] and ERASED in payloads["a1"]
    assert shared in payloads["b1"]
    assert await store.blobs_in_use(received_before=0.0) == {shared}


async def test_the_gateway_collects_a_file_once_its_message_is_answered_and_the_retention_is_past(tmp_path, monkeypatch):
    """The housekeeping loop's hourly pass, made quick: a file fetched, answered, then swept."""
    monkeypatch.setattr(gateway.app, "SWEEP_INTERVAL_S", 0.05)
    monkeypatch.setattr(gateway.app, "PRUNE_INTERVAL_S", 0.05)
    reset()
    config = make_config(tmp_path, pipeline={"blob_retention_s": 0.01})
    running = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": FileChannel})
    await running.start()
    try:
        channel = running.channel("memory", "acct")
        message = make_message("look", event="e1")
        photo = Media.inbound("image", MediaRef(locator="f1", name="cat.png", size=len(PHOTO)))
        await channel.context.sink.accept([message.model_copy(update={"elements": (photo,)})])
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        folder = tmp_path / "blobs"
        kept_files = [p for p in folder.glob("*/*") if p.parent.name != "tmp"]
        assert len(kept_files) == 1  # fetched before the turn
        async with asyncio.timeout(HANG_S):
            while kept_files[0].exists():
                await asyncio.sleep(0.05)
    finally:
        await running.stop()


async def test_forget_confirm_takes_the_learners_files_with_them(tmp_path):
    """The gateway's own brain, no model needed: ``/forget confirm`` reaches the blob store through the gateway."""
    reset()
    FileChannel.files = {"ann-photo": b"\x89PNG ann only", "sheet": b"%PDF the worksheet"}
    config = make_config(tmp_path)
    running = Gateway(config, channel_classes={"memory": FileChannel})
    await running.start()
    try:
        channel = running.channel("memory", "acct")

        async def say(event: str, user: str, text: str = "", file: str | None = None) -> None:
            message = make_message(text, event=event, user=user, chat=user)
            if file is not None:
                media = Media.inbound("file", MediaRef(locator=file, name=f"{file}.bin"))
                message = message.model_copy(update={"elements": (media, Text(text=text or "see"))})
            before = len(channel.sent)
            await channel.context.sink.accept([message])
            await channel.wait_for(lambda sent: any(s.final and s.chat == user for s in sent[before:]))
            await running.lanes.drain()  # every part of the answer out

        await say("a1", "ann", file="ann-photo")
        await say("a2", "ann", file="sheet")
        await say("b1", "bob", file="sheet")
        folder = tmp_path / "blobs"
        assert len([p for p in folder.glob("*/*") if p.parent.name != "tmp"]) == 2
        await say("a3", "ann", "/forget")
        await say("a4", "ann", "/forget confirm")
        assert [s.text for s in channel.sent if s.chat == "ann"][-1] == FORGOTTEN
        left = [p.read_bytes() for p in folder.glob("*/*") if p.parent.name != "tmp"]
        assert left == [b"%PDF the worksheet"]  # Bob sent it too
    finally:
        await running.stop()
