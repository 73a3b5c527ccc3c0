"""Consolidation: model-written notes whose footnotes lead back to the trace, one run at a time per scope."""

from __future__ import annotations

import asyncio
import sqlite3

from brain.memory import consolidate, trace
from brain.memory.consolidate import Document, keep_known, strip_footnotes
from brain.memory.scopes import Scope, ScopeKind
from brain.tools.services import MemoryEntry
from tests.peers.model_stub import Reply

FACTS = ("Ann prepares for the chemistry exam", "Ann likes chess", "Ann finds moles confusing")


async def note(rig, user: str, *facts: str) -> list:
    """Write facts as the model would, each from its own message; the event ids they were noted at."""
    events = []
    for text in facts:
        turn = rig.turn(user, "...")
        await rig.memory.write(turn, MemoryEntry(text))
        events.append(turn.messages[-1].event_id)
    return events


async def test_footnotes_round_trip_to_the_trace_and_the_messages(rig):
    events = await note(rig, "ann", *FACTS)
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    rig.stub.script(Reply.text(
        "## Goals\n- Preparing for chemistry[^1]\n\n## Struggles\n- Moles[^3], and she likes chess[^2][^9].\n\n"
        "[^1]: a definition the model should not write"
    ))
    doc = await rig.consolidator.consolidate(scope, rig.partner.model)

    prompt = rig.stub.requests[-1]["messages"][1]["content"]
    assert "[1] " in prompt and f": {FACTS[0]}" in prompt and "[3] " in prompt
    assert doc.markdown == "## Goals\n- Preparing for chemistry[^1]\n\n## Struggles\n- Moles[^2], and she likes chess[^3]."
    facts = await rig.memory.store.run(lambda conn: trace.facts(conn, scope))
    by_text = {f.text: f for f in facts}
    assert doc.footnotes == {1: by_text[FACTS[0]].id, 2: by_text[FACTS[2]].id, 3: by_text[FACTS[1]].id}
    assert doc.covered == {f.id for f in facts}

    exported = await rig.controls.export(scope)  # the teacher's JSON: footnote -> fact -> message
    footnotes = exported["document"]["footnotes"]
    assert [footnotes[label]["event_id"] for label in ("1", "2", "3")] == [events[0], events[2], events[1]]
    assert all(f["conversation"] == "webchat:default:dm-ann" for f in footnotes.values())
    shown = await rig.controls.markdown(scope)
    assert f"[^2]: fact {by_text[FACTS[2]].id}, noted " in shown and f"(message {events[2]}): {FACTS[2]}" in shown

    # The system prompt gets the notes without footnotes, and only facts noted since.
    [block] = await rig.memory.context_blocks(rig.turn("ann", "-"))
    assert "Preparing for chemistry" in block and "[^" not in block and "Noted since" not in block
    await note(rig, "ann", "Ann's exam moved to Monday")
    [block] = await rig.memory.context_blocks(rig.turn("ann", "-"))
    assert block.endswith("Noted since:\n- Ann's exam moved to Monday")


async def test_the_next_consolidation_reads_the_previous_notes_renumbered(rig):
    await note(rig, "ann", *FACTS)
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    rig.stub.script(Reply.text("Chess player[^2]."))
    await rig.consolidator.consolidate(scope, rig.partner.model)
    assert await rig.consolidator.consolidate(scope, rig.partner.model) is not None and len(rig.stub.requests) == 1  # nothing new
    await note(rig, "ann", "Ann switched to the morning group")
    rig.stub.script(Reply.text("Chess player[^2]; mornings[^4]."))
    doc = await rig.consolidator.consolidate(scope, rig.partner.model)
    prompt = rig.stub.requests[-1]["messages"][1]["content"]
    assert "Previous notes:\nChess player[^2]." in prompt and "[4] " in prompt
    assert doc.markdown == "Chess player[^1]; mornings[^2]." and len(doc.footnotes) == 2


async def test_enough_new_facts_start_one_background_consolidation(rig):
    rig.consolidator.threshold = 3
    rig.stub.script(Reply.text("Notes[^1].", delay=0.2))
    await note(rig, "ann", *FACTS[:2])
    assert rig.stub.requests == []
    await note(rig, "ann", FACTS[2])  # the third uncovered fact
    await rig.consolidator.idle()
    assert len(rig.stub.requests) == 1
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    assert (await rig.memory.store.run(lambda conn: consolidate.load(conn, scope))).markdown == "Notes[^1]."


async def test_concurrent_triggers_make_one_model_call(rig):
    await note(rig, "ann", *FACTS)
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    rig.stub.script(Reply.text("Once[^1].", delay=0.3), Reply.text("Twice[^1]."))
    rig.consolidator.threshold = 1
    background = rig.consolidator.maybe_start(scope, rig.partner.model, 3)
    results = await asyncio.gather(*(rig.consolidator.consolidate(scope, rig.partner.model) for _ in range(4)))
    assert background is not None and await background == results[0]
    assert len(rig.stub.requests) == 1 and {doc.markdown for doc in results} == {"Once[^1]."}


async def test_notes_about_facts_deleted_meanwhile_are_dropped(rig):
    await note(rig, "ann", *FACTS)
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    rig.stub.script(Reply.text("Stale[^1].", delay=0.3))
    running = asyncio.create_task(rig.consolidator.consolidate(scope, rig.partner.model))
    await asyncio.sleep(0.1)
    await rig.controls.delete(scope)
    assert await running is None
    assert await rig.memory.store.run(lambda conn: consolidate.load(conn, scope)) is None


async def test_a_teacher_edit_keeps_the_footnotes_it_kept(rig):
    await note(rig, "ann", *FACTS)
    scope = (await rig.memory.session(rig.turn("ann", "-"))).writable
    rig.stub.script(Reply.text("Chemistry[^1], chess[^2]."))
    before = await rig.consolidator.consolidate(scope, rig.partner.model)
    edited = await rig.controls.edit(scope, "Chess club captain[^2]. Invented[^7].")
    assert edited.markdown == "Chess club captain[^1]. Invented." and edited.footnotes == {1: before.footnotes[2]}
    assert edited.author == "teacher" and edited.covered == before.covered


def test_footnote_helpers():
    body, footnotes = keep_known("A[^3] b[^1] c[^3] d[^8]\n\n[^3]: x\n[^note]: y", {1: 10, 3: 30})
    assert body == "A[^1] b[^2] c[^1] d" and footnotes == {1: 30, 2: 10}
    assert strip_footnotes("A[^1] b.\n\n[^1]: fact 3") == "A b."
    doc = Document(Scope(ScopeKind.GROUP, "t", "g"), "x[^1]", {1: 5})
    assert consolidate.render(doc, {}) == "x[^1]\n\n[^1]: fact 5 (deleted)"


async def test_partner_notes_are_the_teachers_and_read_only_to_the_model(rig):
    from brain.memory.scopes import notes_scope

    await rig.controls.edit(notes_scope(rig.partner), "Ann's class is on chapter 4. Be patient with fractions.")
    said = await rig.say("bob", "hello")
    system = said.requests[0]["messages"][0]["content"]
    assert "Your teacher's notes for you" in system and "chapter 4" in system
    tools = {t["function"]["name"]: t for t in said.requests[0]["tools"]}
    assert set(tools["memory_write"]["function"]["parameters"]["properties"]) == {"text", "key", "kind"}  # no scope to pick
    with sqlite3.connect(rig.data_dir / "memory.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM trace WHERE scope_kind = 'partner_notes'").fetchone() == (0,)


async def test_consolidation_tokens_count_against_the_learners_day(rig):
    turn = rig.turn("ann", "-")
    await rig.memory.write(turn, MemoryEntry("Ann is revising fractions"))
    session = await rig.memory.session(turn)
    before = await rig.usage.spent_today(rig.partner.id, session.usage_key)
    rig.stub.script(Reply.text("Ann revises fractions.[^1]\n\n[^1]: fact 1", usage={"prompt_tokens": 120, "completion_tokens": 30}))
    await rig.consolidator.consolidate(session.writable, rig.partner.model, charge_to=(rig.partner.id, session.usage_key))
    assert await rig.usage.spent_today(rig.partner.id, session.usage_key) == before + 150
