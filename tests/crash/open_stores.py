"""Kill the first open of every brain and channel store at each of its SQLite statements, then open again.

Run as a script by ``test_migration_kill.py`` (``python open_stores.py ROOT``), with
``sqlite_kill/`` first on ``PYTHONPATH`` and ``CRASH_SQLITE_FILE=*``.  A reference child
opens every store in ``ROOT/reference`` and traces its statements; then, for each
statement number N, a forked child opens the stores in ``ROOT/kill-N`` and is SIGKILLed
(by the hook) as statement N starts, and a second child opens them again with no hook.
Forked children are real processes, killed for real, but skip the interpreter's start-up,
which keeps a hundred-odd kill points affordable.  Prints one JSON line: the number of
points, the points where the kill did not happen, and the reopen failures.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import traceback
from pathlib import Path

import sitecustomize  # the kill hook (tests/crash/sqlite_kill)

from brain.knowledge.fts import FtsEngine
from brain.memory.store import MemoryStore
from brain.notes import NotesIndex
from brain.session_log import SessionLog
from brain.usage import UsageLedger
from channels.email.ledger import SentLedger
from gateway.core.capabilities import capabilities_of


async def open_all(data: Path) -> None:
    for store in (MemoryStore(data / "memory.db"), SessionLog(data / "brain.db"), UsageLedger(data / "brain.db")):
        await store.checkpoint()  # the first use opens the file and migrates its schema
        store.close()
    NotesIndex(data / "notes-index.db").close()
    await FtsEngine(data / "knowledge" / "tutor" / "catalog.db").close()
    SentLedger(data / "channels" / "email" / "main" / "sent.sqlite3", capabilities_of("email").redelivery_horizon_s).close()


def in_child(data: Path, *, kill_at: int = 0, trace: str = "") -> int:
    """Open every store in a forked child; return its wait status."""
    pid = os.fork()
    if pid == 0:
        sitecustomize.AT, sitecustomize.TRACE, sitecustomize._seen[0] = kill_at, trace, 0
        try:
            asyncio.run(open_all(data))
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1]


def main(root: Path) -> None:
    trace = root / "trace"
    assert in_child(root / "reference", trace=str(trace)) == 0
    points = len(trace.read_text().splitlines())
    survived, failed = [], []
    for number in range(1, points + 1):
        data = root / f"kill-{number}"
        status = in_child(data, kill_at=number)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            survived.append(number)
        if in_child(data) != 0:
            failed.append(number)
    print(json.dumps({"points": points, "survived": survived, "failed": failed}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
