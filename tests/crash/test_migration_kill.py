"""A first start killed at any SQLite statement of its schema migrations: every later start works.

The connections run in autocommit, where each ``CREATE TABLE`` used to commit alone; a
SIGKILL between two of them left ``gateway.db`` half-made and every later start failed with
``table inbound already exists`` (and an FTS index without its triggers, silently never
updated).  The kill hook (``sqlite_kill/sitecustomize.py``) SIGKILLs the process as the N-th
statement on the watched file starts; a reference run without a kill says how many
statements there are.  After each kill the next start must succeed and leave exactly the
schema a start that was never killed leaves.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from tests.crash.gateway_process import READY_RE, GatewayProcess
from tests.crash.scenario import ROOT, gateway_env
from tests.crash.schema_dump import schema_of
from tests.waits import HANG_S

HOOK = ROOT / "tests" / "crash" / "sqlite_kill"
STORE_FILES = ("memory.db", "brain.db", "notes-index.db", "knowledge/tutor/catalog.db", "channels/email/main/sent.sqlite3")
"""What ``open_stores.py`` makes."""

pytestmark = pytest.mark.slow


def hooked(env: dict[str, str], watched: str, **settings: str) -> dict[str, str]:
    return {**env, "PYTHONPATH": os.pathsep.join([str(HOOK), env.get("PYTHONPATH", str(ROOT))]),
            "CRASH_SQLITE_FILE": watched, **settings}


def write_config(workdir: Path) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {}}},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def start_and_stop(workdir: Path, env: dict[str, str]) -> None:
    gateway = GatewayProcess(workdir, workdir / "partners.yaml", env)
    await gateway.start()  # raises, with the log, if the start fails
    await gateway.stop()


async def killed_start(workdir: Path, env: dict[str, str]) -> int | None:
    """Start ``partners serve`` under the hook; the return code if it died, None if it became ready."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("partners")), "--config", str(workdir / "partners.yaml"), "serve", "--port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env, cwd=workdir,
    )
    assert process.stdout is not None
    while line := (await asyncio.wait_for(process.stdout.readline(), HANG_S)).decode():
        if READY_RE.search(line):
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), HANG_S)
            return None
    return await asyncio.wait_for(process.wait(), HANG_S)


def migration_points(trace: Path) -> int:
    """Statements up to and including the first COMMIT (the migration's), plus the one after it."""
    lines = trace.read_text().splitlines()
    commit = next(i for i, line in enumerate(lines, 1) if line.split(" ", 2)[2] == "COMMIT")
    return commit + 1


async def test_serve_killed_during_its_first_migration_starts_next_time(tmp_path):
    env = gateway_env()
    reference = tmp_path / "reference"
    reference.mkdir()
    write_config(reference)
    trace = tmp_path / "trace"
    await start_and_stop(reference, hooked(env, "gateway.db", CRASH_SQLITE_TRACE=str(trace)))
    expected = schema_of(reference / "data" / "gateway.db")
    points = migration_points(trace)
    assert points > 20  # the pragmas, the version reads, every CREATE of both migrations, the COMMIT
    for number in range(1, points + 1):
        workdir = tmp_path / f"kill-{number}"
        workdir.mkdir()
        write_config(workdir)
        code = await killed_start(workdir, hooked(env, "gateway.db", CRASH_SQLITE_AT=str(number)))
        assert code == -signal.SIGKILL, f"start was not killed at statement {number} (exit {code})"
        await start_and_stop(workdir, env)
        assert schema_of(workdir / "data" / "gateway.db") == expected, f"killed at statement {number}"


async def test_every_brain_and_channel_store_survives_a_kill_at_each_statement(tmp_path):
    env = hooked(gateway_env(), "*")
    driver = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "tests" / "crash" / "open_stores.py"), str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(driver.communicate(), HANG_S * 3)
    assert driver.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["points"] > 60
    assert result["survived"] == [] and result["failed"] == [], err.decode()[-3000:]
    for name in STORE_FILES:
        expected = schema_of(tmp_path / "reference" / name)
        for number in range(1, result["points"] + 1):
            assert schema_of(tmp_path / f"kill-{number}" / name) == expected, f"{name}, killed at statement {number}"
