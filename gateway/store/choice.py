"""Which store engine a config asks for: SQLite in the data dir, or the PostgreSQL database ``store:`` names.

Why a module of its own: the gateway builds its store here only, and the PostgreSQL engine (psycopg,
the ``postgresql`` extra) is imported only when a config selects it.
"""

from __future__ import annotations

from gateway.core.config import Config
from gateway.store import Store


def configured_store(config: Config) -> Store:
    """The store ``config`` selects, not yet opened (``open()`` reaches the database and migrates)."""
    if config.store is None:
        from gateway.store.sqlite import SqliteStore

        return SqliteStore(config.database_path)
    try:
        from gateway.store.postgres.engine import PostgresStore
    except ImportError:
        from gateway.core.errors import ConfigError
        from gateway.extras import install_command

        raise ConfigError("store: names a PostgreSQL database but psycopg is not installed",
                          fix=install_command("postgresql")) from None
    return PostgresStore(config.store)
