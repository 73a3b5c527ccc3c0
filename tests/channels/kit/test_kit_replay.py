"""The replay memory: refuses a key twice inside its window, forgets it after, never grows past its room."""

from __future__ import annotations

import pytest

from channels._kit.replay import ReplayMemory
from gateway.core.errors import ForgedRequest


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_is_refused_inside_the_window_and_taken_again_after_it():
    clock = Clock()
    memory = ReplayMemory(300, clock=clock)
    memory.claim("sig-a")
    clock.now = 299.9
    with pytest.raises(ForgedRequest) as error:
        memory.claim("sig-a")
    assert error.value.reason == "replayed"
    clock.now = 300.0  # a request this old is refused as stale by the signature check anyway
    memory.claim("sig-a")


def test_the_memory_is_bounded_and_drops_the_oldest_first():
    memory = ReplayMemory(300, capacity=3, clock=Clock())
    for key in ("a", "b", "c", "d"):
        memory.claim(key)
    assert len(memory) == 3
    memory.claim("a")  # forgotten to make room: the oldest goes first
    with pytest.raises(ForgedRequest):
        memory.claim("d")


def test_a_released_key_may_come_again():
    memory = ReplayMemory(300, clock=Clock())
    memory.claim("sig")
    memory.release("sig")
    memory.claim("sig")
    memory.release("never-claimed")  # harmless


def test_a_memory_without_a_window_or_room_is_refused():
    with pytest.raises(ValueError):
        ReplayMemory(0)
    with pytest.raises(ValueError):
        ReplayMemory(60, capacity=0)


def test_a_platforms_memory_lasts_its_declared_signature_window():
    clock = Clock()
    memory = ReplayMemory.for_platform("slack", clock=clock)
    assert memory.window_s == 300  # X-Slack-Request-Timestamp: 5 minutes (platforms.toml)
    memory.claim("sig")
    clock.now = 299
    with pytest.raises(ForgedRequest):
        memory.claim("sig")
    with pytest.raises(ValueError, match="telegram declares no signature_window_s"):
        ReplayMemory.for_platform("telegram")
