"""Lease rows: one owner at a time for an account, a conversation or a person, by the database's clock.

A lease is a row ``(resource, holder, epoch, expires_at, renewed_at)``.  Taking and renewing are
each one statement, so two nodes racing for a free resource cannot both win, and the time is the
database's (``clock_timestamp()``), so a node whose clock is off cannot take a lease early.  The
epoch goes up whenever the holder changes: work done under a lease carries its epoch, and a write
that must only land while that holder still holds it checks the epoch (:meth:`PgLeases.holds`).

Why rows and not session advisory locks, and the numbers: ADR 0051.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS leases (
        resource TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        renewed_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS leases_holder ON leases (holder)",
)
"""The lease table; a migration of the PostgreSQL store creates it."""

_NOW = "extract(epoch from clock_timestamp())"


@dataclass(frozen=True)
class Lease:
    resource: str
    holder: str
    """The node holding it (:func:`gateway.fleet.node.node_id`)."""
    epoch: int
    """Goes up by one each time the resource changes hands."""
    expires_at: float
    """Database time (seconds since the epoch) after which any node may take it."""
    renewed_at: float


@dataclass(frozen=True)
class Grant:
    """A lease this node now holds, and until when it may act on it."""

    resource: str
    epoch: int
    expires_at: float


class Leases(Protocol):
    """What a node does with leases; one implementation per store engine."""

    holder: str

    async def take(self, resource: str) -> Grant | None:
        """Hold ``resource`` (new, expired, or already ours: renewed); None while another node holds it."""
        ...

    async def renew(self, resources: Sequence[str]) -> list[Grant]:
        """Extend every lease of ``resources`` this node still holds, in one statement; the ones it kept."""
        ...

    async def release(self, resources: Sequence[str]) -> None:
        """Give them up now (a clean stop), so another node need not wait for the expiry."""
        ...

    async def holds(self, resource: str, epoch: int) -> bool:
        """Whether this node still holds ``resource`` under ``epoch`` and it has not expired."""
        ...

    async def all(self) -> list[Lease]:
        """Every lease row, for ``/status``'s view of the fleet."""
        ...


class PgLeases:
    """Leases in PostgreSQL: the fleet's engine."""

    def __init__(self, pool: AsyncConnectionPool, holder: str, *, lease_s: float) -> None:
        self.pool = pool
        self.holder = holder
        self.lease_s = lease_s

    async def take(self, resource: str) -> Grant | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"""INSERT INTO leases (resource, holder, epoch, expires_at, renewed_at)
                    VALUES (%(r)s, %(h)s, 1, {_NOW} + %(s)s, {_NOW})
                    ON CONFLICT (resource) DO UPDATE
                    SET epoch = leases.epoch + CASE WHEN leases.holder = excluded.holder THEN 0 ELSE 1 END,
                        holder = excluded.holder, expires_at = excluded.expires_at, renewed_at = excluded.renewed_at
                    WHERE leases.holder = excluded.holder OR leases.expires_at < {_NOW}
                    RETURNING epoch, expires_at""",
                {"r": resource, "h": self.holder, "s": self.lease_s},
            )
            row = await cur.fetchone()
        return None if row is None else Grant(resource, int(row[0]), float(row[1]))

    async def renew(self, resources: Sequence[str]) -> list[Grant]:
        if not resources:
            return []
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"""UPDATE leases SET expires_at = {_NOW} + %(s)s, renewed_at = {_NOW}
                    WHERE holder = %(h)s AND resource = ANY(%(rs)s) AND expires_at >= {_NOW}
                    RETURNING resource, epoch, expires_at""",
                {"s": self.lease_s, "h": self.holder, "rs": list(resources)},
            )
            rows = await cur.fetchall()
        return [Grant(str(r[0]), int(r[1]), float(r[2])) for r in rows]

    async def release(self, resources: Sequence[str]) -> None:
        if not resources:
            return
        async with self.pool.connection() as conn:
            await conn.execute(
                f"UPDATE leases SET expires_at = {_NOW} - 1 WHERE holder = %(h)s AND resource = ANY(%(rs)s)",
                {"h": self.holder, "rs": list(resources)},
            )

    async def holds(self, resource: str, epoch: int) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT 1 FROM leases WHERE resource = %s AND holder = %s AND epoch = %s AND expires_at >= {_NOW}",
                (resource, self.holder, epoch),
            )
            return await cur.fetchone() is not None

    async def all(self) -> list[Lease]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT resource, holder, epoch, expires_at, renewed_at FROM leases ORDER BY resource")
            rows = await cur.fetchall()
        return [Lease(str(r[0]), str(r[1]), int(r[2]), float(r[3]), float(r[4])) for r in rows]


class LocalLeases:
    """One process on SQLite: it holds every lease, always -- the same code path, nothing to share."""

    def __init__(self, holder: str = "local") -> None:
        self.holder = holder
        self._held: dict[str, Grant] = {}

    async def take(self, resource: str) -> Grant | None:
        grant = self._held.setdefault(resource, Grant(resource, 1, float("inf")))
        return grant

    async def renew(self, resources: Sequence[str]) -> list[Grant]:
        return [self._held[r] for r in resources if r in self._held]

    async def release(self, resources: Sequence[str]) -> None:
        for resource in resources:
            self._held.pop(resource, None)

    async def holds(self, resource: str, epoch: int) -> bool:
        grant = self._held.get(resource)
        return grant is not None and grant.epoch == epoch

    async def all(self) -> list[Lease]:
        return [Lease(g.resource, self.holder, g.epoch, g.expires_at, 0.0) for g in self._held.values()]
