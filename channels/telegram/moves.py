"""Groups upgraded to supergroups: the conversation keeps its key, the bot speaks to the new chat.

When a Telegram group becomes a supergroup (an admin turned on topics, a
public link, or it grew) it gets a new chat id, and the old id refuses every
send with 400 and ``migrate_to_chat_id``.  The gateway's conversation --
history, memory, a teacher's takeover, the group's access rules in the config
-- was keyed by the old id, so the move is kept as a mapping, not followed as a
new conversation:

- inbound, a message from the supergroup is filed under the *old* chat id,
  so the conversation simply continues;
- outbound, anything addressed to the old chat id goes to the new one.

The channel learns a move from the service messages Telegram posts at the
upgrade (``migrate_to_chat_id`` in the old group, ``migrate_from_chat_id`` in
the new supergroup) or, if it missed those, from a send refused with
``migrate_to_chat_id`` -- that send is then made once more to the new chat.
Moves are kept in the account's cursor store, so they survive a restart.
"""

from __future__ import annotations

import logging

from gateway.core.channel import CursorStore

log = logging.getLogger(__name__)


class ChatMoves:
    """Old chat id <-> new chat id, durable, with what was read kept in memory (a miss too)."""

    def __init__(self, cursors: CursorStore) -> None:
        self._cursors = cursors
        self._to: dict[int, int | None] = {}
        self._from: dict[int, int | None] = {}

    async def current(self, chat: int) -> int:
        """Where to send for a conversation keyed ``chat``: the supergroup it became, else itself."""
        if chat > 0:  # private chats never move
            return chat
        if chat not in self._to:
            stored = await self._cursors.get(f"moved-to:{chat}")
            self._to[chat] = int(stored) if stored else None
        return self._to[chat] or chat

    async def original(self, chat: int) -> int:
        """The conversation a message from ``chat`` belongs to: the group it was upgraded from, else itself."""
        if chat > 0:
            return chat
        if chat not in self._from:
            stored = await self._cursors.get(f"moved-from:{chat}")
            self._from[chat] = int(stored) if stored else None
        return self._from[chat] or chat

    async def record(self, old: int, new: int) -> None:
        """Remember that group ``old`` is supergroup ``new`` now; a conversation already moved stays on its key."""
        old = await self.original(old)
        if self._to.get(old) == new:
            return
        await self._cursors.put(f"moved-to:{old}", str(new))
        await self._cursors.put(f"moved-from:{new}", str(old))
        self._to[old], self._from[new] = new, old
        log.info("telegram group upgraded to a supergroup old_chat=%s new_chat=%s", old, new)
