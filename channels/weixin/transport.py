"""The wire to WeChat's API for an Official Account: ``access_token``, customer-service messages, errors translated once.

Every call but ``cgi-bin/token`` carries an ``access_token``, got from appid and
appsecret and good for ``expires_in`` seconds (7,200).  The kit's
:class:`~channels._kit.tencent_api.TencentApi` keeps it until a minute before it
expires and fetches it again once, at most, when WeChat says it is no longer
good (40001 invalid, 42001 expired, 40014 not a token); this module holds what
is WeChat's own: the token query, the errcode table and the calls.

WeChat answers 200 with ``{"errcode": N, "errmsg": ...}`` on failure; the
kit's :class:`~channels._kit.http_errors.BodyCodes` translates the codes, most
specific first::

    45015 out of the 48-hour window, 45047 customer-service quota used up  -> ReplyWindowClosed
    45009 API quota reached, 45011 too often                               -> RateLimited
    40001, 42001, 40014 (after the one refresh), 40125 bad appsecret,
    40164 / 61004 caller's IP not in the allow-list                        -> AuthFailed
    43004 the learner unfollowed, 40003 not an OpenID of this account       -> NotFound
    -1 system busy, HTTP 5xx                                               -> PeerUnavailable
    45002 content too long, any other code                                 -> BadRequest

The appsecret and the token are in query strings, so no URL is ever logged or
put in an error message: errors name the API path only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from channels._kit.http_errors import ErrorKind
from channels._kit.tencent_api import TencentApi, TokenFetch, errcodes
from channels.weixin.config import OfficialAccountConfig

PLATFORM = "weixin"
CODES = errcodes({
    "45015": ErrorKind.REPLY_WINDOW_CLOSED, "45047": ErrorKind.REPLY_WINDOW_CLOSED,
    "45009": ErrorKind.RATE_LIMITED, "45011": ErrorKind.RATE_LIMITED,
    "40125": ErrorKind.AUTH_FAILED, "40013": ErrorKind.AUTH_FAILED, "40164": ErrorKind.AUTH_FAILED,
    "61004": ErrorKind.AUTH_FAILED, "43004": ErrorKind.NOT_FOUND, "40003": ErrorKind.NOT_FOUND,
    "-1": ErrorKind.UNAVAILABLE,
}, explained={
    "45015": "the learner's 48-hour customer-service window has closed",
    "45047": "the customer-service messages allowed for the learner's last message are used up",
})


class OfficialAccountApi(TencentApi):
    """One account's calls to WeChat, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, config: OfficialAccountConfig, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        fetch = TokenFetch(path="cgi-bin/token", params={"grant_type": "client_credential", "appid": config.appid},
                           secret_param="secret", secret=config.appsecret, account=f"appid={config.appid}")
        super().__init__(PLATFORM, config.api_base, fetch, CODES, client, clock=clock)

    async def send_text(self, openid: str, content: str) -> None:
        """One customer-service text message to the learner (``cgi-bin/message/custom/send``)."""
        await self.call("cgi-bin/message/custom/send", {"touser": openid, "msgtype": "text", "text": {"content": content}})
