"""JSON bodies nested past any real payload, or not UTF-8: a 400 with one line, never a 500.

``json.loads`` raises ``RecursionError`` (no ``ValueError``) on a body of
1,000 ``[``, which was a 500 -- and Telegram retries a 500 for ever.  Every
HTTP body the gateway parses goes through :func:`gateway.jsonbody.decode_json`.
"""

from __future__ import annotations

import json

import httpx
import pytest

from channels.webchat.identity import COOKIE
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.errors import InvalidEvent
from gateway.http.app import build_app
from gateway.jsonbody import MAX_DEPTH, decode_json, too_deep
from tests.channels.telegram.conftest import open_rig  # noqa: F401 -- the fixture, for the webhook rig
from tests.channels.telegram.test_telegram_webhook import (
    SECRET,
    inbound_rows,
    webhook_rig,
)
from tests.channels.test_webchat import served  # noqa: F401 -- the fixture, a web chat on the HTTP app

BOMB = b'{"update_id": 1, "message": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def test_depth_is_counted_without_parsing_and_text_does_not_count():
    assert not too_deep(nested(MAX_DEPTH)) and too_deep(nested(MAX_DEPTH + 1))
    text = json.dumps({"text": "[" * 500 + '\\"{' * 100}).encode()
    assert not too_deep(text) and decode_json(text) == json.loads(text)
    assert too_deep(b'{"a": "\\\\", "b": ' + nested(MAX_DEPTH) + b"}")  # an escaped backslash ends no string


@pytest.mark.parametrize(("body", "said"), [
    (nested(100_000), f"the request body nests deeper than {MAX_DEPTH} levels"),
    (b"{not json", "the request body is not JSON"),
    ('{"text": "café"}'.encode("latin-1"), "the request body is not UTF-8 (byte 0xe9 at offset 13)"),
])
def test_every_failure_is_one_invalid_event(body, said):
    with pytest.raises(InvalidEvent) as caught:
        decode_json(body)
    assert str(caught.value) == said


async def test_a_deep_telegram_webhook_body_is_a_400_not_a_500(open_rig):  # noqa: F811 -- the fixture above
    async with webhook_rig(open_rig) as (rig, http, _):
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        answer = await http.post("/webhooks/telegram/main", content=BOMB, headers=headers)
        assert answer.status_code == 400
        assert answer.json() == {"error": f"invalid event: telegram webhook body nests deeper than {MAX_DEPTH} levels"}
        assert inbound_rows(rig, "1") == 0


@pytest.fixture
async def admin(tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_TOKEN", "s3cret-token")
    config = parse_config({
        "data_dir": str(tmp_path), "http": {"admin_token": "env:ADMIN_TOKEN"},
        "partners": [{"id": "tutor", "name": "Tutor", "owners": [{"channel": "console", "user": "teacher"}]}],
    })
    from tests.http.test_admin_api import remember_ann

    await remember_ann(config)
    app = build_app(Gateway(config))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


@pytest.mark.parametrize(("body", "said"), [
    (b'{"markdown": ' + nested(5000) + b"}", f"the request body nests deeper than {MAX_DEPTH} levels"),
    ('{"markdown": "café"}'.encode("latin-1"), "the request body is not UTF-8 (byte 0xe9 at offset 17)"),
], ids=["deep", "latin-1"])
async def test_a_deep_or_non_utf8_admin_put_is_a_400(admin, body, said):
    url = "/api/v1/partners/tutor/learners/webchat:default:ann/memory"
    answer = await admin.put(url, content=body, headers={"Authorization": "Bearer s3cret-token"})
    assert answer.status_code == 400
    assert answer.json() == {"error": f'{said}; send JSON {{"markdown": "..."}}'}


@pytest.mark.parametrize("body", [b'{"message_id": "m1", "text": ' + nested(100) + b"}",
                                  '{"message_id": "m1", "text": "café"}'.encode("latin-1")],
                         ids=["deep", "latin-1"])
async def test_a_deep_or_non_utf8_web_chat_post_is_a_400(served, body):  # noqa: F811 -- the fixture above
    headers = {"content-type": "application/json", "cookie": f"{COOKIE}={'s' * 30}"}
    answer = await served.http.post("/api/messages", content=body, headers=headers)
    assert answer.status_code == 400
    assert answer.json() == {"error": "the body must be a JSON object {message_id, text}"}
    assert served.sink.calls == 0
