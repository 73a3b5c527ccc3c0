"""The memory controls as a teacher reaches them from outside a turn: each rewrite waits for the learner's turn.

A turn holds its person's lock (``brain.loop.Brain.locks``, key
:func:`~brain.memory.scopes.person_lock_key`) from its first log write to its
last.  A teacher's delete or edit of that learner that ran meanwhile would be
undone by the turn: its next write recreates the history just deleted, its
memory write lands in the scope just emptied.  :class:`GuardedControls` takes
the same lock (the same :class:`~brain.locks.KeyedLocks` instance: the
composition root, ``brain.factory``, hands both the one it builds) around every
operation that rewrites a learner, so it runs between that learner's turns.

The wait is bounded by :data:`TURN_WAIT_S`; a turn still running then is
stuck on its model, and the caller gets :class:`TurnRunning` (the admin API's
409) rather than a request that hangs.  Reads never wait: an export shows what
is kept at that moment.  Only learner scopes are guarded: a group's turns lock
each thread's conversation, the teacher's notes and the owner's scope are
not rewritten by learners' turns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from brain.locks import KeyedLocks
from brain.memory.consolidate import Document
from brain.memory.controls import Linked, MemoryControls
from brain.memory.people import Account
from brain.memory.roster import Person, read_people
from brain.memory.scopes import Identity, Scope, ScopeKind, person_lock_key
from gateway.core.errors import GatewayError

log = logging.getLogger(__name__)

TURN_WAIT_S = 120.0
"""How long a rewrite waits for the learner's running turn: a whole model call's default deadline
(``ModelSettings.timeout_s``).  Most turns end within seconds; one still running after this is stuck."""


class TurnRunning(GatewayError):
    """A learner's turn did not end within the wait; nothing was changed."""

    def __init__(self, persons: tuple[str, ...], waited_s: float) -> None:
        self.persons, self.waited_s = persons, waited_s
        super().__init__(f"a turn is running for this learner (waited {waited_s:g} s for it to end); "
                         "nothing was changed, try again in a moment")


class GuardedControls:
    """:class:`~brain.memory.controls.MemoryControls` for callers outside a turn: the admin API and the CLI."""

    def __init__(self, controls: MemoryControls, locks: KeyedLocks, *, wait_s: float = TURN_WAIT_S) -> None:
        self.controls = controls
        self.locks = locks
        """The turns' own locks, never a copy: a copy would guard nothing."""
        self.wait_s = wait_s

    @asynccontextmanager
    async def _between_turns(self, *persons: str) -> AsyncIterator[None]:
        """Hold the turn locks of ``persons``, in sorted order so two callers never wait on each other crosswise."""
        keys = sorted({person_lock_key(p) for p in persons})
        if busy := [k for k in keys if self.locks.held(k)]:
            log.info("waiting for a running turn lock=%s", ",".join(busy))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        async with AsyncExitStack() as held:
            for key in keys:
                try:
                    await held.enter_async_context(self.locks.hold(key, timeout=max(0.0, deadline - loop.time())))
                except TimeoutError:
                    log.warning("gave up waiting for a running turn lock=%s waited_s=%g", key, self.wait_s)
                    raise TurnRunning(tuple(sorted(set(persons))), self.wait_s) from None
            yield

    def _persons_of(self, scope: Scope) -> tuple[str, ...]:
        return (scope.key,) if scope.kind is ScopeKind.LEARNER else ()

    # ------------------------------------------------------------------ reads: never wait

    async def person(self, teacher: str, identity: Identity) -> str | None:
        return await self.controls.person(teacher, identity)

    async def people(self) -> list[Person]:
        """Every person of every teacher, oldest first (``brain.memory.roster``)."""
        return await read_people(self.controls.store)

    async def accounts(self, person: str) -> list[Account]:
        return await self.controls.accounts(person)

    async def export(self, scope: Scope) -> dict[str, Any]:
        return await self.controls.export(scope)

    async def markdown(self, scope: Scope, *, history: bool = True) -> str:
        return await self.controls.markdown(scope, history=history)

    # ------------------------------------------------------------------ rewrites: between the learner's turns

    async def delete(self, scope: Scope, *, history: bool = True) -> dict[str, int]:
        async with self._between_turns(*self._persons_of(scope)):
            return await self.controls.delete(scope, history=history)

    async def edit(self, scope: Scope, markdown: str) -> Document:
        async with self._between_turns(*self._persons_of(scope)):
            return await self.controls.edit(scope, markdown)

    async def forget(self, person: str) -> dict[str, int]:
        async with self._between_turns(person):
            return await self.controls.forget(person)

    async def link(self, teacher: str, keep: Identity, other: Identity) -> Linked:
        found = [await self.controls.person(teacher, identity) for identity in (keep, other)]
        async with self._between_turns(*(p for p in found if p is not None)):
            return await self.controls.link(teacher, keep, other)

    async def unlink(self, teacher: str, identity: Identity) -> tuple[str, str] | None:
        person = await self.controls.person(teacher, identity)
        async with self._between_turns(*((person,) if person is not None else ())):
            return await self.controls.unlink(teacher, identity)
