"""Catch-up after a new session: what was posted while no session listened is answered once, through discord.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import discord

from channels._kit.positions import KEPT as CHANNELS_KEPT
from channels._kit.positions import ChatPositions as Cursors
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.messages import InboundMessage, Text
from tests.contract.harness import eventually


class FailsOnce:
    """The gateway's own sink, except that storing a message saying ``word`` fails the first time."""

    def __init__(self, sink, word: str) -> None:
        self.sink, self.word, self.failed = sink, word, 0

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        if not self.failed and any(isinstance(e, Text) and self.word in e.text for m in messages for e in m.elements):
            self.failed += 1
            raise OSError("disk I/O error")
        await self.sink.accept(messages)

    def invalid(self, reason: str) -> None:
        self.sink.invalid(reason)


async def test_messages_posted_while_the_gateway_was_stopped_are_each_answered_once_after_restart(open_rig):
    rig = await open_rig()
    room = await rig.peer.new_channel("class-catch-up")
    dm = await rig.peer.say("hello before the stop")
    guild = await rig.peer.say("room before the stop", channel=room, mention=True)
    await rig.replies(dm["channel_id"], 1)
    await rig.replies(room, 1)
    await rig.quiet()
    await rig.gateway.stop()

    user = dm["author"]["id"]
    offline = [rig.peer.post_offline("first while down", user=user),
               rig.peer.post_offline("in the room while down", channel=room, mention=True),
               rig.peer.post_offline("second while down", user=user)]
    assert not rig.peer.connected()
    again = Gateway(parse_config(rig.harness.raw_config(rig.data_dir)), responder=rig.responder)
    await again.start()
    try:
        dm_shown = await rig.replies(dm["channel_id"], 3, what="the DM answers caught up")
        room_shown = await rig.replies(room, 2, what="the room answer caught up")
        await eventually(lambda: again.channel("discord", "main") is not None, what="the channel")
        await rig.quiet()
        assert [s.text for s in dm_shown] == ["echo: hello before the stop", "echo: first while down", "echo: second while down"]
        assert [s.reply_to for s in dm_shown[1:]] == [offline[0]["id"], offline[2]["id"]]
        assert room_shown[1].reply_to == offline[1]["id"] and room_shown[0].reply_to == guild["id"]
        assert len(rig.responder.turns) == 5
        assert rig.peer.identifies == 2
        history = [r for r in rig.peer.requests if r["method"] == "GET" and r["route"] == "channels/{id}/messages"]
        assert {r["channel"] for r in history} == {dm["channel_id"], room}
    finally:
        await again.stop()


async def test_a_message_whose_accept_failed_is_answered_after_the_channel_restarts(open_rig):
    rig = await open_rig()
    warm = await rig.peer.say("warm up")
    await rig.replies(warm["channel_id"], 1)
    channel = rig.channel
    channel.context = dataclasses.replace(channel.context, sink=FailsOnce(channel.context.sink, "unlucky"))
    unlucky = await rig.peer.say("the unlucky one", user=warm["author"]["id"])
    shown = await rig.replies(warm["channel_id"], 2, what="the answer fetched after the restart")
    await rig.quiet()
    assert channel.context.sink.failed == 1
    assert shown[1].text == "echo: the unlucky one" and shown[1].reply_to == unlucky["id"]
    assert rig.peer.identifies == 2, "the failed accept ends the run; the new session catches up"
    later = await rig.peer.say("and after it", user=warm["author"]["id"])
    shown = await rig.replies(warm["channel_id"], 3)
    await rig.quiet()
    assert shown[2].reply_to == later["id"] and len(rig.responder.turns) == 3


async def test_the_emulators_history_pages_as_discord_documents(open_rig):
    rig = await open_rig()
    said = [rig.peer.post_offline(f"m{i}", channel=rig.peer.channel_id) for i in range(5)]
    ids = [int(m["id"]) for m in said]
    http = rig.channel._client.http
    assert [int(m["id"]) for m in await http.logs_from(rig.peer.channel_id, 2, after=ids[0])] == [ids[2], ids[1]]
    assert [int(m["id"]) for m in await http.logs_from(rig.peer.channel_id, 2, before=ids[4])] == [ids[3], ids[2]]
    assert [int(m["id"]) for m in await http.logs_from(rig.peer.channel_id, 3)] == [ids[4], ids[3], ids[2]]
    where = rig.channel._client.get_partial_messageable(int(rig.peer.channel_id))
    paged = [m.id async for m in where.history(after=discord.Object(ids[0]), oldest_first=True, limit=None)]
    assert paged == ids[1:]


def test_cursors_keep_the_most_recent_channels_and_never_move_back():
    cursors = Cursors("not json")
    assert cursors.last == {}
    for n in range(CHANNELS_KEPT + 3):
        cursors.advance(str(n), 10)
    assert len(cursors.last) == CHANNELS_KEPT and "0" not in cursors.last and str(CHANNELS_KEPT + 2) in cursors.last
    assert not cursors.advance("5", 3) and cursors.last["5"] == 10
    assert list(cursors.last)[-1] == "5"
    assert Cursors(cursors.dump()).last == cursors.last
