"""Catch-up over REST: what Discord posted while no session of ours was listening.

The Gateway replays missed dispatches only to a *resumed* session; a new
process identifies a new session, so messages posted while ``partners serve``
was down, in flight when it was killed, or whose ``sink.accept`` failed, would
never reach us.  The kit's :class:`~channels._kit.positions.ChatPositions`
keeps, durably in the account's ``CursorStore``, the last accepted message
snowflake of each channel or thread the bot has received messages in (the 500
most recently active);
it is written only after ``sink.accept`` returned, so it never passes a message
that is not durable.  On READY of a new session :func:`missed` pages
``GET /channels/{id}/messages?after=`` oldest first from each cursor, bounded by
the account's horizon (``catch_up_max_age_s``: nothing older is answered late);
overlap with live dispatches is harmless, the pipeline dedups by snowflake.

A DM channel the bot has never received a message in is unknown here: Discord
has no "list my DMs with unread messages" call for bots.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import discord

from channels.discord.config import DiscordConfig

CURSOR = "last_messages"
"""Cursor name: the kit's per-chat positions (channel or thread id -> last accepted message snowflake)."""


async def missed(client: discord.Client, channel: str, after: int, settings: DiscordConfig,
                 now: datetime | None = None) -> AsyncIterator[discord.Message]:
    """The messages of ``channel`` after ``after`` within the horizon, oldest first (discord.py pages by 100)."""
    horizon = discord.utils.time_snowflake((now or datetime.now(UTC)) - timedelta(seconds=settings.catch_up_max_age_s))
    where = await client.fetch_channel(int(channel))  # its kind (DM, text channel, thread) decides the conversation
    assert isinstance(where, discord.abc.Messageable)
    async for message in where.history(after=discord.Object(max(after, horizon)), oldest_first=True, limit=None):
        yield message
