"""Test-only, loaded by putting this folder first on ``PYTHONPATH``: SIGKILL the process at one SQLite statement.

``CRASH_SQLITE_FILE`` names the database file to watch (its file name, or ``*`` for every
file); the process kills itself with SIGKILL when the ``CRASH_SQLITE_AT``-th statement run on
such a file is about to start (0: never).  ``CRASH_SQLITE_TRACE`` names a file that gets one
line per statement seen, ``<n> <file> <statement>``, so a reference run tells a test how many
points there are to kill at.  Nothing in the product knows about this: it wraps
``sqlite3.connect`` and uses SQLite's own statement trace.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

WATCHED = os.environ.get("CRASH_SQLITE_FILE", "")
AT = int(os.environ.get("CRASH_SQLITE_AT", "0") or 0)
TRACE = os.environ.get("CRASH_SQLITE_TRACE", "")

if WATCHED:
    _connect = sqlite3.connect
    _lock = threading.Lock()
    _seen = [0]

    def _watch(name: str) -> Any:
        def seen(statement: str) -> None:
            with _lock:
                _seen[0] += 1
                number = _seen[0]
                if TRACE:
                    with open(TRACE, "a", encoding="utf-8") as trace:
                        trace.write(f"{number} {name} {' '.join(statement.split())}\n")
            if number == AT:
                os.kill(os.getpid(), signal.SIGKILL)

        return seen

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = _connect(database, *args, **kwargs)
        name = Path(str(database)).name
        if WATCHED in ("*", name):
            conn.set_trace_callback(_watch(name))
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
