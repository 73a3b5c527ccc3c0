"""PLACEHOLDER until the pg-rows branch lands: the PostgreSQL stored channel accounts (:mod:`gateway.store.accounts` on SQLite).

Empty so :mod:`.engine` imports; the real module replaces this file.
"""

from __future__ import annotations

from gateway.store.postgres.rows import OnPool


class PgAccountRows(OnPool):
    """Nothing yet."""
