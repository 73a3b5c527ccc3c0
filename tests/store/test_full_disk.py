"""A store that fills up while a message waits: the gateway says so, and answers it once space is back.

The disk is made full the way SQLite sees a full disk: ``PRAGMA max_page_count`` on the
gateway's own connection (the writer thread's, reached through the store's operation
queue) stops the file from growing, and every write that needs a new page fails with
``SQLITE_FULL`` -- "database or disk is full" -- as on a full disk.  Raising it again is
space coming back.  No restart in between.
"""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest

from gateway.app import Gateway
from gateway.http.app import build_app
from gateway.store.health import StoreState
from gateway.store.sqlite import SqliteStore
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel
from tests.waits import HANG_S, tries

LONG = " ".join(f"word{i}" for i in range(900))
"""An answer of some 8 KB: its outbox row needs pages the full file does not have."""


@pytest.fixture(autouse=True)
def _one_part_replies():
    MemoryChannel.instances.clear()
    MemoryChannel.caps = DEFAULT_CAPS.model_copy(update={"text_limit": 20_000})
    yield
    MemoryChannel.caps = DEFAULT_CAPS


async def set_room(gateway: Gateway, pages: int | None) -> None:
    """Cap the file at its present size (``None``), or let it grow to ``pages`` again."""

    def op(conn: sqlite3.Connection) -> None:
        limit = pages or conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {limit}")

    await gateway.store._run(op)  # the writer's connection: max_page_count is per connection


async def until(check, every: float = 0.1):
    for _ in tries(every):
        if result := await check():
            return result
        await asyncio.sleep(every)
    raise AssertionError(f"still not true after {HANG_S} s")


async def test_a_message_accepted_before_the_disk_filled_is_answered_once_space_is_back(tmp_path):
    responder = ScriptedResponder(lambda turn: f"turn {len(responder.turns)}: {LONG}")
    responder.gate = asyncio.Event()
    gateway = Gateway(make_config(tmp_path), responder=responder, channel_classes={"memory": MemoryChannel})
    await gateway.start()
    channel = gateway.channel("memory", "acct")
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(gateway)), base_url="http://127.0.0.1")
    try:
        await channel.inject("what is a page?")  # durable: the platform has its acknowledgement
        await until(lambda: asyncio.sleep(0, len(responder.turns) == 1))
        await set_room(gateway, None)  # the disk fills while the turn runs
        responder.gate.set()

        async def unhealthy() -> httpx.Response | None:
            answer = await http.get("/healthz")
            return answer if answer.status_code == 503 else None

        health = await until(unhealthy)
        assert "database or disk is full" in health.json()["reason"]
        status = (await http.get("/status")).json()
        assert status["store"]["state"] == "failing"
        assert "database or disk is full" in status["store"]["error"]
        assert status["accounts"][0]["inbound_pending"] == 1
        await until(lambda: asyncio.sleep(0, b"partners_store_failing 1.0" in gateway.metrics.render()))
        assert channel.sent == []

        await set_room(gateway, 1_073_741_823)  # space comes back
        await channel.wait_for(lambda sent: any(s.final for s in sent))
        await until(lambda: asyncio.sleep(0, gateway.store_failure is None))
        assert (await http.get("/healthz")).status_code == 200
        status = (await http.get("/status")).json()
        assert status["store"]["state"] == "ok" and status["store"]["recoveries"] == 1
        assert status["accounts"][0]["inbound_pending"] == 0 and status["accounts"][0]["outbox_open"] == 0
        await gateway.store_watch.check()  # a further look resumes nothing more
        await asyncio.sleep(0.3)
        assert [s.text for s in channel.sent] == [f"turn 2: {LONG}"]  # the lost turn's answer never shows
        assert len(responder.turns) == 2
        assert b"partners_store_resumed_total 1.0" in gateway.metrics.render()
    finally:
        await http.aclose()
        await gateway.stop()


async def test_a_recovery_leaves_work_in_hand_alone(tmp_path):
    """The resume after a recovery skips what a lane still holds: the turn in progress is not run twice."""
    responder = ScriptedResponder()
    responder.gate = asyncio.Event()
    gateway = Gateway(make_config(tmp_path), responder=responder, channel_classes={"memory": MemoryChannel})
    await gateway.start()
    channel = gateway.channel("memory", "acct")
    try:
        await channel.inject("first")
        await until(lambda: asyncio.sleep(0, len(responder.turns) == 1))
        await channel.inject("second")  # waits in the lane behind the turn in progress
        gateway.store.health.failed(sqlite3.OperationalError("disk I/O error"))  # another write failed meanwhile
        gateway.store.health.wrote(proves_room=True)  # and the next probe worked
        await gateway.store_watch.check()
        assert gateway.dispatcher.backlog == 0
        responder.gate.set()
        await channel.wait_for(lambda sent: len(sent) >= 2)
        await asyncio.sleep(0.3)
        assert [s.text for s in channel.sent] == ["re: first", "re: second"]
        assert len(responder.turns) == 2
    finally:
        await gateway.stop()


async def test_a_small_write_that_fits_in_free_pages_does_not_end_a_failure(tmp_path):
    """On a full disk small writes still fit in the file's free pages; only the probe, which needs
    room, says writes work again -- else the state flaps and resumed turns fail once more."""
    store = SqliteStore(tmp_path / "g.db")
    await store.open()
    try:
        await store.put_cursor("relay", "a", "big", "x" * 200_000)
        await store.put_cursor("relay", "a", "big", "")  # leaves free pages in the file

        def cap(conn: sqlite3.Connection) -> None:
            conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")

        await store._run(cap)
        with pytest.raises(sqlite3.OperationalError, match="full"):
            await store.put_cursor("relay", "a", "bigger", "y" * 400_000)
        assert store.health.condition().state is StoreState.FAILING
        await store.put_cursor("relay", "a", "small", "z")  # fits: it commits
        assert await store.get_cursor("relay", "a", "small") == "z"
        assert store.health.condition().state is StoreState.FAILING
        assert store.health.condition().recoveries == 0
        await store._run(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
        await store.probe_write()
        assert store.health.condition().state is StoreState.OK
        assert store.health.condition().recoveries == 1
    finally:
        await store.close()
