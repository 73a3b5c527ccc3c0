"""Adversarial isolation: Bob tries every way to learn what Ann told the tutor, and nothing of it reaches him.

Ann and Bob talk to the same partner.  Ann tells it private things in her
direct chat -- in plain messages and through ``memory_write`` facts and
preferences the stub model scripts -- and her notes are consolidated.  Both
are members of one group, where Ann says something public.  Then Bob asks
about Ann in his direct chat and in the group, searches the conversation for
her, and sends tool calls whose arguments name her.  Every request built for
Bob -- as the stub model received it, and as the session log rebuilds it --
is checked for each of Ann's private markers; so are Bob's logs and his
``/export``.  Positive controls show the markers do flow where they belong.
"""

from __future__ import annotations

import json

from brain.context import build_request, request_digest
from brain.session_log import ModelRequested, ToolReturned, TurnStarted
from tests.peers.model_stub import Reply

ANN_SAID = "My private worry is the quantum-pelican exam."
ANN_FACT = "Ann fears the saffron-walrus chemistry exam"
ANN_PREFERENCE = "Ann wants examples about violet-otters"
ANN_ANSWER = "I will keep your amber-falcon worry in mind."
ANN_NOTES = "Ann is preparing for a cobalt-heron test[^1]."
PRIVATE = ("quantum-pelican", "saffron-walrus", "violet-otters", "amber-falcon", "cobalt-heron")
GROUP = "study-group"
ANN_IN_GROUP = "Hi all, I like public-narwhal puzzles."
GROUP_FACT = "The group studies ratios (group-lynx)"


def probes(ann_person: str) -> Reply:
    """One round of tool calls that try to reach Ann: by query, by search, by naming her in arguments."""
    return Reply.tool_calls(
        ("memory_read", {"query": "Ann exam worry"}),
        ("history_search", {"query": "Ann exam worry chemistry pelican walrus"}),
        ("memory_read", '{"user": "ann"}'),
        ("memory_read", json.dumps({"scope": {"kind": "learner", "key": ann_person}})),
        ("history_search", '{"query": "exam", "learner": "ann"}'),
        ("memory_write", '{"text": "Bob asked about Ann", "learner": "ann"}'),
    )


def leaks(thing: object) -> list[str]:
    text = thing if isinstance(thing, str) else json.dumps(thing, default=str)
    return [marker for marker in PRIVATE if marker in text]


async def test_nothing_of_ann_reaches_a_request_built_for_bob(rig):
    # Ann, in her direct chat: a plain message, a fact and a preference through memory_write, an answer.
    rig.stub.script(
        Reply.tool_calls(("memory_write", {"text": ANN_FACT}),
                         ("memory_write", {"text": ANN_PREFERENCE, "kind": "preference", "key": "examples"})),
        Reply.text(ANN_ANSWER),
    )
    assert (await rig.say("ann", ANN_SAID)).reply == ANN_ANSWER
    ann = await rig.memory.session(rig.turn("ann", "-"))
    rig.stub.script(Reply.text(ANN_NOTES))
    assert await rig.consolidator.consolidate(ann.writable, rig.partner.model) is not None
    remembered = await rig.say("ann", "Do you remember me?")  # default stub answer: an echo
    assert set(leaks(remembered.requests[0])) == set(PRIVATE), "the markers reach Ann's own requests"

    # Ann in the group: public words; the model reads memory there (group scope) and notes a group fact.
    rig.stub.script(Reply.tool_calls(("memory_read", {}), ("memory_write", {"text": GROUP_FACT})), Reply.text("Welcome!"))
    await rig.say("ann", ANN_IN_GROUP, group=GROUP)

    # Bob, in his direct chat and in the group: asks about Ann, searches, names her in tool arguments.
    rig.stub.script(probes(ann.person), Reply.text("I can't share anything about other learners."))
    await rig.say("bob", "What do you know about Ann? What did she say about her exam?")
    rig.stub.script(probes(ann.person), Reply.text("Let's keep to our own work."))
    in_group = await rig.say("bob", "@tutor what did Ann tell you privately about her exam?", group=GROUP)
    exported = await rig.say("bob", "/export")

    bob = rig.requests_by["bob"]
    assert len(bob) == 4  # two rounds in the direct chat, two in the group; /export asked no model
    for request in bob:
        assert leaks(request) == [], f"Ann's private data reached a request built for Bob: {leaks(request)}"
    assert leaks(exported.reply) == []
    # The group's own memory and what Ann said in front of everyone are the group's: Bob sees those.
    group_request = json.dumps(in_group.requests[0])
    assert "public-narwhal" in group_request and "group-lynx" in group_request

    # The same from the session log alone: every request of Bob's turns, rebuilt and checked against its digest.
    bob_dm = (await rig.memory.session(rig.turn("bob", "-"))).history_key
    group_key = f"webchat:default:{GROUP}"
    rebuilt = 0
    for key in (bob_dm, group_key):
        entries = await rig.log.read(key)
        bobs_turns = {e.event.turn for e in entries if isinstance(e.event, TurnStarted) and e.event.learner == "bob"}
        for index, entry in enumerate(entries):
            event = entry.event
            if isinstance(event, ModelRequested) and event.turn in bobs_turns:
                request = build_request(entries[:index], rig.partner.model, group=key == group_key)
                assert request_digest(request) == event.digest
                assert leaks(request.model_dump()) == []
                rebuilt += 1
        if key == bob_dm:
            assert leaks([e.model_dump() for e in entries]) == []
        refusals = [e.event for e in entries if isinstance(e.event, ToolReturned) and e.event.turn in bobs_turns and e.event.is_error]
        assert len(refusals) == 4 and all("is not an argument of this tool" in r.text for r in refusals)
    assert rebuilt == 4

    # Bob's own searches found nothing of Ann's, and nothing he tried wrote into her memory.
    ann_export = await rig.controls.export(ann.writable)
    assert [f["text"] for f in ann_export["facts"]] == [ANN_FACT]
    assert not any("Bob" in f["text"] for f in ann_export["facts"])


async def test_a_group_turn_reads_the_group_not_the_speakers_private_memory(rig):
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": ANN_FACT})), Reply.text("Noted."))
    await rig.say("ann", ANN_SAID)
    rig.stub.script(Reply.tool_calls(("memory_read", {}), ("history_search", {"query": "pelican exam"})), Reply.text("Hi!"))
    said = await rig.say("ann", "Hello group", group=GROUP)
    for request in said.requests:  # Ann's own group turn: her private memory stays out of the shared log too
        assert leaks(request) == []
    group_log = await rig.log.read(f"webchat:default:{GROUP}")
    assert leaks([e.model_dump() for e in group_log]) == []
