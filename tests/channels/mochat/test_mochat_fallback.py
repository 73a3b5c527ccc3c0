"""The polling fallback: the socket refused, messages still answered over REST; the socket back, nothing twice.

The emulator's Socket.IO path answers 503 while ``socket_down``; the session's
long poll (``sessions/watch``) and the panel's message list then carry every
message.  When the socket comes back the agent subscribes with the cursors the
polls left, so the ack hands over nothing already answered.
"""

from __future__ import annotations

from collections import Counter

from tests.contract.harness import eventually


async def test_with_the_socket_refused_messages_are_answered_by_polling_and_once_after_it_returns(open_rig):
    rig = await open_rig(socket_down=True)
    server = rig.server
    await server.say("polled one")
    await server.say_in_panel("polled in a panel", mention=True)
    await rig.answers("s-learner1", 1)
    await rig.answers("p-class1", 1)
    assert server.subscribes == 0 and server.watches >= 1
    account = await rig.account()
    assert account.state == "running" and "polling" in (account.reason or "")

    server.socket_down = False
    await server.connected()
    await server.say("pushed one")
    await server.say_in_panel("pushed in a panel", mention=True)
    await server.say("pushed two", session="s-learner2", user="u-learner2")
    await rig.answers("s-learner1", 2)
    await rig.answers("p-class1", 2)
    await rig.answers("s-learner2", 1)
    await rig.quiet()
    contents = Counter(s.content for s in server.sent)
    assert contents == Counter({"echo: polled one": 1, "echo: pushed one": 1, "echo: polled in a panel": 1,
                                "echo: pushed in a panel": 1, "echo: pushed two": 1})


async def test_a_socket_that_goes_away_again_hands_back_to_polling_without_repeats(open_rig):
    rig = await open_rig()
    server = rig.server
    await server.say("on the socket")
    await rig.answers("s-learner1", 1)
    server.socket_down = True
    await server.drop()
    await server.say("while polling")
    await rig.answers("s-learner1", 2)
    server.socket_down = False
    await server.connected(subscribes=2)
    await server.say("socket again")
    await rig.answers("s-learner1", 3)
    await rig.quiet()
    await eventually(lambda: server.subscribes >= 2, what="the resubscribe")
    assert [s.content for s in server.shown("s-learner1")] == ["echo: on the socket", "echo: while polling",
                                                               "echo: socket again"]
