"""Lease rows on a real PostgreSQL: one holder at a time, by the database's clock, handed on only after expiry."""

from __future__ import annotations

import asyncio

import pytest

from gateway.fleet.leases import DDL, LocalLeases, PgLeases
from tests.pg import fresh_database


@pytest.fixture
async def pool():
    from psycopg_pool import AsyncConnectionPool

    async with fresh_database() as dsn:
        pool = AsyncConnectionPool(dsn, min_size=1, max_size=8, open=False, kwargs={"autocommit": True})
        await pool.open(wait=True, timeout=30)
        async with pool.connection() as conn:
            for statement in DDL:
                await conn.execute(statement)
        yield pool
        await pool.close()


async def test_a_free_resource_goes_to_exactly_one_of_many_racing_nodes(pool):
    nodes = [PgLeases(pool, f"node-{i}", lease_s=10) for i in range(8)]
    grants = await asyncio.gather(*(n.take("account:telegram:main") for n in nodes))
    winners = [n.holder for n, g in zip(nodes, grants, strict=True) if g is not None]
    assert len(winners) == 1
    rows = await nodes[0].all()
    assert [(r.resource, r.holder, r.epoch) for r in rows] == [("account:telegram:main", winners[0], 1)]


async def test_the_holder_renews_and_others_are_refused_until_it_expires(pool):
    a, b = PgLeases(pool, "a", lease_s=1.5), PgLeases(pool, "b", lease_s=1.5)
    first = await a.take("r")
    assert first is not None and first.epoch == 1
    assert await b.take("r") is None
    again = await a.take("r")  # taking what you hold renews it, same epoch
    assert again is not None and again.epoch == 1 and again.expires_at >= first.expires_at
    assert [g.resource for g in await a.renew(["r", "not-held"])] == ["r"]
    assert await b.renew(["r"]) == []
    deadline = asyncio.get_running_loop().time() + 30
    while (taken := await b.take("r")) is None:
        assert asyncio.get_running_loop().time() < deadline, "the lease never expired"
        await asyncio.sleep(0.2)
    assert taken.epoch == 2, "a change of holder raises the epoch"
    assert await a.holds("r", 1) is False
    assert await b.holds("r", 2) is True
    assert await a.renew(["r"]) == [], "the old holder cannot renew what passed on"


async def test_a_released_lease_is_free_at_once(pool):
    a, b = PgLeases(pool, "a", lease_s=60), PgLeases(pool, "b", lease_s=60)
    assert await a.take("r") is not None
    await a.release(["r"])
    grant = await b.take("r")
    assert grant is not None and grant.epoch == 2
    assert await a.holds("r", 1) is False


async def test_expiry_is_the_databases_clock_not_the_nodes(pool, monkeypatch):
    import time

    a, b = PgLeases(pool, "a", lease_s=60), PgLeases(pool, "b", lease_s=60)
    assert await a.take("r") is not None
    monkeypatch.setattr(time, "time", lambda: 10**10)  # b's clock is far ahead: no matter
    assert await b.take("r") is None


async def test_local_leases_are_always_held_by_the_one_process():
    local = LocalLeases()
    grant = await local.take("account:email:inbox")
    assert grant is not None and await local.holds("account:email:inbox", grant.epoch)
    assert [g.resource for g in await local.renew(["account:email:inbox", "other"])] == ["account:email:inbox"]
    await local.release(["account:email:inbox"])
    assert await local.holds("account:email:inbox", grant.epoch) is False
