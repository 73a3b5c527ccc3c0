"""``/forget`` asks, then erases a learner everywhere -- checked by reading memory.db and brain.db directly."""

from __future__ import annotations

import re
import sqlite3

from brain.commands import FORGET_FIRST, FORGOTTEN, LINKED
from brain.memory.erasure import ERASED
from brain.memory.people import FORGET_TTL_S
from tests.peers.model_stub import Reply

ANN = ("hyacinth-mole", "walnut-fact", "saffron-yak", "umber-stoat", "jade-gecko", "coral-bison", "lilac-ibex", "crimson-yak")
BOB = ("bob-fact-orca", "bob-group-heron")
WEB = {"channel": "webchat", "account": "default"}
TERMINAL = {"channel": "console", "account": "default"}


def rows(path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def everything(path) -> str:
    """Every value of every row of every table, as one string."""
    conn = sqlite3.connect(path)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for table in tables for row in conn.execute(f"SELECT * FROM {table}"))
    finally:
        conn.close()


async def ann_everywhere(rig) -> str:
    """Ann on the web (facts, a preference, consolidated notes), on a linked terminal, and in a group with Bob."""
    rig.stub.script(
        Reply.tool_calls(("memory_write", {"text": "Ann noted walnut-fact"}),
                         ("memory_write", {"text": "Ann prefers saffron-yak examples", "kind": "preference"})),
        Reply.text("I'll remember, crimson-yak."),
    )
    await rig.say("ann", "my secret is hyacinth-mole", **WEB)
    ann = await rig.memory.session(rig.turn("ann", "-", **WEB))
    rig.stub.script(Reply.text("Ann's notes: umber-stoat[^1]."))
    assert await rig.consolidator.consolidate(ann.writable, rig.partner.model) is not None
    code = re.search(r"\*\*(\w{8})\*\*", (await rig.say("ann", "/link", **WEB)).reply).group(1)
    assert (await rig.say("ann-term", f"/link {code}", **TERMINAL)).reply == LINKED
    await rig.say("ann-term", "typed in the terminal: jade-gecko", **TERMINAL)
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "the group heard lilac-ibex"})), Reply.text("Nice, everyone."))
    await rig.say("ann", "in the group: coral-bison", group="class", **WEB)
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "bob-group-heron"})), Reply.text("Thanks Bob."))
    await rig.say("bob", "hello from bob", group="class", **WEB)
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "bob-fact-orca"})), Reply.text("Got it."))
    await rig.say("bob", "about me", **WEB)
    return ann.person


async def test_forget_leaves_nothing_behind(rig):
    person = await ann_everywhere(rig)
    memory_db, brain_db = rig.data_dir / "memory.db", rig.data_dir / "brain.db"
    assert all(marker in everything(memory_db) + everything(brain_db) for marker in ANN)  # all there before

    asked = await rig.say("ann-term", "/forget", **TERMINAL)
    assert "/forget confirm" in asked.reply and asked.requests == []
    done = await rig.say("ann-term", "/forget confirm", **TERMINAL)
    assert done.reply == FORGOTTEN and done.requests == []

    stored = everything(memory_db) + everything(brain_db)
    assert [marker for marker in ANN if marker in stored] == []
    assert person not in stored
    assert rows(memory_db, "SELECT COUNT(*) FROM identities WHERE user IN ('ann', 'ann-term')") == [(0,)]
    assert rows(memory_db, "SELECT COUNT(*) FROM persons") == [(1,)]  # Bob's
    assert rows(brain_db, "SELECT COUNT(*) FROM session_events WHERE json_extract(payload, '$.user') IN ('ann', 'ann-term')") == [(0,)]
    for path in (memory_db, brain_db):  # not even in free pages or the write-ahead log
        raw = path.read_bytes() + (path.with_name(path.name + "-wal").read_bytes() if path.with_name(path.name + "-wal").exists() else b"")
        assert [marker for marker in ANN if marker.encode() in raw] == []

    # Bob, and the group's shape, are untouched: his words, his facts, the tutor's answers in the group.
    assert all(marker in stored for marker in BOB)
    group = [e.event for e in await rig.log.read("webchat:default:class")]
    assert [e.text for e in group if e.kind == "user"] == [ERASED, "hello from bob"]
    assert [e.text for e in group if e.kind == "assistant" and e.text] == [ERASED, "Thanks Bob."]
    assert [e.text for e in group if e.kind == "tool"] == [ERASED, "Noted about this group."]

    # Ann can start again, as a stranger to the tutor.
    again = await rig.say("ann", "hi, who am I?", **WEB)
    assert [marker for marker in ANN if marker in str(again.requests)] == []


async def test_forget_confirm_needs_a_recent_request(rig):
    await rig.say("ann", "hello", **WEB)
    assert (await rig.say("ann", "/forget confirm", **WEB)).reply == FORGET_FIRST.format(minutes=10)
    await rig.say("ann", "/forget", **WEB)
    rig.clock.advance(FORGET_TTL_S + 1)
    assert (await rig.say("ann", "/forget confirm", **WEB)).reply == FORGET_FIRST.format(minutes=10)
    history = await rig.log.read((await rig.memory.session(rig.turn("ann", "-", **WEB))).history_key)
    assert any(e.event.kind == "user" and e.event.text == "hello" for e in history)  # nothing was erased


async def test_export_gives_the_learner_their_memory_and_history_as_markdown(rig):
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "Ann's exam is on Friday"})), Reply.text("Good luck on Friday!"))
    await rig.say("ann", "my exam is on Friday", **WEB)
    exported = await rig.say("ann", "/export", **WEB)
    assert exported.requests == []
    text = exported.reply
    assert "## Facts noted" in text and "Ann's exam is on Friday" in text
    assert "webchat:default:ann" in text
    assert "Ann: my exam is on Friday" in text and "Tutor: Good luck on Friday!" in text
    assert "/export" not in text.split("## Conversation", 1)[1]  # commands are not part of the conversation


async def test_a_command_sent_with_a_question_runs_after_the_answer(rig):
    turn = rig.turn("ann", "what is 2+2?", **WEB)
    turn.messages.append(rig.turn("ann", "/forget", **WEB).messages[0])
    rig.stub.script(Reply.text("4"))
    said = await rig.run(turn)
    assert said.reply.startswith("4\n\nThis erases everything")
    users = [m["content"] for m in said.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["what is 2+2?"]  # the command never reached the model
