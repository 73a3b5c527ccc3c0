"""Who talks to which partner: people and conversations as a teacher lists them.

Read from the two files that keep them for good -- ``memory.db`` (people and
their identities) and the session log (every conversation, message by message)
-- so the lists need no running gateway and survive the pruning of
``gateway.db``.  A direct conversation is keyed by the person
(``person:<id>:<partner>``, see :mod:`brain.memory.scopes`), so it follows a
learner across chat apps; the channel shown for it is the one of the identities
whose user ids spoke in it.  A group's key is ``channel:account:chat``.

Plain data only; ``partners people list`` and ``partners conversations list``
print it, and a web console can serve it as JSON.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from brain.memory import people
from brain.memory.scopes import Identity
from brain.memory.store import MemoryStore
from brain.session_log import ConversationActivity, SessionLog


class ConversationKind(str, Enum):
    DIRECT = "direct"
    GROUP = "group"


@dataclass(frozen=True)
class Person:
    """A learner (or teacher) as one teacher's partners know them, with every linked identity."""

    id: str
    teacher: str
    accounts: tuple[people.Account, ...]

    @property
    def name(self) -> str:
        """The newest display name any identity gave, else the first identity's user id."""
        named = sorted((a for a in self.accounts if a.display_name), key=lambda a: a.since)
        if named:
            return named[-1].display_name
        return self.accounts[0].identity.user if self.accounts else self.id


@dataclass(frozen=True)
class Conversation:
    key: str
    """The session-log key."""
    partner: str
    kind: ConversationKind
    messages: int
    """Messages learners sent in it."""
    last_message_at: datetime | None
    person: Person | None = None
    """Whose direct conversation it is (None for a group, or when the person was erased)."""
    channels: tuple[str, ...] = field(default=())
    """``channel:account`` the messages came through."""


@dataclass(frozen=True)
class Roster:
    people: tuple[Person, ...]
    conversations: tuple[Conversation, ...]
    """Newest message first."""

    def of(self, person: Person) -> list[Conversation]:
        return [c for c in self.conversations if c.person is not None and c.person.id == person.id]


def _people(conn: sqlite3.Connection) -> list[Person]:
    rows = conn.execute("SELECT id, teacher FROM persons ORDER BY created_at, id").fetchall()
    return [Person(person, teacher, tuple(people.accounts_of(conn, person))) for person, teacher in rows]


async def read_people(store: MemoryStore) -> list[Person]:
    """Every person of every teacher, oldest first."""
    return await store.run(_people)


def _direct(activity: ConversationActivity, by_id: dict[str, Person]) -> Conversation | None:
    """A ``person:<id>:<partner>`` conversation, with the channels of the identities that spoke in it."""
    if not activity.key.startswith("person:"):
        return None
    person_id, _, partner = activity.key.removeprefix("person:").partition(":")
    person = by_id.get(person_id)
    partner = activity.partner or partner
    if person is None:
        return Conversation(activity.key, partner, ConversationKind.DIRECT, activity.messages, activity.last_message_at)
    spoke = [a.identity for a in person.accounts if a.identity.user in activity.users] or [a.identity for a in person.accounts]
    channels = tuple(dict.fromkeys(f"{i.channel}:{i.account}" for i in spoke))
    return Conversation(activity.key, partner, ConversationKind.DIRECT, activity.messages, activity.last_message_at,
                        person, channels)


def _group(activity: ConversationActivity) -> Conversation:
    channel, _, rest = activity.key.partition(":")
    account = rest.partition(":")[0]
    return Conversation(activity.key, activity.partner, ConversationKind.GROUP, activity.messages,
                        activity.last_message_at, None, (f"{channel}:{account}",))


async def read_roster(store: MemoryStore, log_: SessionLog) -> Roster:
    """Everyone and every conversation the data dir knows, newest conversation first."""
    persons = await read_people(store)
    by_id = {p.id: p for p in persons}
    conversations = [_direct(a, by_id) or _group(a) for a in await log_.activity()]
    conversations.sort(key=lambda c: c.last_message_at.timestamp() if c.last_message_at else 0.0, reverse=True)
    return Roster(tuple(persons), tuple(conversations))


def matching(persons: Sequence[Person], text: str, teacher: str | None = None) -> list[Person]:
    """People ``text`` names: an identity (``telegram:default:123``), a platform user id, or a display name.

    An exact identity wins; otherwise every person with an identity whose user id is
    ``text``, or whose display name is ``text`` ignoring case.  Several matches are
    the caller's to report (two learners called Ann), never guessed between.
    """
    candidates = [p for p in persons if teacher is None or p.teacher == teacher]
    try:
        identity: Identity | None = Identity.parse(text)
    except ValueError:
        identity = None
    if identity is not None:
        exact = [p for p in candidates if any(a.identity == identity for a in p.accounts)]
        if exact:
            return exact
    wanted = text.strip().casefold()
    return [p for p in candidates
            if any(a.identity.user == text.strip() or (a.display_name and a.display_name.casefold() == wanted) for a in p.accounts)]

