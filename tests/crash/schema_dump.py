"""What a test compares to call a schema complete: every object's SQL, and the recorded versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def schema_of(path: Path) -> list[tuple[str, ...]]:
    conn = sqlite3.connect(path)
    try:
        rows = [tuple(str(v) for v in row) for row in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()]
        if any(row[1] == "schema_versions" for row in rows):
            rows += [("versions", str(name), str(version)) for name, version in conn.execute(
                "SELECT schema, version FROM schema_versions ORDER BY schema").fetchall()]
        rows.append(("user_version", str(conn.execute("PRAGMA user_version").fetchone()[0])))
    finally:
        conn.close()
    return rows
