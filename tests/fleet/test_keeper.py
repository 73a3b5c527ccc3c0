"""The lease keeper on a real PostgreSQL: one node runs a resource, a dead node's resource moves, and a node
that cannot renew stops its work before another node may start it."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.fleet.keeper import LeaseKeeper
from gateway.fleet.leases import DDL, Grant, PgLeases
from tests.pg import fresh_database

LEASE_S = 2.0
BOUND_S = 60.0
"""Only bounds a hang."""


@pytest.fixture
async def dsn():
    async with fresh_database() as dsn:
        yield dsn


async def _pool(dsn: str):
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(dsn, min_size=1, max_size=4, open=False, kwargs={"autocommit": True},
                               timeout=5)
    await pool.open(wait=True, timeout=30)
    async with pool.connection() as conn:
        for statement in DDL:
            await conn.execute(statement)
    return pool


class Node:
    """A keeper plus a journal of when its work started and stopped."""

    def __init__(self, name: str, pool, journal: list[tuple[float, str, str, str]]) -> None:
        self.name, self.pool, self.journal = name, pool, journal
        self.keeper = LeaseKeeper(PgLeases(pool, name, lease_s=LEASE_S), lease_s=LEASE_S, renew_every_s=0.3,
                                  look_every_s=0.3, fence_margin_s=0.6, on_gained=self.gained, on_lost=self.lost)
        self.task: asyncio.Task | None = None

    async def gained(self, grant: Grant) -> None:
        self.journal.append((time.monotonic(), self.name, "start", grant.resource))

    async def lost(self, resource: str) -> None:
        self.journal.append((time.monotonic(), self.name, "stop", resource))

    def start(self, *resources: str) -> None:
        self.keeper.want(resources)
        self.task = asyncio.create_task(self.keeper.run())

    async def kill(self) -> None:
        """As SIGKILL would: the loop stops, nothing is released or told."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def shut_down(nodes, pools) -> None:
    for node in nodes:
        if node.task is not None:
            await node.kill()
    for pool in pools:
        await pool.close()


async def until(predicate, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def running(journal, resource: str) -> dict[str, bool]:
    state: dict[str, bool] = {}
    for _, node, event, res in journal:
        if res == resource:
            state[node] = event == "start"
    return state


def never_two_at_once(journal, resource: str) -> None:
    on: set[str] = set()
    for _, node, event, res in sorted(journal):
        if res != resource:
            continue
        if event == "start":
            assert not on, f"{node} started {resource} while {on} ran it"
            on.add(node)
        else:
            on.discard(node)


async def test_each_resource_runs_on_one_node_and_a_dead_nodes_moves_within_the_lease(dsn):
    journal: list = []
    pools = [await _pool(dsn) for _ in range(3)]
    nodes = [Node(f"n{i}", p, journal) for i, p in enumerate(pools)]
    resources = [f"account:relay:{i}" for i in range(6)]
    try:
        for node in nodes:
            node.start(*resources)
        await until(lambda: all(any(running(journal, r).values()) for r in resources), "not every resource started")
        victim = next(n for n in nodes if n.keeper.held())
        moved = list(victim.keeper.held())
        killed_at = time.monotonic()
        await victim.kill()
        await until(lambda: all(any(v for k, v in running(journal, r).items() if k != victim.name) for r in moved),
                    "a dead node's resources never moved")
        took = max(t for t, node, event, r in journal if event == "start" and r in moved and node != victim.name)
        assert took - killed_at < LEASE_S + 3.0, "moved later than the lease time allows"
        died = [(killed_at, victim.name, "stop", r) for r in moved]  # its work died with it
        for resource in resources:
            never_two_at_once(journal + died, resource)
    finally:
        await shut_down(nodes, pools)


async def test_a_node_that_cannot_renew_stops_its_work_before_another_starts_it(dsn):
    journal: list = []
    pool_a, pool_b = await _pool(dsn), await _pool(dsn)
    a, b = Node("a", pool_a, journal), Node("b", pool_b, journal)
    try:
        a.start("account:telegram:bot")
        await until(lambda: running(journal, "account:telegram:bot").get("a"), "a never started")
        b.start("account:telegram:bot")

        async def database_gone(_):
            raise OSError("connection refused")
        a.keeper.leases.renew = a.keeper.leases.take = database_gone  # type: ignore[method-assign]
        await until(lambda: running(journal, "account:telegram:bot").get("b"), "b never took over")
        stopped = next(t for t, node, event, _ in journal if node == "a" and event == "stop")
        started = next(t for t, node, event, _ in journal if node == "b" and event == "start")
        assert stopped < started, "the old holder must stop before the new one starts"
        never_two_at_once(journal, "account:telegram:bot")
    finally:
        await shut_down((a, b), (pool_a, pool_b))


async def test_a_clean_stop_hands_on_at_once_and_an_unwanted_resource_is_let_go(dsn):
    journal: list = []
    pool_a, pool_b = await _pool(dsn), await _pool(dsn)
    a, b = Node("a", pool_a, journal), Node("b", pool_b, journal)
    a.keeper = LeaseKeeper(PgLeases(pool_a, "a", lease_s=300), lease_s=300, renew_every_s=0.3, look_every_s=0.3,
                           fence_margin_s=0.6, on_gained=a.gained, on_lost=a.lost)
    try:
        a.start("x", "y")
        await until(lambda: running(journal, "x").get("a") and running(journal, "y").get("a"), "a never started")
        b.start("x", "y")
        a.keeper.want(["x"])
        await until(lambda: running(journal, "y").get("b"), "an unwanted resource was not let go")
        assert a.task is not None
        a.task.cancel()
        await asyncio.gather(a.task, return_exceptions=True)
        stopped_at = time.monotonic()
        await a.keeper.stop()
        await until(lambda: running(journal, "x").get("b"), "a clean stop did not hand on")
        took = next(t for t, node, event, r in journal if node == "b" and event == "start" and r == "x")
        assert took - stopped_at < 30, "waited for a 300 s lease instead of the release"
        never_two_at_once(journal, "x")
        never_two_at_once(journal, "y")
    finally:
        await shut_down((a, b), (pool_a, pool_b))


def test_lease_timings_that_cannot_fence_are_refused():
    async def noop(_):
        return None
    with pytest.raises(ValueError, match="lease timings"):
        LeaseKeeper(object(), lease_s=5, renew_every_s=6, look_every_s=1, fence_margin_s=1,  # type: ignore[arg-type]
                    on_gained=noop, on_lost=noop)
