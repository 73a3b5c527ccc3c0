"""Catch-up over REST: what was posted while no websocket of ours was open.

Mattermost's websocket replays nothing a closed connection missed, so after
every (re)connect the channel asks the server.  :class:`Positions` keeps,
durably in the account's ``CursorStore``, the ``create_at`` of the last post
made durable in each channel (the ``CHANNELS_KEPT`` most recently active) and a
``floor``: the time up to which every channel of the bot has been caught up
(the newest ``last_post_at`` the channel listing showed when a catch-up began).
A channel is read with ``GET /channels/{id}/posts?since=`` from its own
position (or the floor, for one with none yet), never further back than the
account's horizon (``catch_up_max_age_s``).  ``since`` is one millisecond
before the position, so a second post in the same millisecond is not passed
over; the post at the position itself comes again and the inbox's dedup by post
id answers it once.  Positions move only after ``sink.accept`` returned.
"""

from __future__ import annotations

import json

CURSOR = "channel_positions"
CHANNELS_KEPT = 500


class Positions:
    """Per-channel positions (ms), least recently active first, and the floor; JSON in one cursor."""

    def __init__(self, saved: str | None) -> None:
        try:
            loaded = json.loads(saved or "{}")
        except ValueError:
            loaded = {}
        loaded = loaded if isinstance(loaded, dict) else {}
        channels = loaded.get("channels")
        self.last: dict[str, int] = {str(k): int(v) for k, v in channels.items()} if isinstance(channels, dict) else {}
        floor = loaded.get("floor")
        self.floor: int | None = int(floor) if isinstance(floor, int) else None

    def advance(self, channel: str, at: int) -> bool:
        """Move ``channel`` to ``at`` (never back) and make it the most recently active; True when it moved."""
        previous = self.last.pop(channel, 0)
        self.last[channel] = max(previous, at)
        while len(self.last) > CHANNELS_KEPT:
            self.last.pop(next(iter(self.last)))
        return at > previous

    def since(self, channel: str, horizon: int) -> int | None:
        """Where a catch-up of ``channel`` starts: one ms before its position (or the floor), never before
        the horizon; None on the very first run, when nothing posted before the gateway existed is answered."""
        start = self.last.get(channel, self.floor)
        return None if start is None else max(start - 1, horizon)

    def caught_up(self, listed: int) -> None:
        """Every channel listed is read up to its newest post, the newest of them made at ``listed``: a channel
        with no position of its own starts there next time.  A post made after the listing came on the open
        socket, and if it is not durable yet its time is past the floor, so the next catch-up still reads it."""
        self.floor = max(self.floor or 0, listed)

    def dump(self) -> str:
        return json.dumps({"channels": self.last, "floor": self.floor})
