"""Schema migrations are one transaction: no crash, cut-short WAL or earlier half-made file bricks a store."""

from __future__ import annotations

import shutil
import sqlite3

from brain.knowledge.fts import FTS_SCHEMA
from brain.session_log import SessionLog
from brain.usage import UsageLedger
from gateway.store.migrations import MIGRATIONS
from gateway.store.schema import statements
from gateway.store.sqlite import SqliteStore
from tests.crash.schema_dump import schema_of


async def reference_schema(tmp_path) -> list[tuple[str, ...]]:
    store = SqliteStore(tmp_path / "reference.db")
    await store.open()
    await store.close()
    return schema_of(tmp_path / "reference.db")


async def test_a_wal_cut_short_anywhere_leaves_the_schema_before_or_after_the_migration(tmp_path):
    expected = await reference_schema(tmp_path)
    live = SqliteStore(tmp_path / "live.db")
    await live.open()  # left open while copied: the migration is still in the WAL, as at a power cut
    wal = (tmp_path / "live.db-wal").read_bytes()
    assert len(wal) > 8192
    for cut in range(0, len(wal) + 1, 1024):
        copy = tmp_path / f"cut-{cut}.db"
        shutil.copyfile(tmp_path / "live.db", copy)
        copy.with_name(copy.name + "-wal").write_bytes(wal[:cut])
        store = SqliteStore(copy)
        await store.open()  # a start on what a power cut left
        await store.close()
        assert schema_of(copy) == expected, f"WAL cut at byte {cut}"
    await live.close()


async def test_a_file_an_earlier_release_left_half_migrated_is_completed(tmp_path):
    expected = await reference_schema(tmp_path)
    conn = sqlite3.connect(tmp_path / "half.db", isolation_level=None)
    for statement in MIGRATIONS[0][:5]:  # as the autocommit migration committed them, one by one, until the kill
        conn.execute(statement)
    conn.close()
    store = SqliteStore(tmp_path / "half.db")
    await store.open()
    await store.close()
    assert schema_of(tmp_path / "half.db") == expected


async def test_two_schemas_share_a_file_and_each_keeps_its_version(tmp_path):
    usage, log = UsageLedger(tmp_path / "brain.db"), SessionLog(tmp_path / "brain.db")
    await usage.checkpoint()
    await log.checkpoint()
    usage.close()
    log.close()
    conn = sqlite3.connect(tmp_path / "brain.db")
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    versions = dict(conn.execute("SELECT schema, version FROM schema_versions").fetchall())
    conn.close()
    assert {"usage_daily", "session_events", "session_versions"} <= tables
    assert versions == {"usage ledger": 1, "session log": 1}


def test_a_script_splits_into_statements_and_a_trigger_stays_whole():
    parts = list(statements(FTS_SCHEMA))
    assert len(parts) == 4
    assert parts[1].startswith("CREATE TRIGGER IF NOT EXISTS chunks_fts_insert") and parts[1].endswith("END")
