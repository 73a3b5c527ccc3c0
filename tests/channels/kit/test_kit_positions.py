"""The kit's per-chat positions: bounded, forward only, and read back from either stored form."""

from __future__ import annotations

import json

from channels._kit.positions import ChatPositions


def test_positions_move_forward_only_and_the_least_recently_active_chat_goes_first():
    positions = ChatPositions(None, kept=3)
    for chat, at in (("a", 5), ("b", 6), ("c", 7)):
        assert positions.advance(chat, at)
    assert not positions.advance("a", 4) and positions.last["a"] == 5  # never back, but now the most recent
    positions.advance("d", 8)
    assert list(positions.last) == ["c", "a", "d"]  # b, least recently active, forgotten


def test_the_stored_form_round_trips_and_the_flat_form_of_earlier_releases_still_reads():
    positions = ChatPositions(None)
    positions.advance("chan1", 1_700_000_000_123)
    positions.raise_floor(1_700_000_000_000)
    again = ChatPositions(positions.dump())
    assert again.last == positions.last and again.floor == 1_700_000_000_000
    flat = ChatPositions(json.dumps({"123": 456, "789": 1011}))  # what Discord stored before the kit held this
    assert flat.last == {"123": 456, "789": 1011} and flat.floor is None
    assert ChatPositions("not json").last == {} and ChatPositions("[1, 2]").last == {}
