"""HTTP answers -> the gateway's error tree: statuses, Retry-After in all its forms, codes inside 200 bodies."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from channels._kit.http_errors import (
    BodyCodes,
    ErrorKind,
    raise_for,
    rate_limit_scope,
    retry_after,
    status_kind,
    translate,
)
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    Forbidden,
    NotFound,
    PeerUnavailable,
    PermanentError,
    RateLimited,
    ReplyWindowClosed,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()

SLACK = BodyCodes(code_field="error", ok_field="ok", kinds={
    "ratelimited": ErrorKind.RATE_LIMITED, "invalid_auth": ErrorKind.AUTH_FAILED, "token_revoked": ErrorKind.AUTH_FAILED,
    "not_in_channel": ErrorKind.FORBIDDEN, "channel_not_found": ErrorKind.NOT_FOUND,
})
WECHAT = BodyCodes(code_field="errcode", kinds={"45009": ErrorKind.RATE_LIMITED, "40001": ErrorKind.AUTH_FAILED,
                                                "-1": ErrorKind.UNAVAILABLE})
FEISHU = BodyCodes(code_field="code", kinds={"99991400": ErrorKind.RATE_LIMITED, "99991663": ErrorKind.AUTH_FAILED})


@pytest.mark.parametrize("status, error", [
    (401, AuthFailed), (403, Forbidden), (404, NotFound), (408, PeerUnavailable), (429, RateLimited),
    (500, PeerUnavailable), (502, PeerUnavailable), (400, BadRequest), (413, BadRequest), (422, BadRequest),
])
def test_each_status_has_one_meaning(status, error):
    translated = translate("discord", "POST /channels/1/messages", status, {}, None)
    assert type(translated) is error and translated.platform == "discord" and translated.code == status


def test_403_is_that_target_only_never_the_account():
    forbidden = translate("discord", "send", 403, {}, {"message": "Missing Permissions", "code": 50013})
    assert isinstance(forbidden, PermanentError) and isinstance(forbidden, NotFound)
    assert not isinstance(forbidden, AuthFailed)
    assert str(forbidden) == "discord says 403: send: Missing Permissions"


def test_success_is_no_error():
    assert translate("discord", "send", 200, {}, {"id": "1"}) is None
    assert translate("discord", "send", 204, {}, None) is None
    assert status_kind(None) is None


def test_a_platform_can_say_what_its_own_statuses_mean():
    assert status_kind(404, {404: ErrorKind.AUTH_FAILED}) is ErrorKind.AUTH_FAILED  # Telegram: a bad token is 404
    assert status_kind(404) is ErrorKind.NOT_FOUND


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize("headers, body, seconds", [
    ({"Retry-After": "3"}, None, 3.0),
    ({"retry-after": "1.5"}, None, 1.5),
    ({"Retry-After": format_datetime(datetime(2026, 1, 2, 3, 4, 35, tzinfo=UTC), usegmt=True)}, None, 30.0),
    ({"Retry-After": format_datetime(datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC), usegmt=True)}, None, 0.0),
    ({"X-RateLimit-Reset-After": "0.347", "Retry-After": "1"}, None, 0.347),
    ({"Retry-After": "1"}, {"message": "You are being rate limited.", "retry_after": 0.64, "global": False}, 0.64),
    ({}, {"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 2500}, 2.5),
    ({}, {"ok": False, "error_code": 429, "parameters": {"retry_after": 7}}, 7.0),
    ({}, None, None),
    ({"Retry-After": "soon"}, None, None),
    ({"Retry-After": "-4"}, None, None),
    ({}, {"retry_after": "nan"}, None),
    ({}, {"retry_after": True}, None),
])
def test_retry_after_in_all_its_forms(headers, body, seconds):
    found = retry_after(headers, body, now=NOW)
    assert found is None if seconds is None else found == pytest.approx(seconds)


def test_a_channel_can_name_its_own_retry_field_and_unit():
    assert retry_after({}, {"data": {"wait_ms": 1200}}, fields={"data.wait_ms": 0.001}) == pytest.approx(1.2)


def test_a_429_carries_the_pause_and_discords_global_scope():
    body = {"message": "You are being rate limited.", "retry_after": 64.57, "global": True}
    limited = translate("discord", "send", 429, {"X-RateLimit-Scope": "global", "Retry-After": "65"}, body)
    assert isinstance(limited, RateLimited) and limited.retry_after == pytest.approx(64.57) and limited.scope == "global"
    per_route = translate("discord", "send", 429, {"X-RateLimit-Scope": "user", "Retry-After": "2"}, {})
    assert isinstance(per_route, RateLimited) and per_route.retry_after == 2.0 and per_route.scope == "chat"


def test_a_429_without_a_hint_still_pauses():
    limited = translate("teams", "send", 429, {}, None)
    assert isinstance(limited, RateLimited) and limited.retry_after > 0


def test_scope_from_each_of_discords_signs():
    assert rate_limit_scope({"X-RateLimit-Global": "true"}) == "global"
    assert rate_limit_scope({}, {"global": True}) == "global"
    assert rate_limit_scope({"X-RateLimit-Scope": "shared"}) == "chat"


# --------------------------------------------------------------------------- codes inside 200 bodies


def test_slacks_ok_false_inside_a_200_is_an_error_by_its_table():
    assert isinstance(translate("slack", "chat.postMessage", 200, {}, {"ok": False, "error": "invalid_auth"},
                                codes=SLACK), AuthFailed)
    forbidden = translate("slack", "chat.postMessage", 200, {}, {"ok": False, "error": "not_in_channel"}, codes=SLACK)
    assert isinstance(forbidden, Forbidden) and forbidden.code == "not_in_channel"
    assert translate("slack", "chat.postMessage", 200, {}, {"ok": True, "ts": "1.2"}, codes=SLACK) is None


def test_slacks_ratelimited_takes_the_pause_from_the_header():
    limited = translate("slack", "chat.postMessage", 429, {"Retry-After": "30"},
                        {"ok": False, "error": "ratelimited"}, codes=SLACK)
    assert isinstance(limited, RateLimited) and limited.retry_after == 30.0 and limited.code == "ratelimited"


def test_wechat_errcodes_inside_a_200():
    limited = translate("weixin", "message/custom/send", 200, {},
                        {"errcode": 45009, "errmsg": "reach max api daily quota limit"}, codes=WECHAT)
    assert isinstance(limited, RateLimited) and limited.code == "45009"
    assert str(limited) == "weixin says 45009: retry after 1 s"  # RateLimited words its own message
    assert isinstance(translate("weixin", "send", 200, {}, {"errcode": -1, "errmsg": "system busy"}, codes=WECHAT),
                      PeerUnavailable)
    assert translate("weixin", "send", 200, {}, {"errcode": 0, "errmsg": "ok"}, codes=WECHAT) is None


def test_feishu_codes_and_a_code_the_table_does_not_name():
    assert isinstance(translate("feishu", "im/v1/messages", 200, {}, {"code": 99991400, "msg": "too many requests"},
                                codes=FEISHU), RateLimited)
    unknown = translate("feishu", "im/v1/messages", 200, {}, {"code": 230001, "msg": "invalid receive_id"}, codes=FEISHU)
    assert type(unknown) is BadRequest and unknown.code == "230001"
    assert translate("feishu", "im/v1/messages", 200, {}, {"code": 0, "data": {}}, codes=FEISHU) is None


def test_an_unnamed_code_on_an_error_status_takes_the_statuss_meaning():
    answer = translate("feishu", "im/v1/messages", 503, {}, {"code": 1234, "msg": "internal"}, codes=FEISHU)
    assert isinstance(answer, PeerUnavailable)


def test_a_code_can_say_the_reply_token_is_gone_where_the_status_says_only_404():
    discord = BodyCodes(code_field="code", kinds={"10015": ErrorKind.REPLY_WINDOW_CLOSED})
    gone = translate("discord", "followup", 404, {}, {"message": "Unknown Webhook", "code": 10015}, codes=discord)
    assert isinstance(gone, ReplyWindowClosed) and "Unknown Webhook" in str(gone)
    other = translate("discord", "send", 404, {}, {"message": "Unknown Channel", "code": 10003}, codes=discord)
    assert isinstance(other, NotFound) and not isinstance(other, ReplyWindowClosed)


def test_a_body_that_is_no_json_object_carries_no_code():
    assert translate("slack", "x", 200, {}, "<html>", codes=SLACK) is None
    error = translate("slack", "x", 502, {}, "<html>bad gateway</html>", codes=SLACK)
    assert isinstance(error, PeerUnavailable) and "HTTP 502" in str(error)


# --------------------------------------------------------------------------- straight from httpx


async def test_raise_for_reads_an_httpx_answer_over_the_transport_seam():
    answers = iter([
        httpx.Response(200, json={"ok": True, "ts": "1.2"}),
        httpx.Response(200, json={"ok": False, "error": "not_in_channel"}),
        httpx.Response(429, headers={"Retry-After": "7"}, json={"ok": False, "error": "ratelimited"}),
        httpx.Response(502, text="<html>bad gateway</html>"),
    ])
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda request: next(answers))) as http:
        sent = [await http.post("https://slack.example.test/api/chat.postMessage") for _ in range(4)]
    assert raise_for("slack", "chat.postMessage", sent[0], codes=SLACK) == {"ok": True, "ts": "1.2"}
    with pytest.raises(Forbidden):
        raise_for("slack", "chat.postMessage", sent[1], codes=SLACK)
    with pytest.raises(RateLimited) as limited:
        raise_for("slack", "chat.postMessage", sent[2], codes=SLACK)
    assert limited.value.retry_after == 7.0
    with pytest.raises(PeerUnavailable):
        raise_for("slack", "chat.postMessage", sent[3], codes=SLACK)


def test_a_closed_reply_window_code_is_reply_window_closed_not_a_bad_request():
    """A WeCom stream updated past its time answers errcode 846608: the reply must go another way."""
    from gateway.core.errors import ReplyWindowClosed

    codes = BodyCodes(code_field="errcode", kinds={"846608": ErrorKind.REPLY_WINDOW_CLOSED})
    error = translate("wecom", "aibot_respond_msg", None, {}, {"errcode": 846608, "errmsg": "stream expired"},
                      codes=codes)
    assert isinstance(error, ReplyWindowClosed)
    assert error.code == "846608" and "stream expired" in str(error)


def test_a_table_can_word_a_code_itself_where_the_platforms_message_misleads():
    """WeChat's 45015 says "subscription is canceled" when only the learner's 48-hour window has closed."""
    codes = BodyCodes(code_field="errcode", kinds={"45015": ErrorKind.REPLY_WINDOW_CLOSED},
                      explained={"45015": "the learner's 48-hour window has closed"})
    error = translate("weixin", "cgi-bin/message/custom/send", 200, {},
                      {"errcode": 45015, "errmsg": "response out of time limit or subscription is canceled"}, codes=codes)
    assert isinstance(error, ReplyWindowClosed) and error.code == "45015"
    assert str(error).endswith("cgi-bin/message/custom/send: the learner's 48-hour window has closed")
    other = translate("weixin", "send", 200, {}, {"errcode": 45009, "errmsg": "api quota"}, codes=codes)
    assert "api quota" in str(other)  # a code the table does not word keeps the platform's message
