"""Bad luck with the files: a damaged store is named, with its fix, by doctor and by serve.

A store file can be cut short by a crash, overwritten by a stray copy, bit-rotted on a
disk, or written by a newer release after a downgrade.  ``partners doctor`` opens every
store file the data dir holds and reports each that cannot be used -- one line with the
file and the fix -- and ``partners serve`` refuses to start on one with the same line,
never a traceback.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from brain.memory.store import MemoryStore
from brain.session_log import SessionLog
from gateway.cli import cli
from gateway.store.migrations import GATEWAY_SCHEMA
from gateway.store.sqlite import SqliteStore
from tests.waits import HANG_S

CONFIG = """\
data_dir: data
http: {port: 0}
partners: [{id: tutor, name: Tutor}]
channels: {webchat: {default: {}}}
bindings: [{partner: tutor, channel: webchat}]
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    (tmp_path / "partners.yaml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def doctor(workdir: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["--config", str(workdir / "partners.yaml"), "doctor", "--offline"], prog_name="partners")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, [line.strip() for line in result.output.splitlines()]


def make_stores(data: Path) -> None:
    async def make() -> None:
        store = SqliteStore(data / "gateway.db")
        await store.open()
        await store.close()
        memory = MemoryStore(data / "memory.db")
        await memory.checkpoint()
        memory.close()
        log = SessionLog(data / "brain.db")
        await log.checkpoint()
        log.close()

    asyncio.run(make())


def corrupt_a_page(path: Path) -> None:
    """Fill a table with rows, then overwrite one of its pages in the middle of the file with noise."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.executemany("INSERT INTO session_events (conversation, kind, payload) VALUES (?, 'note', ?)",
                     [(f"c{i % 7}", "x" * 300) for i in range(400)])
    conn.commit()
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with path.open("r+b") as file:
        file.seek(page * (pages // 2))
        file.write(bytes(range(256)) * (page // 256))


def test_healthy_stores_pass(workdir):
    make_stores(workdir / "data")
    code, out = doctor(workdir)
    assert code == 0, out
    assert "ok     stores: every store file opens and passes its checks" in out


def test_doctor_names_each_damaged_store_and_its_fix(workdir):
    data = workdir / "data"
    make_stores(data)
    (data / "gateway.db").write_bytes(b"not a database, a stray copy of something else " * 200)
    conn = sqlite3.connect(data / "memory.db")
    conn.execute("UPDATE schema_versions SET version = 99 WHERE schema = 'memory store'")
    conn.commit()
    conn.close()
    corrupt_a_page(data / "brain.db")

    code, out = doctor(workdir)

    assert code == 1
    text = "\n".join(out)
    assert "Traceback" not in text
    assert (f"error  store gateway.db: {data / 'gateway.db'} is not a readable gateway store "
            "(not an SQLite database, or an encrypted one)") in out
    assert (f"error  store memory.db: {data / 'memory.db'} has memory store schema version 99, newer than this "
            "release knows (1)") in out
    assert any(line.startswith(f"error  store brain.db: {data / 'brain.db'} ") for line in out), text
    fixes = [line for line in out if line.startswith("fix: ")]
    assert "fix: stop the gateway, move the file aside (a new, empty one is made at the next start) or restore it from a backup" in fixes
    assert "fix: upgrade partners-gateway, or restore a backup made by this release" in fixes


def test_serve_refuses_a_damaged_store_in_one_line(workdir):
    data = workdir / "data"
    data.mkdir()
    (data / "gateway.db").write_bytes(b"\x00garbage" * 1000)

    done = subprocess.run(
        [str(Path(sys.executable).with_name("partners")), "--config", str(workdir / "partners.yaml"), "serve", "--port", "0"],
        capture_output=True, text=True, timeout=HANG_S, cwd=workdir, check=False,
    )

    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [(f"error: {data / 'gateway.db'} is not a readable gateway store (not an SQLite database, or an encrypted one)"
                       " (fix: stop the gateway, move the file aside (a new, empty one is made at the next start)"
                       " or restore it from a backup)")], done.stderr
    assert "Traceback" not in done.stderr


def test_serve_refuses_a_store_from_a_newer_release(workdir):
    data = workdir / "data"
    make_stores(data)
    conn = sqlite3.connect(data / "gateway.db")
    conn.execute(f"PRAGMA user_version = {GATEWAY_SCHEMA.version + 1}")
    conn.commit()
    conn.close()

    done = subprocess.run(
        [str(Path(sys.executable).with_name("partners")), "--config", str(workdir / "partners.yaml"), "serve", "--port", "0"],
        capture_output=True, text=True, timeout=HANG_S, cwd=workdir, check=False,
    )

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert (f"error: {data / 'gateway.db'} has gateway store schema version {GATEWAY_SCHEMA.version + 1}, newer than this release knows "
            f"({GATEWAY_SCHEMA.version})"
            " (fix: upgrade partners-gateway, or restore a backup made by this release)") in done.stderr.splitlines()


def test_a_command_reading_a_damaged_store_says_which_file_in_one_line(workdir):
    data = workdir / "data"
    make_stores(data)
    (data / "memory.db").write_bytes(b"\x13" * 8192)

    result = CliRunner().invoke(cli, ["--config", str(workdir / "partners.yaml"), "people", "list"], prog_name="partners")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.output.strip().splitlines() == [
        (f"error: {data / 'memory.db'} is not a readable memory store (not an SQLite database, or an encrypted one)"
         " (fix: stop the gateway, move the file aside (a new, empty one is made at the next start) or restore it from a backup)")
    ]
