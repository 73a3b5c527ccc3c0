"""The web chat's per-session feeds: bounded, resumable, forgetting idle sessions, never unbounded."""

from __future__ import annotations

import asyncio
from contextlib import aclosing, suppress
from pathlib import Path

import pytest

from channels.base import ChannelContext
from channels.webchat import WebchatChannel, WebchatConfig
from channels.webchat.feed import FeedsFull, SessionFeeds
from gateway.core.errors import PeerUnavailable
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind, Referrer, RenderedPart


async def test_ids_grow_across_sessions_and_start_above_any_earlier_run() -> None:
    earlier = SessionFeeds()
    for _ in range(100):
        earlier.publish("a", "typing", {})
    await asyncio.sleep(0.01)  # a restart takes far longer than one microsecond per event sent
    later = SessionFeeds()
    first = later.publish("b", "typing", {})
    second = later.publish("c", "typing", {})
    assert earlier.last_id < first.id < second.id


def test_resume_point() -> None:
    feeds = SessionFeeds()
    event = feeds.publish("a", "typing", {})
    assert feeds.resume_point(None) == 0
    assert feeds.resume_point("") == 0
    assert feeds.resume_point("nope") == 0
    assert feeds.resume_point("-5") == 0
    assert feeds.resume_point(str(event.id)) == event.id
    assert feeds.resume_point(str(event.id + 1)) == 0  # from a run whose clock was ahead: replay


async def test_idle_sessions_are_forgotten_but_followed_ones_stay() -> None:
    feeds = SessionFeeds(idle_ttl_s=0.01)
    feeds.publish("idle", "typing", {})
    feeds.publish("followed", "typing", {})
    async with aclosing(feeds.feed("followed").follow(0, keepalive_s=10)) as following:
        await anext(following)
        await asyncio.sleep(0.03)
        assert feeds.sweep() == 1
        assert "idle" not in feeds and "followed" in feeds
    await asyncio.sleep(0.03)
    assert feeds.sweep() == 1
    assert len(feeds) == 0


async def test_a_full_set_evicts_the_quietest_unfollowed_session() -> None:
    feeds = SessionFeeds(max_sessions=2)
    feeds.publish("old", "typing", {})
    feeds.publish("new", "typing", {})
    async with aclosing(feeds.feed("new").follow(0, keepalive_s=10)) as following:
        await anext(following)
        feeds.publish("newest", "typing", {})
        assert "old" not in feeds and "new" in feeds and "newest" in feeds
        async with aclosing(feeds.feed("newest").follow(0, keepalive_s=10)) as also:
            await anext(also)
            with pytest.raises(FeedsFull):
                feeds.publish("one-too-many", "typing", {})


async def test_a_send_to_a_full_set_is_a_transient_error(tmp_path: Path) -> None:
    class NullSink:
        async def accept(self, messages: object) -> None: ...

        def invalid(self, reason: str) -> None: ...

        def refused(self, rule: str, detail: str) -> None: ...

        def late_ack(self, took_s: float, deadline_s: float) -> None: ...

        async def undelivered(self, target: object, reason: str) -> None: ...

    class NoCursors:
        async def get(self, name: str) -> str | None:
            return None

        async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None: ...

    channel = WebchatChannel(ChannelContext(AccountId("default"), WebchatConfig(), NullSink(), NoCursors(), tmp_path))
    channel.feeds.max_sessions = 1
    async with aclosing(channel.feeds.feed("busy").follow(0, keepalive_s=10)) as following:
        waiting = asyncio.create_task(anext(following))
        await asyncio.sleep(0)
        target = Address(
            channel=ChannelName("webchat"),
            account=AccountId("default"),
            conversation=Conversation(chat=ChatId("other"), kind=ConversationKind.DIRECT),
        )
        with pytest.raises(PeerUnavailable, match="webchat"):
            await channel.send(target, RenderedPart(index=0, text="<p>hi</p>"), referrer=Referrer(), idempotency_key="k")
        waiting.cancel()
        with suppress(asyncio.CancelledError):
            await waiting
