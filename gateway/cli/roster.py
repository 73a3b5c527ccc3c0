"""``partners people list`` and ``partners conversations list``: who talks to which partner.

Registers itself on the ``partners`` group (:mod:`gateway.cli.group`) when :mod:`gateway.cli` imports it; like
it, this module imports only click until a command runs.  Both read
``memory.db`` and the session log in the config's data dir
(:mod:`brain.memory.roster`), so they work beside a running gateway or
without one, and need none of the config's secrets.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING

import click

from gateway.cli.group import cli, config_of, format_table
from gateway.cli.memory import _account_label, _partner, people

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.memory.roster import Conversation, Person, Roster
    from gateway.core.config import Config

NOBODY = "No one has talked to a partner yet."


def _roster(config: Config) -> Roster | None:
    """The data dir's people and conversations; None before anyone wrote (no file is created)."""
    from brain.memory import MEMORY_FILE
    from brain.memory.roster import read_roster
    from brain.memory.store import MemoryStore
    from brain.session_log import SessionLog

    memory, log_path = config.data_dir / MEMORY_FILE, config.data_dir / "brain.db"
    if not memory.exists() and not log_path.exists():
        return None
    store, log = MemoryStore(memory), SessionLog(log_path)
    try:
        return asyncio.run(read_roster(store, log))
    finally:
        store.close()
        log.close()


def _when(at: datetime | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at.timestamp())) if at else "-"


def _with(conversation: Conversation) -> str:
    if conversation.person is None:
        return conversation.key if conversation.kind.value == "group" else "(erased)"
    return conversation.person.name


def _teacher_filter(config: Config, partner_id: str | None) -> tuple[str | None, str | None]:
    """``(partner, teacher)`` to keep, or ``(None, None)`` for everyone."""
    if partner_id is None:
        return None, None
    from brain.memory.scopes import teacher_of

    return partner_id, teacher_of(_partner(config, partner_id))


@people.command("list")
@click.option("--partner", "partner_id", help="Only this partner's teacher scope and conversations.")
@click.pass_context
def people_list(ctx: click.Context, partner_id: str | None) -> None:
    """Everyone who talked to a partner: their linked identities, and per partner their messages."""
    config = config_of(ctx, resolve_secrets=False)
    partner, teacher = _teacher_filter(config, partner_id)
    roster = _roster(config)
    persons: list[Person] = [p for p in roster.people if teacher is None or p.teacher == teacher] if roster else []
    if not persons:
        click.echo(NOBODY)
        return
    rows: list[tuple[str, ...]] = []
    for person in persons:
        identities = ", ".join(_account_label(a) for a in person.accounts) or "-"
        talks = [c for c in roster.of(person) if partner is None or c.partner == partner] if roster else []
        for index, talk in enumerate(talks or [None]):
            first = index == 0
            rows.append((
                person.name if first else "", identities if first else "",
                talk.partner if talk else "-", ", ".join(talk.channels) if talk else "-",
                str(talk.messages) if talk else "0", _when(talk.last_message_at) if talk else "-",
            ))
    click.echo(format_table(("PERSON", "IDENTITIES", "PARTNER", "CHANNEL", "MESSAGES", "LAST MESSAGE"), rows))


@cli.group()
def conversations() -> None:
    """The conversations partners had: direct chats (one per learner and partner) and groups."""


@conversations.command("list")
@click.option("--partner", "partner_id", help="Only this partner's conversations.")
@click.pass_context
def conversations_list(ctx: click.Context, partner_id: str | None) -> None:
    """Every conversation, newest message first: partner, kind, who, channel, messages, last message."""
    config = config_of(ctx, resolve_secrets=False)
    partner, _teacher = _teacher_filter(config, partner_id)
    roster = _roster(config)
    talks = [c for c in roster.conversations if partner is None or c.partner == partner] if roster else []
    if not talks:
        click.echo("No conversations yet.")
        return
    rows = [(c.partner or "-", c.kind.value, _with(c), ", ".join(c.channels) or "-", str(c.messages), _when(c.last_message_at))
            for c in talks]
    click.echo(format_table(("PARTNER", "KIND", "WITH", "CHANNEL", "MESSAGES", "LAST MESSAGE"), rows))
