"""What people can do *to* memory: link and unlink, forget, and the teacher's view, export, delete, edit.

Learners reach these through their commands (``brain.commands``), teachers
through ``partners memory`` and ``partners people`` -- and a web console
later through the same methods: every view here is returned as plain data
(:meth:`MemoryControls.export` is JSON-ready) or Markdown, never printed.

Forgetting a person erases, in this order (so that a crash part-way leaves
the person findable and a second ``forget`` finishes the job): their direct
conversations with every partner of the teacher (``person:<id>:*`` in the
session log); their words in group conversations (redacted in place, the
tutor's answers stay); their usage rows; then, in one ``memory.db``
transaction, their scope's facts, preferences and notes, every fact noted
while they spoke anywhere (and the group notes built on those), their
identities, codes and the person.  The files they sent are the gateway's
(its blob store, referred to from its inbox rows): the brain hands their
identities to :class:`SentFiles`, which the gateway lends, before the
identities are erased.  The rest of the gateway's store (the inbox and outbox
rows, pruned after the platform's redelivery horizon) is the pipeline's,
outside the brain's reach.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from brain.memory import consolidate, people, preferences, trace
from brain.memory.consolidate import Document
from brain.memory.erasure import erase_learner
from brain.memory.scopes import (
    Identity,
    Scope,
    ScopeKind,
    Session,
    learner_scope,
    person_history_key,
    person_history_prefix,
)
from brain.memory.store import MemoryStore
from brain.session_log import AssistantSaid, SessionLog, UserSaid
from brain.usage import UsageLedger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Linked:
    person: str
    """The person both identities now belong to."""
    merged: bool
    """False when they already were one person."""


@dataclass(frozen=True)
class _Kept:
    """One consistent read of a scope's memory."""

    document: Document | None
    cited: dict[int, trace.Fact]
    facts: list[trace.Fact]
    preferences: list[preferences.Preference]
    accounts: list[people.Account]


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


class SentFiles(Protocol):
    """The files people sent, kept by whoever received them (the gateway's blob store)."""

    async def forget(self, senders: Sequence[Identity]) -> int:
        """Erase every file these identities sent; return how many files went."""
        ...


class MemoryControls:
    def __init__(self, store: MemoryStore, log_: SessionLog, usage: UsageLedger | None = None, *,
                 files: SentFiles | None = None, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.log = log_
        self.usage = usage
        self.files = files
        """Where a forgotten person's files go with them; None where no gateway store is at hand."""
        self.clock = clock

    # ------------------------------------------------------------------ people

    async def person(self, teacher: str, identity: Identity) -> str | None:
        return await self.store.run(lambda conn: people.find_person(conn, teacher, identity))

    async def accounts(self, person: str) -> list[people.Account]:
        return await self.store.run(lambda conn: people.accounts_of(conn, person))

    async def issue_code(self, session: Session) -> str:
        return await self.store.run(lambda conn: people.issue_code(conn, session.teacher, session.person, self.clock()))

    async def code_owner(self, teacher: str, code: str) -> str | None:
        """Who issued ``code`` (still valid, this teacher), without using it up."""

        def peek(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT teacher, person, expires_at FROM link_codes WHERE code = ?", (people.normal_code(code),)).fetchone()
            return row[1] if row and row[0] == teacher and row[2] >= self.clock() else None

        return await self.store.run(peek)

    async def redeem(self, session: Session, code: str) -> Linked | None:
        """``/link CODE``: the code's person absorbs the speaker's.  None when the code is not valid here."""
        owner = await self.store.run(lambda conn: people.take_code(conn, session.teacher, code, self.clock()))
        if owner is None:
            return None
        if owner == session.person:
            return Linked(owner, merged=False)
        await self._merge(session.teacher, keep=owner, absorbed=session.person)
        return Linked(owner, merged=True)

    async def link(self, teacher: str, keep: Identity, other: Identity) -> Linked:
        """The teacher links two identities (either may be new): ``other``'s person joins ``keep``'s."""

        def resolve(conn: sqlite3.Connection) -> tuple[str, str]:
            now = self.clock()
            return people.resolve(conn, teacher, keep, "", now), people.resolve(conn, teacher, other, "", now)

        kept, absorbed = await self.store.run(resolve)
        if kept == absorbed:
            return Linked(kept, merged=False)
        await self._merge(teacher, keep=kept, absorbed=absorbed)
        return Linked(kept, merged=True)

    async def unlink(self, teacher: str, identity: Identity) -> tuple[str, str] | None:
        """``(old person, new person)``: the identity starts fresh; what was remembered stays with the old person."""
        result = await self.store.run(lambda conn: people.detach(conn, teacher, identity, self.clock()))
        if result is not None:
            log.info("identity unlinked old_person=%s new_person=%s", *result)
        return result

    async def _merge(self, teacher: str, *, keep: str, absorbed: str) -> None:
        prefix = person_history_prefix(absorbed)
        for key in await self.log.keys(prefix):
            await self.log.merge(key, person_history_key(keep, key[len(prefix):]))
        if self.usage is not None:
            await self.usage.merge(f"person:{absorbed}", f"person:{keep}")

        def move(conn: sqlite3.Connection) -> None:
            source, target = learner_scope(teacher, absorbed), learner_scope(teacher, keep)
            trace.rekey(conn, source, target)
            preferences.rekey(conn, source, target)
            consolidate.rekey(conn, source, target)
            trace.reattribute(conn, absorbed, keep)
            preferences.reattribute(conn, absorbed, keep)
            people.merge(conn, keep, absorbed)

        await self.store.run(move)
        log.info("people merged kept=%s absorbed=%s", keep, absorbed)

    # ------------------------------------------------------------------ forgetting

    async def request_forget(self, session: Session) -> None:
        await self.store.run(lambda conn: people.request_forget(conn, session.person, self.clock()))

    async def confirm_forget(self, session: Session) -> dict[str, int] | None:
        """``/forget confirm``: erase the person if they asked within the last 10 minutes, else None."""
        if not await self.store.run(lambda conn: people.take_forget_request(conn, session.person, self.clock())):
            return None
        return await self.forget(session.person)

    async def forget(self, person: str) -> dict[str, int]:
        """Erase a person and everything kept about them (see the module docstring); counts per kind."""

        def gather(conn: sqlite3.Connection) -> tuple[str | None, list[people.Account], list[str]]:
            """Who they are, and the memory texts that go with them (to scrub from shared logs)."""
            facts = trace.spoken_by(conn, person)
            docs = [consolidate.load(conn, scope) for scope in {f.scope for f in facts}]
            noted = [f.text for f in facts] + [p.text for p in preferences.spoken_by(conn, person)]
            noted += [consolidate.strip_footnotes(doc.markdown) for doc in docs if doc is not None]
            return people.teacher_of_person(conn, person), people.accounts_of(conn, person), noted

        teacher, accounts, noted = await self.store.run(gather)
        counts = {"history_events": await self.log.forget_prefix(person_history_prefix(person)), "erased_events": 0}
        for account in accounts:
            channel, user = f"{account.identity.channel}:{account.identity.account}:", account.identity.user
            shared = await self.log.conversations_with(channel, user)
            counts["erased_events"] += await self.log.rewrite(shared, partial(erase_learner, user=user, texts=noted))
        if self.usage is not None:
            counts["usage_rows"] = await self.usage.forget(f"person:{person}")
        if self.files is not None:
            counts["files"] = await self.files.forget([account.identity for account in accounts])

        def erase(conn: sqlite3.Connection) -> dict[str, int]:
            spoken, touched = trace.delete_spoken_by(conn, person)
            removed = {"facts": spoken, "preferences": preferences.delete_spoken_by(conn, person)}
            if teacher is not None:
                scope = learner_scope(teacher, person)
                touched.add(scope)
                removed["facts"] += trace.delete_scope(conn, scope)
                removed["preferences"] += preferences.delete_scope(conn, scope)
            removed["documents"] = sum(consolidate.delete(conn, s) for s in touched)
            removed["people_rows"] = people.erase(conn, person)
            return removed

        counts |= await self.store.run(erase)
        await self.store.checkpoint()
        await self.log.checkpoint()
        log.info("person forgotten person=%s %s", person, " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        return counts

    # ------------------------------------------------------------------ the teacher's view

    async def history_keys(self, scope: Scope) -> list[str]:
        """The session-log conversations that belong to a scope: a learner's direct chats, a group's (and its threads')."""
        if scope.kind is ScopeKind.LEARNER:
            return await self.log.keys(person_history_prefix(scope.key))
        if scope.kind is ScopeKind.GROUP:
            return [k for k in await self.log.keys(scope.key) if k == scope.key or k.startswith(scope.key + "/")]
        return []

    async def _read(self, scope: Scope) -> _Kept:
        def read(conn: sqlite3.Connection) -> _Kept:
            doc = consolidate.load(conn, scope)
            accounts = people.accounts_of(conn, scope.key) if scope.kind is ScopeKind.LEARNER else []
            cited = trace.by_ids(conn, doc.footnotes.values()) if doc else {}
            return _Kept(doc, cited, trace.facts(conn, scope), preferences.preferences(conn, scope), accounts)

        return await self.store.run(read)

    async def export(self, scope: Scope) -> dict[str, Any]:
        """Everything kept for a scope, JSON-ready: notes with provenance, facts, preferences, history."""
        kept = await self._read(scope)
        doc = kept.document
        history = {key: [{"seq": e.seq, **e.event.model_dump(mode="json")} for e in await self.log.read(key)]
                   for key in await self.history_keys(scope)}
        return {
            "scope": {"kind": scope.kind.value, "teacher": scope.teacher, "key": scope.key},
            "accounts": [{"identity": str(a.identity), "display_name": a.display_name, "since": _iso(a.since)} for a in kept.accounts],
            "document": None if doc is None else {
                "markdown": doc.markdown, "author": doc.author, "updated_at": _iso(doc.updated_at),
                "footnotes": {str(label): _fact_json(kept.cited.get(fact_id), fact_id) for label, fact_id in sorted(doc.footnotes.items())},
            },
            "facts": [_fact_json(f, f.id) for f in kept.facts],
            "preferences": [{"id": p.id, "text": p.text, "topic": p.topic, "at": _iso(p.at),
                             "conversation": p.provenance.conversation, "event_id": p.provenance.event_id} for p in kept.preferences],
            "history": history,
        }

    async def markdown(self, scope: Scope, *, history: bool = True) -> str:
        """What :meth:`export` holds, for reading: notes with footnotes, facts, preferences, conversations."""
        kept = await self._read(scope)
        lines = [f"# Memory ({scope.kind.value.replace('_', ' ')})"]
        if kept.accounts:
            lines += ["", "## Accounts"]
            lines += [f"- {a.identity}" + (f" ({a.display_name})" if a.display_name else "") for a in kept.accounts]
        heading = len(lines)
        if kept.document is not None:
            lines += ["", "## Notes", consolidate.render(kept.document, kept.cited)]
        if kept.facts:
            lines += ["", "## Facts noted"]
            lines += [f"- {consolidate.day(f.at)}: {f.text} (in {f.provenance.conversation}, message {f.provenance.event_id})"
                      for f in kept.facts]
        if kept.preferences:
            lines += ["", "## Preferences", *(f"- {p.text}" for p in kept.preferences)]
        for key in await self.history_keys(scope) if history else []:
            said = [e.event for e in await self.log.read(key) if isinstance(e.event, (UserSaid, AssistantSaid)) and e.event.text]
            if said:
                lines += ["", f"## Conversation {key}", *(_said(event) for event in said)]
        if len(lines) == heading:
            lines += ["", "Nothing is remembered here."]
        return "\n".join(lines)

    async def delete(self, scope: Scope, *, history: bool = True) -> dict[str, int]:
        """Delete a scope's memory (facts, preferences, notes) and, with ``history``, its conversations."""
        keys = await self.history_keys(scope) if history else []

        def erase(conn: sqlite3.Connection) -> dict[str, int]:
            return {"facts": trace.delete_scope(conn, scope), "preferences": preferences.delete_scope(conn, scope),
                    "documents": consolidate.delete(conn, scope)}

        counts = await self.store.run(erase)
        counts["history_events"] = sum([await self.log.forget(key) for key in keys])
        log.info("memory deleted scope=%s %s", scope.kind.value, " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        return counts

    async def edit(self, scope: Scope, markdown: str) -> Document:
        """Replace a scope's notes with the teacher's text; footnotes it keeps still lead to their facts."""

        def replace(conn: sqlite3.Connection) -> Document:
            old = consolidate.load(conn, scope)
            body, footnotes = consolidate.keep_known(markdown, old.footnotes if old else {})
            doc = Document(scope, body, footnotes, old.covered if old else frozenset(), "teacher", self.clock())
            consolidate.save(conn, doc)
            return doc

        return await self.store.run(replace)


def _fact_json(fact: trace.Fact | None, fact_id: int) -> dict[str, Any]:
    if fact is None:
        return {"id": fact_id, "deleted": True}
    p = fact.provenance
    return {"id": fact.id, "text": fact.text, "topic": fact.topic, "at": _iso(fact.at), "partner": p.partner,
            "conversation": p.conversation, "event_id": p.event_id}


def _said(event: UserSaid | AssistantSaid) -> str:
    who = "Tutor" if isinstance(event, AssistantSaid) else (event.sender or "Learner")
    return f"- {event.at:%Y-%m-%d %H:%M} {who}: {event.text}"
