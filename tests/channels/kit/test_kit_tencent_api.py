"""The kit's Tencent-style API client over loopback HTTP: one token kept, renewed once when refused, errcodes translated.

The platform here is neither WeChat nor WeCom but what both are: a
:class:`~tests.peers.tencent_api.TencentPeer` with a token endpoint and one
call, so what is proved is the kit's part alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from channels._kit.http_errors import ErrorKind
from channels._kit.tencent_api import TOKEN_MARGIN_S, TencentApi, TokenFetch, errcodes
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    NotFound,
    PeerUnavailable,
    PeerUnreachable,
    RateLimited,
    ReplyWindowClosed,
)
from tests.peers.tencent_api import TencentPeer, serving
from tests.waits import HTTP_S

CODES = errcodes({"45009": ErrorKind.RATE_LIMITED, "40125": ErrorKind.AUTH_FAILED, "43004": ErrorKind.NOT_FOUND,
                  "-1": ErrorKind.UNAVAILABLE, "45015": ErrorKind.REPLY_WINDOW_CLOSED},
                 explained={"45015": "the reply window has closed"})


@dataclass
class Platform(TencentPeer):
    """A Tencent-style platform: ``cgi-bin/token`` for an id and secret, and ``cgi-bin/echo`` that keeps what it took."""

    appid: str = field(default_factory=lambda: "id" + secrets.token_hex(6))
    appsecret: str = field(default_factory=lambda: "sk" + secrets.token_hex(16))
    lasts: int = 7200
    answers_a_token: bool = True
    token_queries: list[dict[str, str]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    """Every body ``cgi-bin/echo`` took, as the bytes on the wire."""

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/cgi-bin/token", self._token), Route("/cgi-bin/echo", self._echo,
                                                                             methods=["POST"]),
                                 Route("/cgi-bin/broken", lambda request: Response("<html>bad gateway</html>", 502))])

    async def _token(self, request: Request) -> JSONResponse:
        query = dict(request.query_params)
        self.token_queries.append(query)
        if query.get("appid") != self.appid or query.get("secret") != self.appsecret:
            return self.error(40125, "invalid appsecret")
        if not self.answers_a_token:
            return JSONResponse({"errcode": 0, "errmsg": "ok"})
        return JSONResponse({"access_token": self.issue_token(), "expires_in": self.lasts})

    async def _echo(self, request: Request) -> JSONResponse:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        self.raw.append(await request.body())
        self.sent.append(json.loads(self.raw[-1]))
        return JSONResponse({"errcode": 0, "errmsg": "ok", "echoed": len(self.sent)})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fetch(platform: Platform, secret: str | None = None) -> TokenFetch:
    return TokenFetch(path="cgi-bin/token", params={"grant_type": "client_credential", "appid": platform.appid},
                      secret_param="secret", secret=SecretStr(secret or platform.appsecret),
                      account=f"appid={platform.appid}")


@contextlib.asynccontextmanager
async def api_for(platform: Platform, base: str, *, token_fetch: TokenFetch | None = None,
                  clock: Clock | None = None) -> AsyncIterator[TencentApi]:
    async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as client:
        yield TencentApi("tencentish", base, token_fetch or fetch(platform), CODES, client,
                         **({"clock": clock} if clock else {}))


async def test_one_token_serves_every_call_and_the_query_asks_for_it_secret_last():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            for n in range(3):
                assert (await api.call("cgi-bin/echo", {"n": n}))["echoed"] == n + 1
            assert platform.tokens_issued == 1 and api.fetched == 1
            assert list(platform.token_queries[0]) == ["grant_type", "appid", "secret"]


async def test_the_token_is_kept_until_the_margin_before_it_ends_then_fetched_again():
    platform = Platform(lasts=600)
    async with serving(platform) as base:
        clock = Clock()
        async with api_for(platform, base, clock=clock) as api:
            first = await api.token()
            clock.now += 600 - TOKEN_MARGIN_S - 1
            assert await api.token() == first and platform.tokens_issued == 1
            clock.now += 2
            second = await api.token()
            assert second != first and platform.tokens_issued == 2 and api.fetched == 2
            await api.call("cgi-bin/echo", {"after": "expiry"})
            assert platform.tokens_issued == 2


@pytest.mark.parametrize("code", [40001, 42001, 40014])
async def test_a_stale_token_code_fetches_one_new_token_and_tries_the_call_once_more(code):
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            await api.token()
            platform.fail_next(code)
            assert (await api.call("cgi-bin/echo", {"text": "again"}))["echoed"] == 1
            assert platform.refused == [code] and platform.tokens_issued == 2
            assert [m["text"] for m in platform.sent] == ["again"]  # taken once


async def test_a_token_the_platform_ended_is_replaced_on_the_next_call():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            await api.call("cgi-bin/echo", {"n": 1})
            platform.expire_token()
            await api.call("cgi-bin/echo", {"n": 2})
            assert platform.refused == [42001] and platform.tokens_issued == 2 and len(platform.sent) == 2


async def test_a_second_stale_answer_is_auth_failed_not_a_loop():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            platform.fail_next(40001)
            platform.fail_next(42001)
            with pytest.raises(AuthFailed) as caught:
                await api.call("cgi-bin/echo", {"n": 1})
            assert caught.value.code == "42001" and "cgi-bin/echo" in str(caught.value)
            assert platform.tokens_issued == 2 and platform.refused == [40001, 42001] and platform.sent == []


async def test_calls_that_start_together_fetch_one_token():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            answers = await asyncio.gather(*(api.call("cgi-bin/echo", {"n": n}) for n in range(8)))
            assert platform.tokens_issued == 1 and api.fetched == 1
            assert sorted(a["echoed"] for a in answers) == list(range(1, 9))


async def test_two_calls_refused_together_replace_the_token_once():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            await api.token()
            platform.expire_token()
            await asyncio.gather(api.call("cgi-bin/echo", {"n": 1}), api.call("cgi-bin/echo", {"n": 2}))
            assert platform.refused == [42001, 42001] and platform.tokens_issued == 2 and len(platform.sent) == 2


@pytest.mark.parametrize(("code", "error"), [
    (45009, RateLimited), (43004, NotFound), (-1, PeerUnavailable), (45015, ReplyWindowClosed),
    (45002, BadRequest), (44004, BadRequest),
])
async def test_errcodes_inside_a_200_are_translated_by_the_channels_table(code, error):
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            platform.fail_next(code)
            with pytest.raises(error) as caught:
                await api.call("cgi-bin/echo", {"n": 1})
            assert caught.value.code == str(code) and type(caught.value) is error
            assert platform.tokens_issued == 1  # not a stale-token code: no second token, no second try


async def test_the_channels_own_words_replace_a_misleading_errmsg():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            platform.fail_next(45015)
            with pytest.raises(ReplyWindowClosed) as caught:
                await api.call("cgi-bin/echo", {"n": 1})
            assert str(caught.value).endswith("cgi-bin/echo: the reply window has closed")
            assert "injected" not in str(caught.value)


async def test_a_refused_secret_is_auth_failed_and_the_secret_is_never_said(caplog):
    caplog.set_level(logging.DEBUG)
    platform = Platform()
    wrong = "sk" + secrets.token_hex(16)
    async with serving(platform) as base:
        async with api_for(platform, base, token_fetch=fetch(platform, wrong)) as api:
            with pytest.raises(AuthFailed) as caught:
                await api.call("cgi-bin/echo", {"n": 1})
            assert caught.value.code == "40125" and wrong not in str(caught.value)
            assert wrong not in caplog.text and wrong not in repr(fetch(platform, wrong))
        async with api_for(platform, base) as good:
            await good.call("cgi-bin/echo", {"n": 1})
            assert platform.appsecret not in caplog.text and f"appid={platform.appid}" in caplog.text


async def test_a_token_answer_without_a_token_is_the_platform_unavailable():
    platform = Platform(answers_a_token=False)
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            with pytest.raises(PeerUnavailable) as caught:
                await api.token()
            assert "cgi-bin/token: the answer has no access_token" in str(caught.value)


async def test_a_5xx_is_unavailable_and_a_closed_port_names_the_origin_not_the_url():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            with pytest.raises(PeerUnavailable) as caught:
                await api.request("cgi-bin/broken", params={"access_token": "x"})
            assert not isinstance(caught.value, PeerUnreachable) and "HTTP 502" in str(caught.value)
    async with api_for(platform, base) as api:  # the server has stopped: nobody listens on its port
        with pytest.raises(PeerUnreachable) as unreachable:
            await api.token()
        said = str(unreachable.value)
        assert base.rstrip("/") in said and "cgi-bin/token" in said and platform.appsecret not in said


async def test_a_body_goes_as_utf8_json_not_escapes():
    platform = Platform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            await api.call("cgi-bin/echo", {"text": "你好，学生"})
            assert "你好，学生".encode() in platform.raw[0] and b"\\u" not in platform.raw[0]


async def test_a_client_it_made_is_closed_and_one_it_was_handed_is_not():
    platform = Platform()
    async with serving(platform) as base:
        handed = httpx.AsyncClient(timeout=HTTP_S, trust_env=False)
        api = TencentApi("tencentish", base, fetch(platform), CODES, handed)
        await api.close()
        assert not handed.is_closed
        await handed.aclose()
        own = TencentApi("tencentish", base, fetch(platform), CODES)
        await own.token()
        await own.close()
        assert own._client.is_closed


@dataclass
class FilePlatform(Platform):
    """The same platform with files: ``cgi-bin/file/up`` takes multipart ``media``, ``cgi-bin/file/get`` serves it."""

    files: dict[str, bytes] = field(default_factory=dict)

    def app(self) -> Starlette:
        app = super().app()
        app.router.routes += [Route("/cgi-bin/file/up", self._up, methods=["POST"]), Route("/cgi-bin/file/get", self._get)]
        return app

    async def _up(self, request: Request) -> JSONResponse:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        body, kind = await request.body(), request.headers["content-type"]
        assert kind.startswith("multipart/form-data") and b'name="media"; filename="plan.txt"' in body
        media_id = "F" + secrets.token_hex(4)
        self.files[media_id] = body.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n--", 1)[0]
        return JSONResponse({"errcode": 0, "media_id": media_id, "kind": request.query_params["type"]})

    async def _get(self, request: Request) -> Response:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        data = self.files.get(request.query_params.get("media_id", ""))
        if data is None:
            return self.error(40007, "invalid media_id")
        return Response(data, media_type="text/plain", headers={"Content-Disposition": 'attachment; filename="plan.txt"'})


async def test_a_file_goes_up_as_multipart_and_comes_back_streamed_each_under_a_fresh_token_once():
    platform = FilePlatform()
    async with serving(platform) as base:
        async with api_for(platform, base) as api:
            await api.token()
            platform.fail_next(42001)
            said = await api.upload_file("cgi-bin/file/up", {"type": "file"}, "media", "plan.txt", b"week 1: fractions",
                                         "text/plain")
            assert said["kind"] == "file" and list(platform.files.values()) == [b"week 1: fractions"]
            platform.fail_next(40014)
            async with api.media("cgi-bin/file/get", {"media_id": said["media_id"]}, limit=100) as stream:
                got = b"".join([chunk async for chunk in stream.chunks])
            assert got == b"week 1: fractions" and stream.name == "plan.txt"  # text/plain, yet no errcode: the file
            assert platform.refused == [42001, 40014] and platform.tokens_issued == 3
            with pytest.raises(BadRequest, match="invalid media_id"):
                async with api.media("cgi-bin/file/get", {"media_id": "gone"}, limit=100):
                    pass
