"""Whose memory a turn may read and write: computed here, and nowhere else.

Four kinds of scope, each keyed by the *teacher* it belongs to:

=================  ==========================  =====================================
kind               key                         what it holds
=================  ==========================  =====================================
``learner``        the person's id             one learner, with this teacher's partners
``group``          ``channel:account:chat``    one group chat (its threads share it)
``partner_notes``  the partner's id            the teacher's notes for one partner
``owner``          ``""``                      the teacher's own (their chats with a partner)
=================  ==========================  =====================================

The *teacher* of a partner is its first owner, ``channel:user``, so every
partner one teacher runs shares what it knows about a learner; a partner
without owners is its own teacher (``partner:<id>``).  Changing a partner's
first owner moves it into another teacher scope: what it knew stays behind.

The rules (issue 4): a direct turn reads the speaker's scope (``learner``, or
``owner`` when the teacher speaks) and the partner notes, and writes the
speaker's scope.  A group turn reads the group's scope and the partner notes,
and writes the group's.  It does **not** read the speaker's private scope,
although the issue allows it: everything a group turn reads can surface in a
public answer, and a group's history is shared by every member -- a tool
result holding Ann's private notes would sit in the requests built later for
Bob.  Partner notes are never writable by the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, ConversationKind
from gateway.core.turns import Role, Turn


class ScopeKind(str, Enum):
    LEARNER = "learner"
    GROUP = "group"
    PARTNER_NOTES = "partner_notes"
    OWNER = "owner"


@dataclass(frozen=True)
class Scope:
    kind: ScopeKind
    teacher: str
    key: str

    @property
    def columns(self) -> tuple[str, str, str]:
        """The scope as it is stored: ``(scope_kind, teacher, scope_key)``."""
        return (self.kind.value, self.teacher, self.key)

    @classmethod
    def from_columns(cls, kind: str, teacher: str, key: str) -> Scope:
        return cls(ScopeKind(kind), teacher, key)

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.teacher}:{self.key}"


@dataclass(frozen=True)
class Identity:
    """One account of a person on one channel account: ``channel:account:user``."""

    channel: str
    account: str
    user: str

    def __str__(self) -> str:
        return f"{self.channel}:{self.account}:{self.user}"

    @classmethod
    def parse(cls, text: str) -> Identity:
        """``webchat:default:ann``; the user part may hold colons (Matrix ids do)."""
        channel, _, rest = text.strip().partition(":")
        account, _, user = rest.partition(":")
        if not (channel and account and user):
            raise ValueError(f"{text!r} is not CHANNEL:ACCOUNT:USER (e.g. telegram:default:12345)")
        return cls(channel, account, user)


def teacher_of(partner: PartnerConfig) -> str:
    if partner.owners:
        owner = partner.owners[0]
        return f"{owner.channel}:{owner.user}"
    return f"partner:{partner.id}"


def identity_of(turn: Turn) -> Identity:
    return Identity(turn.address.channel, turn.address.account, turn.sender.user)


def group_key(address: Address) -> str:
    return f"{address.channel}:{address.account}:{address.conversation.chat}"


def learner_scope(teacher: str, person: str) -> Scope:
    return Scope(ScopeKind.LEARNER, teacher, person)


def notes_scope(partner: PartnerConfig) -> Scope:
    return Scope(ScopeKind.PARTNER_NOTES, teacher_of(partner), partner.id)


def person_history_key(person: str, partner_id: str) -> str:
    """The session-log key of a person's direct conversation with one partner, on any channel."""
    return f"{person_history_prefix(person)}{partner_id}"


def person_history_prefix(person: str) -> str:
    return f"person:{person}:"


def person_lock_key(person: str) -> str:
    """The lock a person's direct turns hold (:attr:`Session.lock_key`); a teacher's edit of them takes it too."""
    return f"person:{person}"


def _group(turn: Turn) -> bool:
    return turn.address.conversation.kind is ConversationKind.GROUP


def writable_scope(turn: Turn, person: str) -> Scope:
    teacher = teacher_of(turn.partner)
    if _group(turn):
        return Scope(ScopeKind.GROUP, teacher, group_key(turn.address))
    if turn.role is Role.OWNER:
        return Scope(ScopeKind.OWNER, teacher, "")
    return learner_scope(teacher, person)


def readable_scopes(turn: Turn, person: str) -> tuple[Scope, ...]:
    """The writable scope first, then the partner notes; nothing else, ever."""
    return (writable_scope(turn, person), notes_scope(turn.partner))


def history_key(turn: Turn, person: str) -> str:
    """Direct conversations follow the person across channels; a group keeps its conversation key."""
    if _group(turn):
        return turn.address.conversation_key
    return person_history_key(person, turn.partner.id)


@dataclass(frozen=True)
class Session:
    """Where one turn's history and memory live, computed once when the turn starts."""

    teacher: str
    person: str
    """The speaker's person id (in a group too: the person speaking)."""
    history_key: str
    lock_key: str
    """Turns holding the same lock key run one at a time: a person's direct turns, or one group's."""
    usage_key: str
    """Whose daily token budget the turn spends: the person, whichever channel they write from."""
    readable: tuple[Scope, ...]
    writable: Scope


def session_of(turn: Turn, person: str) -> Session:
    key = history_key(turn, person)
    return Session(
        teacher=teacher_of(turn.partner),
        person=person,
        history_key=key,
        lock_key=key if _group(turn) else person_lock_key(person),
        usage_key=f"person:{person}",
        readable=readable_scopes(turn, person),
        writable=writable_scope(turn, person),
    )
