"""PLACEHOLDER until the pg-rows branch lands: the PostgreSQL transcripts (:mod:`gateway.store.transcripts` on SQLite).

Empty so :mod:`.engine` imports; the real module replaces this file.
"""

from __future__ import annotations

from gateway.store.postgres.rows import OnPool


class PgTranscriptRows(OnPool):
    """Nothing yet."""
