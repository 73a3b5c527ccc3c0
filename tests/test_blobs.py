"""The local blob store: content-addressed, counted against the limit, never a half-written file."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.blobs import LocalBlobs
from gateway.core.errors import TooLarge


async def chunks(*parts: bytes, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for index, part in enumerate(parts):
        if fail_after is not None and index == fail_after:
            raise ConnectionResetError("the peer hung up")
        yield part


def files(root) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file())


async def test_the_same_bytes_are_kept_once_under_their_hash(tmp_path):
    blobs = LocalBlobs(tmp_path)
    first = await blobs.put(chunks(b"home", b"work"), limit=100, suffix=".PDF")
    again = await blobs.put(chunks(b"homework"), limit=100, suffix=".pdf")
    assert first == again and first.size == 8 and first.key.endswith(".pdf") and len(first.key) == 64 + 4
    assert await blobs.get(first.key) == b"homework"
    assert files(tmp_path) == [first.key]
    assert blobs.url(first.key).startswith("file://") and blobs.url(first.key).endswith(first.key)


async def test_bytes_past_the_limit_fail_and_leave_nothing_behind(tmp_path):
    blobs = LocalBlobs(tmp_path)
    with pytest.raises(TooLarge, match="over 10 bytes"):
        await blobs.put(chunks(b"x" * 6, b"x" * 6), limit=10)
    assert files(tmp_path) == []


async def test_a_download_cut_off_midway_leaves_no_partial_file(tmp_path):
    blobs = LocalBlobs(tmp_path)
    with pytest.raises(ConnectionResetError):
        await blobs.put(chunks(b"a" * 10, b"b" * 10, fail_after=1), limit=100)
    assert files(tmp_path) == []


@pytest.mark.parametrize("key", ["../../etc/passwd", "ab", "A" * 64, "0" * 64 + "/x", "0" * 64 + ".toolongsuffix"])
async def test_only_a_key_the_store_made_can_be_read(tmp_path, key):
    blobs = LocalBlobs(tmp_path)
    with pytest.raises(KeyError):
        await blobs.get(key)


async def test_a_suffix_that_is_not_an_extension_is_dropped(tmp_path):
    blob = await LocalBlobs(tmp_path).put(chunks(b"x"), limit=10, suffix="./../evil")
    assert "." not in blob.key and "/" not in blob.key
