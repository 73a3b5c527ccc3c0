"""The kit's download: streamed, stopped at the limit whatever Content-Length says, names safe to keep.

The peer is an ``httpx.MockTransport`` handler -- the transport seam httpx itself offers -- so the
real client, streaming and header parsing run; only the socket is left out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from channels._kit.http_errors import BodyCodes, ErrorKind
from channels._kit.media import attachment_name, content_type, download, media_kind, read_attachment, safe_name
from gateway.core.errors import AuthFailed, BadRequest, NotFound, PeerUnavailable, TooLarge
from gateway.core.messages import Attachment

URL = "https://files.test/bot123:SECRET/photos/file_1.jpg"


class Body(httpx.AsyncByteStream):
    """A response body in chunks that counts how much of it was read."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.read = chunks, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read += len(chunk)
            yield chunk


def client(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def read(http: httpx.AsyncClient, *, limit: int, **kw) -> tuple[bytes, str, str]:
    async with download(http, URL, limit=limit, platform="telegram", **kw) as stream:
        body = b"".join([chunk async for chunk in stream.chunks])
        return body, stream.content_type, stream.name


async def test_a_file_within_the_limit_arrives_whole_with_its_type_and_name():
    def handler(request):
        return httpx.Response(200, content=b"\xff\xd8jpeg", headers={
            "Content-Type": "image/jpeg", "Content-Disposition": "attachment; filename*=UTF-8''%E4%BD%9C%E4%B8%9A.jpg"})

    async with client(handler) as http:
        assert await read(http, limit=100) == (b"\xff\xd8jpeg", "image/jpeg", "作业.jpg")


async def test_a_declared_length_over_the_limit_fails_before_the_body_is_read():
    body = Body([b"x" * 1000] * 10)

    async with client(lambda r: httpx.Response(200, stream=body, headers={"Content-Length": "10000"})) as http:
        with pytest.raises(TooLarge, match=r"too large \(9.8 KB > 100 bytes\)"):
            await read(http, limit=100)
    assert body.read == 0


async def test_a_body_that_runs_past_a_lying_content_length_is_cut_off_at_the_limit():
    body = Body([b"x" * 64] * 1000)

    async with client(lambda r: httpx.Response(200, stream=body, headers={"Content-Length": "10"})) as http:
        with pytest.raises(TooLarge, match="over 1000 bytes"):
            await read(http, limit=1000)
    assert body.read < 2000  # stopped at the limit, not after the 64 KB the peer had


async def test_a_body_without_a_length_is_cut_off_at_the_limit_too():
    body = Body([b"x" * 64] * 1000)
    async with client(lambda r: httpx.Response(200, stream=body)) as http:
        with pytest.raises(TooLarge):
            await read(http, limit=1000)


@pytest.mark.parametrize(("status", "error"), [(404, NotFound), (403, AuthFailed), (502, PeerUnavailable)])
async def test_an_http_error_becomes_its_class_in_the_error_tree(status, error):
    async with client(lambda r: httpx.Response(status, text="no")) as http:
        with pytest.raises(error, match=f"HTTP {status}"):
            await read(http, limit=100)


async def test_a_failed_connection_names_its_kind_and_never_the_url_with_the_token():
    def handler(request):
        raise httpx.ConnectError(f"cannot connect to {request.url}")

    async with client(handler) as http:
        with pytest.raises(PeerUnavailable) as caught:
            await read(http, limit=100)
    assert "ConnectError" in str(caught.value) and "SECRET" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_type_is_the_servers_unless_it_only_says_bytes():
    assert content_type("image/png; charset=binary") == "image/png"
    assert content_type("application/octet-stream", declared="audio/ogg") == "audio/ogg"
    assert content_type(None, name="essay.pdf") == "application/pdf"
    assert content_type("", name="noext") == "application/octet-stream"


@pytest.mark.parametrize(("given", "kept"), [
    ("../../etc/passwd", "passwd"),
    ("..\\..\\boot.ini", "boot.ini"),
    (".bashrc", "bashrc"),
    ("...", "file"),
    ("", "file"),
    ("a\x00b\nc.txt", "abc.txt"),
    ("re\u0301sume\u0301.pdf", "r\u00e9sum\u00e9.pdf"),  # NFD in, NFC kept
    ("what?:*<>|.png", "what_.png"),
    ("x\u202egnp.exe", "xgnp.exe"),  # a right-to-left override cannot disguise the extension
])
def test_a_name_is_only_a_name(given, kept):
    assert safe_name(given) == kept


def test_a_long_name_is_bounded_in_bytes_and_keeps_its_extension():
    name = safe_name("数学作业" * 40 + ".pdf")
    assert len(name.encode()) <= 200 and name.endswith(".pdf") and name.startswith("数学作业")
    assert safe_name("notes." + "x" * 300).encode().__len__() <= 200


def test_a_content_disposition_name_is_read_in_both_forms():
    assert attachment_name('attachment; filename="cat.png"') == "cat.png"
    assert attachment_name(None) == ""


@pytest.mark.parametrize(("mime", "kind"), [
    ("image/png", "image"), ("audio/ogg; codecs=opus", "audio"), ("VIDEO/mp4", "video"),
    ("application/pdf", "file"), ("text/plain", "file"), ("", "file"), (None, "file"),
])
def test_a_mime_type_names_its_media_kind_and_anything_else_is_a_file(mime, kind):
    assert media_kind(mime) == kind


CODES = BodyCodes(code_field="errcode", kinds={"42001": ErrorKind.AUTH_FAILED})


@pytest.mark.parametrize(("said", "error", "words"), [
    ({"errcode": 40007, "errmsg": "invalid media_id"}, BadRequest, "invalid media_id"),
    ({"errcode": 42001, "errmsg": "access_token expired"}, AuthFailed, "access_token expired"),
])
async def test_a_json_error_answered_with_200_is_the_error_its_code_means(said, error, words):
    async with client(lambda r: httpx.Response(200, json=said, headers={"Content-Type": "text/plain"})) as http:
        with pytest.raises(error, match=words):
            await read(http, limit=1000, codes=CODES)


async def test_a_json_file_without_an_error_code_is_still_the_file():
    async with client(lambda r: httpx.Response(200, json={"lesson": 3})) as http:
        body, kind, _ = await read(http, limit=1000, codes=CODES)
    assert json.loads(body) == {"lesson": 3} and kind == "application/json"


async def test_without_codes_a_json_body_is_only_a_file():
    async with client(lambda r: httpx.Response(200, json={"errcode": 40007})) as http:
        body, _, _ = await read(http, limit=1000)
    assert json.loads(body) == {"errcode": 40007}


# --------------------------------------------------------------------------- outbound: the whole file in hand


async def test_an_attached_local_file_is_read_whole_with_its_name_and_type(tmp_path):
    path = tmp_path / "worksheet.pdf"
    path.write_bytes(b"%PDF-1.7 fractions")
    async with client(lambda r: httpx.Response(500)) as http:
        got = await read_attachment(http, Attachment(kind="file", path=str(path)), limit=100, platform="weixin")
        named = await read_attachment(http, Attachment(kind="file", path=str(path), name="第一课.pdf"), limit=100,
                                      platform="weixin")
    assert (got.data, got.name, got.content_type) == (b"%PDF-1.7 fractions", "worksheet.pdf", "application/pdf")
    assert named.name == "第一课.pdf"


async def test_an_attached_local_file_over_the_limit_or_missing_is_refused_by_name(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 101)
    async with client(lambda r: httpx.Response(500)) as http:
        with pytest.raises(TooLarge):
            await read_attachment(http, Attachment(kind="file", path=str(path)), limit=100, platform="weixin")
        with pytest.raises(BadRequest, match="gone.pdf cannot be read"):
            await read_attachment(http, Attachment(kind="file", path=str(tmp_path / "gone.pdf")), limit=100,
                                  platform="weixin")
        with pytest.raises(BadRequest, match="neither a path nor a URL"):
            await read_attachment(http, Attachment(kind="image"), limit=100, platform="weixin")


async def test_an_attached_url_is_downloaded_within_the_limit_and_named_by_its_path():
    def handler(request):
        return httpx.Response(200, content=b"\x89PNG diagram", headers={"Content-Type": "image/png"})

    async with client(handler) as http:
        got = await read_attachment(http, Attachment(kind="image", url="https://files.test/a/cell%20diagram.png"),
                                    limit=100, platform="weixin")
        with pytest.raises(TooLarge):
            await read_attachment(http, Attachment(kind="image", url="https://files.test/a/b.png"), limit=5,
                                  platform="weixin")
    assert (got.data, got.name, got.content_type) == (b"\x89PNG diagram", "cell diagram.png", "image/png")


async def test_an_attached_url_that_answers_5xx_is_transient():
    async with client(lambda r: httpx.Response(503)) as http:
        with pytest.raises(PeerUnavailable):
            await read_attachment(http, Attachment(kind="image", url="https://files.test/c.png"), limit=100,
                                  platform="weixin")
