"""The GET handshakes: Meta's hub.challenge, WeChat's and WeCom's echostr, through a real request's query."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from channels._kit.challenges import (
    challenge_json,
    challenge_response,
    meta_challenge,
    url_verification,
    wechat_echostr,
    wecom_echostr,
)
from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import wechat_signature
from gateway.core.errors import ForgedRequest

WECOM_QUERY = {  # WeCom's documented URL check (W2)
    "msg_signature": "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3", "timestamp": "1409659589", "nonce": "263014780",
    "echostr": "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ==",
}
WECOM = WechatCrypto("jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", "wx5823bf96d3bd56c7")


def meta_query(**override: str) -> dict[str, str]:
    return {"hub.mode": "subscribe", "hub.verify_token": "teacher-typed-this", "hub.challenge": "1158201444", **override}


def test_meta_gets_its_challenge_back_for_the_right_token():
    assert meta_challenge(meta_query(), "teacher-typed-this") == "1158201444"


@pytest.mark.parametrize("query, reason", [
    (meta_query(**{"hub.verify_token": "guess"}), "bad_token"),
    (meta_query(**{"hub.mode": "unsubscribe"}), "malformed"),
    ({"hub.mode": "subscribe", "hub.verify_token": "teacher-typed-this"}, "missing_header"),
])
def test_meta_is_refused_for_anything_else(query, reason):
    with pytest.raises(ForgedRequest) as error:
        meta_challenge(query, "teacher-typed-this")
    assert error.value.reason == reason


def test_wechat_gets_its_echostr_back_once_the_signature_verifies():
    query = {"timestamp": "1409304348", "nonce": "xxxxxx", "echostr": "5837397520665436492"}
    query["signature"] = wechat_signature("pamtest", query["timestamp"], query["nonce"])
    assert wechat_echostr(query, "pamtest") == "5837397520665436492"
    with pytest.raises(ForgedRequest):
        wechat_echostr(query, "another-token")


def test_wecom_gets_the_decrypted_echostr_of_its_documented_example():
    assert wecom_echostr(WECOM_QUERY, "QDG6eK", WECOM) == "1616140317555161061"


async def test_the_echostr_survives_the_url_and_comes_back_as_bare_text():
    """The echostr holds '+', '/' and '=': read from a real request's query it must still verify."""

    async def verify(request: Request) -> Response:
        return challenge_response(wecom_echostr(request.query_params, "QDG6eK", WECOM))

    app = Starlette(routes=[Route("/webhooks/wecom/main", verify)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway.test") as http:
        response = await http.get("/webhooks/wecom/main", params=WECOM_QUERY)
    assert response.status_code == 200
    assert response.text == "1616140317555161061" and response.headers["content-type"].startswith("text/plain")


def test_a_url_verification_post_gives_its_challenge_and_other_events_none():
    slack = {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
             "type": "url_verification"}
    assert url_verification(slack) == slack["challenge"]
    assert url_verification({"type": "event_callback", "event": {}}) is None
    assert challenge_json("abc").body == b'{"challenge":"abc"}'


def test_feishus_url_verification_must_carry_the_verification_token():
    event = {"challenge": "ajls384kdjx98XX", "token": "xxxxxx", "type": "url_verification"}
    assert url_verification(event, verification_token="xxxxxx") == "ajls384kdjx98XX"
    for bad, reason in [({**event, "token": "guess"}, "bad_token"), ({k: v for k, v in event.items() if k != "token"},
                                                                     "bad_token"),
                        ({k: v for k, v in event.items() if k != "challenge"}, "malformed")]:
        with pytest.raises(ForgedRequest) as error:
            url_verification(bad, verification_token="xxxxxx")
        assert error.value.reason == reason
