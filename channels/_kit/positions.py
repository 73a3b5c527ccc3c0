"""Where each chat was read up to, for a platform whose socket replays nothing a dropped one missed.

Discord's new sessions and Mattermost's websocket both forget what was posted
while no connection was open; the channel catches up over REST from a position
per chat.  :class:`ChatPositions` is that record: one JSON value in the
account's ``CursorStore``, a position per chat (a message snowflake, a post's
``create_at``: any number that only grows), bounded to the ``kept`` most
recently active chats, each moved only forward and only after
``sink.accept`` returned, so it never passes a message that is not durable.
A ``floor`` is where a chat with no position of its own starts (Mattermost: the
newest post the bot's channel listing showed when the last catch-up began);
None where the platform cannot list chats (Discord).
"""

from __future__ import annotations

import json

KEPT = 500
"""Chats remembered; the least recently active is forgotten first."""


class ChatPositions:
    """Per-chat positions, least recently active first, and the floor."""

    def __init__(self, saved: str | None, *, kept: int = KEPT) -> None:
        self.kept = kept
        try:
            loaded = json.loads(saved or "{}")
        except ValueError:
            loaded = {}
        loaded = loaded if isinstance(loaded, dict) else {}
        chats = loaded.get("channels", loaded) if "floor" in loaded or "channels" in loaded else loaded  # the flat form too
        self.last: dict[str, int] = {str(k): int(v) for k, v in chats.items() if isinstance(v, int)} \
            if isinstance(chats, dict) else {}
        floor = loaded.get("floor")
        self.floor: int | None = floor if isinstance(floor, int) and not isinstance(floor, bool) else None

    def advance(self, chat: str, at: int) -> bool:
        """Move ``chat`` to ``at`` (never back) and make it the most recently active; True when it moved."""
        previous = self.last.pop(chat, 0)
        self.last[chat] = max(previous, at)
        while len(self.last) > self.kept:
            self.last.pop(next(iter(self.last)))
        return at > previous

    def forget(self, chat: str) -> None:
        """A chat the bot can no longer read (deleted, the bot removed)."""
        self.last.pop(chat, None)

    def raise_floor(self, to: int) -> None:
        self.floor = max(self.floor or 0, to)

    def dump(self) -> str:
        return json.dumps({"channels": self.last, "floor": self.floor})
