"""The store engines the store tests run on: every engine passes the same tests.

A test that takes the ``store`` fixture (``tests/store/conftest.py``) runs once per entry of
:data:`ENGINES`; :func:`open_store` makes a fresh, empty, migrated store of that engine.  An engine
that needs a service (PostgreSQL) fails its tests when the service cannot be had -- never a skip.
"""

from __future__ import annotations

from pathlib import Path

from gateway.store import Store
from gateway.store.sqlite import SqliteStore

ENGINES: tuple[str, ...] = ("sqlite",)


async def open_store(engine: str, tmp_path: Path) -> Store:
    """A new empty store of ``engine``, opened (the caller closes it)."""
    if engine == "sqlite":
        store: Store = SqliteStore(tmp_path / "gateway.db")
    else:
        raise ValueError(f"unknown store engine {engine!r}")
    await store.open()
    return store
