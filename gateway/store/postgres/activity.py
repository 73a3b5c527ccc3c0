"""PLACEHOLDER until the pg-rows branch lands: the PostgreSQL activity sums and account switches (:mod:`gateway.store.activity` on SQLite).

Empty so :mod:`.engine` imports; the real module replaces this file.  The engine's prune awaits ``_prune_activity(conn, now)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.store.postgres.rows import OnPool

if TYPE_CHECKING:
    from psycopg import AsyncConnection


class PgActivityRows(OnPool):
    """Nothing yet."""

    async def _prune_activity(self, conn: AsyncConnection, now: float) -> int:
        """What :meth:`PostgresStore.prune` asks of this part, in its transaction: rows removed."""
        return 0
