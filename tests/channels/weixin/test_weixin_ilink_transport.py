"""The iLink API client against the emulator over loopback: the headers it sends, and every answer translated once."""

from __future__ import annotations

import pytest

from channels.weixin.ilink.transport import IlinkApi, SessionExpired
from gateway.core.errors import AuthFailed, BadRequest, PeerUnavailable, PeerUnreachable, RateLimited, ReplyWindowClosed
from tests.peers.weixin_ilink_server import IlinkPeer, serving


async def _with_api(peer: IlinkPeer, base: str, token: str | None = None) -> IlinkApi:
    return IlinkApi(base, token if token is not None else peer.token, account="school")


@pytest.mark.parametrize(("status", "body", "headers", "error"), [
    (200, {"ret": -14, "errmsg": "session timeout"}, {}, SessionExpired),
    (200, {"errcode": -14}, {}, SessionExpired),
    (429, {}, {"Retry-After": "3"}, RateLimited),
    (503, {}, {}, PeerUnavailable),
    (200, {"ret": 7, "errmsg": "something else"}, {}, BadRequest),
], ids=["ret-14", "errcode-14", "429", "503", "other-code"])
async def test_each_answer_is_one_error_of_the_tree(status, body, headers, error):
    peer = IlinkPeer(hold_s=0)
    async with serving(peer) as base:
        api = await _with_api(peer, base)
        try:
            peer.fail_next(status, body, headers)
            with pytest.raises(error) as raised:
                await api.get_updates("", timeout=1)
        finally:
            await api.close()
    if error is RateLimited:
        assert raised.value.retry_after == 3
    if error is SessionExpired:
        assert "scan again" in str(raised.value) and "partners channels login weixin school" in str(raised.value)
    assert peer.token not in str(raised.value)


async def test_a_wrong_token_is_auth_failed_and_never_named():
    peer = IlinkPeer(hold_s=0)
    async with serving(peer) as base:
        api = await _with_api(peer, base, token="tok-not-this-bots-0123456789")
        try:
            with pytest.raises(AuthFailed) as raised:
                await api.get_updates("", timeout=1)
        finally:
            await api.close()
    assert "tok-not-this-bots" not in str(raised.value)


async def test_a_stale_context_token_is_reply_window_closed():
    peer = IlinkPeer(hold_s=0)
    async with serving(peer) as base:
        api = await _with_api(peer, base)
        try:
            with pytest.raises(ReplyWindowClosed):
                await api.send_text("learner@im.wechat", "ctx-never-handed-out", "hi", client_id="k1")
            await peer.say("learner@im.wechat", "hello")
            context = peer.log[0]["context_token"]
            await api.send_text("learner@im.wechat", context, "hi", client_id="k2")
            peer.stale(context)
            with pytest.raises(ReplyWindowClosed):
                await api.send_text("learner@im.wechat", context, "again", client_id="k3")
        finally:
            await api.close()
    assert peer.texts_to("learner@im.wechat") == ["hi"]


async def test_a_peer_that_is_not_there_is_unreachable_with_its_address():
    api = IlinkApi("http://127.0.0.1:9/", "tok-x-0123456789abcdef", account="school")
    try:
        with pytest.raises(PeerUnreachable) as raised:
            await api.get_updates("", timeout=1)
    finally:
        await api.close()
    assert "127.0.0.1:9" in str(raised.value)
