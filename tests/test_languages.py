"""preferred_language: the tag a sender weighs highest, from Accept-Language or Content-Language."""

from __future__ import annotations

import pytest

from gateway.languages import preferred_language


@pytest.mark.parametrize(("header", "expected"), [
    ("zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),          # what a Chinese browser sends
    ("en-US", "en-US"),
    ("en;q=0.5, zh-Hans;q=0.9, de", "de"),           # weights, not order, decide; no weight is 1
    ("fr;q=0.8,de;q=0.8", "fr"),                     # the first among equals
    ("*;q=1, en;q=0.2", "en"),                       # a wildcard names no language
    ("zh;q=0, en;q=0.1", "en"),                      # q=0 means "not this one"
    ("zh;q=0", ""),
    ("en; Q=0.7 , ja;q=0.6", "en"),                  # weights are case-insensitive, spaces allowed
    ("en;q=2, ja;q=0.1", "ja"),                      # an impossible weight drops the range
    ("<script>, ja", "ja"),                          # not a tag: skipped, not guessed at
    ("", ""),
    (None, ""),
    ("en, de", "en"),                                # Content-Language (RFC 3282): the first
])
def test_the_highest_weighted_language_tag_is_the_preferred_one(header, expected):
    assert preferred_language(header) == expected


def test_an_endless_header_is_read_only_so_far():
    assert preferred_language("x" * 5000 + ",en") == ""
