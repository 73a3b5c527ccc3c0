"""Recent: bounded by size (least recently used out first) and by time (each value for ttl_s)."""

from __future__ import annotations

import pytest

from channels._kit.recent import Recent


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_value_is_kept_for_its_ttl_and_then_forgotten():
    clock = Clock()
    recent: Recent[str, str] = Recent(size=10, ttl_s=60, clock=clock)
    recent.put("U1", "zh-CN")
    clock.now += 59.9
    assert recent.get("U1") == "zh-CN"
    clock.now += 0.1
    assert recent.get("U1") is None and len(recent) == 0


def test_past_its_size_the_least_recently_used_goes_first():
    recent: Recent[str, str] = Recent(size=2, ttl_s=60, clock=Clock())
    recent.put("a", "1")
    recent.put("b", "2")
    assert recent.get("a") == "1"  # a is now the most recently used
    recent.put("c", "3")
    assert (recent.get("a"), recent.get("b"), recent.get("c")) == ("1", None, "3")
    assert len(recent) == 2


def test_an_empty_answer_is_remembered_as_such():
    recent: Recent[str, str] = Recent(size=2, ttl_s=60, clock=Clock())
    recent.put("U1", "")
    assert recent.get("U1") == ""


@pytest.mark.parametrize(("size", "ttl"), [(0, 60), (1, 0)])
def test_a_recent_that_would_keep_nothing_is_refused(size, ttl):
    with pytest.raises(ValueError):
        Recent(size=size, ttl_s=ttl)
