"""A long answer to a message in a server channel continues in a thread started from that message.

The rule: the reply to a top-level message in a guild text channel (not a DM, not
already in a thread) posts its first part in the channel, as the reply to the
learner's message -- that is where its preview was streamed -- and, when its text
needs more than one message (over the 2,000-character limit), every further part
in a thread started from the learner's message ("Start Thread from Message").  A
file that follows a one-message answer stays beside it in the channel.

Idempotent without a record of our own: a thread started from a message has that
message's id (Discord's docs: "the created thread and the message it was started
from will share the same id"), so every part of the reply, and every retry after a
crash or a lost answer, finds the same thread.  Starting it again is answered
400 with code 160004 ("a thread has already been created for this message"),
which means it is there; the parts' nonces keep a repeated post to one message.
"""

from __future__ import annotations

from typing import Literal

import discord

from channels.discord.transport import call
from gateway.core.errors import BadRequest, NotFound
from gateway.core.messages import Address, ConversationKind, Referrer, RenderedPart

THREAD_EXISTS = 160004
ARCHIVE_AFTER_MIN: Literal[60, 1440, 4320, 10080] = 1440
"""Discord archives an idle thread after one of 60, 1440, 4320 or 10080 minutes; a day suits homework."""


async def continuation(client: discord.Client, target: Address, part: RenderedPart, referrer: Referrer,
                       name: str | None) -> int | None:
    """The thread ``part`` goes to, started if need be; None when it goes where the conversation is."""
    where = target.conversation
    if (name is None or part.index == 0 or where.kind is not ConversationKind.GROUP or where.thread
            or not referrer.message):
        return None
    thread = int(referrer.message)
    if isinstance(client.get_channel(thread), discord.Thread):
        return thread  # discord.py saw it start (THREAD_CREATE)
    if not part.text:
        return None  # a file after a one-message answer
    try:
        await call("start thread", client.http.start_thread_with_message(
            int(where.chat), thread, name=name, auto_archive_duration=ARCHIVE_AFTER_MIN))
    except BadRequest as error:
        if getattr(error.__cause__, "code", None) != THREAD_EXISTS:
            raise
    except NotFound:  # no Create Public Threads permission, or the learner's message is gone: the channel it is
        return None
    return thread
