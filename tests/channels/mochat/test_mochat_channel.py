"""The Mochat agent through the real python-socketio client (msgpack) against the loopback emulator.

Each test says something at the emulator as a Mochat user would and reads what
the user sees: the messages the agent sent to the session or panel.
"""

from __future__ import annotations

from tests.contract.harness import counter, eventually


async def test_a_session_message_is_answered_once_as_a_reply(rig):
    said = await rig.server.say("hello")
    [answer] = await rig.answers("s-learner1", 1)
    assert answer.content == "echo: hello" and not answer.panel
    assert answer.reply_to == said.message_id
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["hello"]


async def test_a_pushed_message_pushed_again_is_answered_once(rig):
    said = await rig.server.say("only once")
    await rig.answers("s-learner1", 1)
    await rig.server.redeliver(said)
    await rig.server.say("and then this")
    await eventually(lambda: len(rig.server.shown("s-learner1")) >= 2, what="the later answer")
    await rig.quiet()
    assert [a.content for a in rig.server.shown("s-learner1")] == ["echo: only once", "echo: and then this"]


async def test_a_panel_message_without_a_mention_is_dropped_and_with_one_answered_in_the_panel(rig):
    await rig.server.say_in_panel("just chatting")
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="mochat") >= 1,
                     what="the unaddressed panel message to be dropped")
    await rig.server.say_in_panel("what is a prime?", mention=True)
    [answer] = await rig.answers("p-class1", 1)
    assert answer.panel and answer.content == "echo: what is a prime?"
    [turn] = rig.responder.turns
    assert "@" not in turn.messages[0].text and turn.messages[0].addressed


async def test_a_panel_set_to_always_answers_without_a_mention(open_rig):
    rig = await open_rig(access={"dm": "open", "group": "mention", "groups": {"p-class1": {"policy": "always"}}})
    await rig.server.say_in_panel("no mention here")
    [answer] = await rig.answers("p-class1", 1)
    assert answer.content == "echo: no mention here"


async def test_the_agents_own_messages_are_not_answered(rig):
    await rig.server.say("my own words", user=rig.server.agent)
    await rig.server.say("a learner's")
    [answer] = await rig.answers("s-learner1", 1)
    assert answer.content == "echo: a learner's"


async def test_malformed_events_are_counted_invalid_and_the_socket_keeps_answering(rig):
    for payload in ("not an object", {"sessionId": "s-learner1", "events": [{"seq": "x"}]},
                    {"sessionId": "s-learner1", "cursor": "late", "events": []},
                    {"nope": True}):
        await rig.server.push("claw.session.events", payload)
    await rig.server.push("notify:chat.message.add", {"_id": 5, "converseId": "p-class1"})
    await rig.server.push("notify:chat.message.add", ["a", "list"])
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel="mochat",
                                     reason="invalid event") >= 6, what="six invalid events")
    await rig.server.say("still here?")
    [answer] = await rig.answers("s-learner1", 1)
    assert answer.content == "echo: still here?"
    assert (await rig.account()).state == "running"


async def test_after_the_socket_drops_the_agent_subscribes_again_and_misses_nothing(rig):
    await rig.server.say("before")
    await rig.answers("s-learner1", 1)
    await rig.server.drop()
    await rig.server.say("while down")  # pushed to nobody: the resubscribe's ack or the poll hands it over
    await rig.server.connected(subscribes=2)
    await rig.server.say("after")
    shown = await rig.answers("s-learner1", 3)
    assert sorted(a.content for a in shown) == ["echo: after", "echo: before", "echo: while down"]


async def test_a_refused_claw_token_waits_for_a_human(open_rig):
    rig = await open_rig(token="claw_" + "w7rongq4x2", connect=False)

    async def parked():
        account = await rig.account()
        return account if account.state == "action_required" else None

    account = await eventually(parked, what="the account to wait for a new token")
    assert "claw token" in account.reason
    assert rig.server.subscribes == 0 and rig.server.refused_connects >= 1
