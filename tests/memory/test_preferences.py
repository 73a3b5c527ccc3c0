"""The preference gate: idempotent, replace by topic, bounded; and the scope rules it writes under."""

from __future__ import annotations

from brain.memory import preferences
from brain.memory.preferences import MAX_PREFERENCES, gate
from brain.memory.scopes import (
    Identity,
    Scope,
    ScopeKind,
    readable_scopes,
    teacher_of,
    writable_scope,
)
from brain.memory.store import MemoryStore
from brain.memory.trace import Provenance
from gateway.core.config import OwnerRef, PartnerConfig
from gateway.core.turns import Role

SCOPE = Scope(ScopeKind.LEARNER, "console:teacher", "p1")
HERE = Provenance(partner="tutor", conversation="webchat:default:dm", event_id="e1", speaker="p1")


def test_a_duplicate_reports_the_existing_entry_and_writes_nothing(tmp_path):
    store = MemoryStore(tmp_path / "memory.db")
    first = store.run_sync(lambda c: gate(c, SCOPE, "Short answers, please", "length", HERE, 1.0))
    again = store.run_sync(lambda c: gate(c, SCOPE, "short  answers, PLEASE", None, HERE, 2.0))
    assert first.created and first.existing is None
    assert not again.created and again.existing.text == "Short answers, please" and again.existing.at == 1.0
    assert [p.text for p in store.run_sync(lambda c: preferences.preferences(c, SCOPE))] == ["Short answers, please"]


def test_a_topic_replaces_and_the_list_is_bounded(tmp_path):
    store = MemoryStore(tmp_path / "memory.db")
    store.run_sync(lambda c: gate(c, SCOPE, "explain in English", "language", HERE, 1.0))
    replaced = store.run_sync(lambda c: gate(c, SCOPE, "explain in Spanish", "language", HERE, 2.0))
    assert replaced.created and replaced.replaced.text == "explain in English"
    held = store.run_sync(lambda c: preferences.preferences(c, SCOPE))
    assert [(p.topic, p.text) for p in held] == [("language", "explain in Spanish")]
    for i in range(MAX_PREFERENCES - 1):
        assert store.run_sync(lambda c, text=f"preference {i}": gate(c, SCOPE, text, None, HERE, 3.0)).created
    refused = store.run_sync(lambda c: gate(c, SCOPE, "one too many", None, HERE, 4.0))
    assert not refused.created and "30 preferences" in refused.refused
    other = Scope(ScopeKind.LEARNER, "console:teacher", "p2")
    assert store.run_sync(lambda c: gate(c, other, "explain in Spanish", "language", HERE, 5.0)).created  # per scope


def test_scopes_come_from_the_turn_alone(tmp_path):
    from tests.brain.test_tools_builtin import make_turn

    owned = PartnerConfig(id="maths", name="Maths", owners=(OwnerRef(channel="telegram", user="42"),))
    assert teacher_of(owned) == "telegram:42" and teacher_of(PartnerConfig(id="solo", name="Solo")) == "partner:solo"
    direct = make_turn("ann")
    assert readable_scopes(direct, "p1") == (Scope(ScopeKind.LEARNER, "partner:tutor", "p1"),
                                             Scope(ScopeKind.PARTNER_NOTES, "partner:tutor", "tutor"))
    group = make_turn("ann", group="g1")
    assert readable_scopes(group, "p1") == (Scope(ScopeKind.GROUP, "partner:tutor", "telegram:default:g1"),
                                            Scope(ScopeKind.PARTNER_NOTES, "partner:tutor", "tutor"))
    direct.role = Role.OWNER
    assert writable_scope(direct, "p1") == Scope(ScopeKind.OWNER, "partner:tutor", "")
    assert Identity.parse("matrix:main:@ann:example.org") == Identity("matrix", "main", "@ann:example.org")
