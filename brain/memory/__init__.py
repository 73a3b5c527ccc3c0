"""Memory: what partners remember about people, scoped by construction.

=================  ==========================================================
``store``          ``memory.db``: one connection, one lock, the schema
``scopes``         THE place scopes, history keys and sessions are computed
``people``         persons, identities on channels, link codes
``trace``          append-only facts with provenance
``preferences``    the idempotent preference gate
``consolidate``    model-written Markdown per scope, footnoted to the trace
``service``        ``MemoryService``: what a turn reads and writes
``controls``       ``MemoryControls``: link, forget, and the teacher's view
``erasure``        how a forgotten learner leaves the logs they shared
=================  ==========================================================

Isolation is structural: nothing outside ``scopes`` chooses a scope, and
everything a turn touches is computed from the turn (its partner, channel,
account, sender and conversation), never from what the model wrote.
"""

from __future__ import annotations

from pathlib import Path

from brain.memory import people
from brain.memory.scopes import Identity, person_history_key, teacher_of
from brain.memory.store import MemoryStore
from gateway.core.config import PartnerConfig

MEMORY_FILE = "memory.db"


def direct_history_key(data_dir: Path, partner: PartnerConfig, identity: Identity) -> str | None:
    """The session-log key of ``identity``'s direct conversation with ``partner``, read from
    ``<data_dir>/memory.db`` (None before their first message) -- for tools and tests that read the log."""
    store = MemoryStore(Path(data_dir) / MEMORY_FILE)
    try:
        person = store.run_sync(lambda conn: people.find_person(conn, teacher_of(partner), identity))
    finally:
        store.close()
    return None if person is None else person_history_key(person, partner.id)
