"""What a part of the PostgreSQL store needs of the store: a connection from its pool, in a transaction.

The parts (core, console rows, transcripts, activity sums, accounts, API tokens) are mixed into
:class:`gateway.store.postgres.engine.PostgresStore` like the SQLite parts are into ``SqliteStore``.
A part subclasses :class:`OnPool` and calls ``await self._tx(op)``: ``op`` gets an
``psycopg.AsyncConnection`` inside a transaction that commits when ``op`` returns (and rolls back
when it raises); the store's own ``_tx`` is the one that runs, and it records write failures in
``self.health`` the way the SQLite store does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from psycopg import AsyncConnection

T = TypeVar("T")


class OnPool(Protocol):
    """A part of the PostgreSQL store: it runs its statements on a pooled connection, in one transaction."""

    async def _tx(self, op: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run ``op`` on a pooled connection in a transaction and return what it returns."""
        ...
