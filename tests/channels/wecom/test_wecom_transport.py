"""The SDK's failures, which it raises as bare exceptions, read back into the error tree once.

The texts are wecom-aibot-sdk 1.0.8's own (ws.py): a refused reply is
``Reply ack error: errcode=N, errmsg=...``, a reply WeCom never acked is
``Reply ack timeout (5.0s) for reqId: ...``.
"""

from __future__ import annotations

import pytest

from channels.wecom.transport import translate_error
from gateway.core.errors import BadRequest, PeerUnavailable, RateLimited, ReplyWindowClosed


@pytest.mark.parametrize("said, error", [
    ("Reply ack error: errcode=846608, errmsg=stream message update expired", ReplyWindowClosed),
    ("Reply ack error: errcode=846605, errmsg=invalid req_id", ReplyWindowClosed),
    ("Reply ack error: errcode=45009, errmsg=api freq out of limit", RateLimited),
    ("Reply ack error: errcode=40099, errmsg=something new", BadRequest),
    ("Reply ack timeout (5.0s) for reqId: req1", PeerUnavailable),
])
def test_each_sdk_failure_has_one_meaning(said, error):
    translated = translate_error(Exception(said), "aibot_respond_msg")
    assert type(translated) is error
    assert translated.platform == "wecom"


def test_the_code_and_the_platforms_words_are_kept():
    translated = translate_error(Exception("Reply ack error: errcode=846608, errmsg=stream message update expired"),
                                 "aibot_respond_msg")
    assert translated.code == "846608"
    assert str(translated) == "wecom says 846608: aibot_respond_msg: stream message update expired"


def test_a_closed_socket_is_unavailable_not_a_bad_request():
    translated = translate_error(ConnectionError("WebSocket not connected, unable to send data"), "aibot_send_msg")
    assert type(translated) is PeerUnavailable and "not open" in str(translated)
