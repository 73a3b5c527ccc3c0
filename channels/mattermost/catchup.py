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

from channels._kit.positions import ChatPositions

CURSOR = "channel_positions"


class Positions(ChatPositions):
    """The kit's per-chat positions (ms), read the way ``posts?since=`` wants them."""

    def since(self, channel: str, horizon: int) -> int | None:
        """Where a catch-up of ``channel`` starts: one ms before its position (or the floor), never before
        the horizon; None on the very first run, when nothing posted before the gateway existed is answered."""
        start = self.last.get(channel, self.floor)
        return None if start is None else max(start - 1, horizon)

    def caught_up(self, listed: int) -> None:
        """Every channel listed is read up to its newest post, the newest of them made at ``listed``: a channel
        with no position of its own starts there next time.  A post made after the listing came on the open
        socket, and if it is not durable yet its time is past the floor, so the next catch-up still reads it."""
        self.raise_floor(listed)
