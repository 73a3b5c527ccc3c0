"""The PostgreSQL store as a fleet uses it: its schema matches SQLite's, and two nodes share one database.

The behaviour every engine shares is tested through the ``store`` fixture (``tests/store/engines.py``);
here is what only a shared database has: two :class:`PostgresStore` instances ("nodes") on one
database, racing the same writes, must keep what one SQLite writer keeps by construction.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from gateway.core.messages import Address, OutboundReply, Text
from gateway.store import InboundState, Reminder, ReplyState
from gateway.store.postgres.engine import PostgresStore, PostgresStoreError
from gateway.store.postgres.migrations import MIGRATIONS, SCHEMA_NAME
from gateway.store.sqlite import SqliteStore
from tests.store.engines import create_database, drop_database
from tests.store.test_sqlite import message

CORE_TABLES = {"inbound", "outbox", "cursors", "pairing", "approved_senders", "notices", "reminders", "takeovers"}


@pytest.fixture
async def database():
    dsn = await create_database()
    yield dsn
    await drop_database(dsn)


@pytest.fixture
async def nodes(database):
    """Two stores on one database, as two gateway nodes would be; they open together (one migrates)."""
    pair = (PostgresStore(database, max_size=4), PostgresStore(database, max_size=4))
    await asyncio.gather(*(node.open() for node in pair))
    yield pair
    for node in pair:
        await node.close()


async def _pg_columns(dsn: str) -> dict[str, set[str]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cursor = await conn.execute("SELECT table_name, column_name, data_type FROM information_schema.columns"
                                    " WHERE table_schema = 'public' AND table_name <> 'schema_migrations'")
        rows = await cursor.fetchall()
    assert not [r for r in rows if r[2] == "real"], "a timestamp kept as single precision loses its seconds"
    tables: dict[str, set[str]] = {}
    for table, column, _type in rows:
        tables.setdefault(table, set()).add(column)
    return tables


async def test_the_postgresql_tables_have_the_sqlite_tables_columns(tmp_path, nodes):
    lite = SqliteStore(tmp_path / "g.db")
    await lite.open()
    await lite.close()
    conn = sqlite3.connect(tmp_path / "g.db")
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'schema_versions'")]
    sqlite_tables = {name: {r[1] for r in conn.execute(f"PRAGMA table_info({name})")} for name in names}
    conn.close()
    pg_tables = await _pg_columns(nodes[0].dsn)
    assert CORE_TABLES <= pg_tables.keys()
    assert pg_tables.keys() <= sqlite_tables.keys(), "a PostgreSQL table SQLite does not have"
    for table, columns in pg_tables.items():
        assert columns == sqlite_tables[table], table


async def test_nodes_starting_together_migrate_once(nodes):
    import psycopg

    async with await psycopg.AsyncConnection.connect(nodes[0].dsn) as conn:
        rows = await (await conn.execute("SELECT name, version FROM schema_migrations")).fetchall()
    assert rows == [(SCHEMA_NAME, len(MIGRATIONS))]
    await nodes[1].close()
    await nodes[1].open()  # a restart finds nothing to do
    assert await nodes[1].accept([message("after-restart")], 60) == [True]


async def test_two_nodes_racing_accept_store_each_message_once(nodes):
    batches = [[message(str(i)) for i in range(start, start + 20)] for start in range(0, 100, 10)]  # overlapping
    results = await asyncio.gather(*(node.accept(batch, 60) for batch in batches for node in nodes))
    fresh = [m.event_id for batch, result in zip([b for b in batches for _ in nodes], results, strict=True)
             for m, new in zip(batch, result, strict=True) if new]
    assert sorted(fresh, key=int) == [str(i) for i in range(110)], "every message new exactly once"
    pending = await nodes[0].open_inbound()
    assert sorted(int(i.message.event_id) for i in pending) == list(range(110))
    assert [i.seq for i in pending] == sorted(i.seq for i in pending)


async def test_two_nodes_racing_notices_send_one(nodes):
    calls = [node.notice_due("relay", "a", "stranger", 3600) for _ in range(15) for node in nodes]
    assert sum(await asyncio.gather(*calls)) == 1


async def test_two_nodes_racing_attempts_count_each_one(nodes):
    reply = OutboundReply(idempotency_key="k1", target=message("1").address, markdown="hi")
    await nodes[0].put_reply(reply, ReplyState.READY)
    counts = await asyncio.gather(*(node.record_attempt("k1", f"error {i}") for i in range(15) for node in nodes))
    assert sorted(counts) == list(range(1, 31))
    assert (await nodes[1].get_reply("k1")).attempts == 30


async def test_two_nodes_firing_reminders_fire_each_once(nodes):
    target: Address = message("1").address
    for i in range(20):
        await nodes[0].add_reminder(Reminder(id=f"r{i}", target=target, text=f"remember {i}", due_at=time.time() - 1))
    fired = await asyncio.gather(*(node.fire_due_reminders(time.time(), lambda rid: f"reminder:{rid}") for node in nodes * 3))
    keys = [item.reply.idempotency_key for batch in fired for item in batch]
    assert sorted(keys) == sorted(f"reminder:r{i}" for i in range(20))
    assert len(await nodes[1].open_replies()) == 20


async def test_two_nodes_releasing_held_messages_release_each_once(nodes):
    held = [message(str(i), user="stranger") for i in range(10)]
    await nodes[0].accept(held, 60)
    await nodes[0].mark_inbound([m.dedup_key for m in held], InboundState.HELD, "pairing")
    request = await nodes[0].pairing_request("relay", "a", "stranger", "S", ttl_s=60, max_pending=3)
    resolved = await asyncio.gather(*(node.pairing_resolve(request.code, approve=True) for node in nodes))
    assert sum(r is not None for r in resolved) == 1
    released = await asyncio.gather(*(node.release_approved() for node in nodes * 2))
    assert sorted(int(i.message.event_id) for batch in released for i in batch) == list(range(10))


async def test_two_nodes_racing_for_pairing_codes_keep_the_cap(nodes):
    asked = await asyncio.gather(*(node.pairing_request("relay", "a", f"u{i}", "", 60, max_pending=3)
                                   for i in range(8) for node in nodes))
    assert len({r.code for r in asked if r is not None}) == 3
    assert len(await nodes[0].pairing_list()) == 3


async def test_a_write_failure_is_recorded_and_a_probe_ends_it(nodes):
    node = nodes[0]
    await node.put_cursor("relay", "a", "offset", "1")
    import psycopg

    async with await psycopg.AsyncConnection.connect(node.dsn, autocommit=True) as conn:
        await conn.execute("ALTER DATABASE " + psycopg.sql.Identifier(conn.info.dbname).as_string(conn)
                           + " SET default_transaction_read_only = on")  # type: ignore[arg-type]
    await node.close()
    await node.open()  # new sessions read the setting
    with pytest.raises(psycopg.Error):
        await node.put_cursor("relay", "a", "offset", "2")
    assert node.health.condition().state.value == "failing"
    async with await psycopg.AsyncConnection.connect(node.dsn, autocommit=True) as conn:
        await conn.execute("BEGIN READ WRITE")
        await conn.execute("ALTER DATABASE " + psycopg.sql.Identifier(conn.info.dbname).as_string(conn)  # type: ignore[arg-type]
                           + " RESET default_transaction_read_only")
        await conn.execute("COMMIT")
    await node.close()
    await node.open()
    await node.probe_write()
    assert node.health.condition().state.value == "ok"
    assert node.health.condition().recoveries == 1


async def test_an_unreachable_server_is_one_clear_line():
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/nothing")
    with pytest.raises(PostgresStoreError) as caught:
        await store.open()
    assert "\n" not in str(caught.value) and "cannot be reached" in str(caught.value)
    with pytest.raises(RuntimeError, match="not open"):
        await store.get_cursor("relay", "a", "offset")


async def test_a_message_carrying_a_nul_character_is_kept_as_it_came(store):
    """A platform may hand over a NUL; ``jsonb`` cannot hold one, so the inbox keeps messages as text."""
    m = message("1").model_copy(update={"elements": (Text(text="before\x00after"),)})
    assert await store.accept([m], 60) == [True]
    assert (await store.open_inbound())[0].message == m
    reply = OutboundReply(idempotency_key="k-nul", target=m.address, markdown="echo\x00")
    await store.put_reply(reply, ReplyState.READY)
    assert (await store.get_reply("k-nul")).reply.markdown.startswith("echo")
