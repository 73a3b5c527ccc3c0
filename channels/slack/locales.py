"""Each Slack learner's language, asked of ``users.info`` once a while, never holding up an ack.

Slack's events carry no locale; ``users.info`` with ``include_locale=true`` answers ``user.locale``
(``zh-CN``, ``en-US``; scope ``users:read``).  The channel asks it for the sender of each event it
is about to accept, inside Slack's 3 s ack deadline -- so the call is bounded by
``locale_timeout_s`` and whatever goes wrong (slow, rate-limited, no scope, no such user) leaves
the message as it was with locale ``""``: the notice comes in the partner's language, the message
is never lost or late.  The message is decoded before it is asked, so it carries its locale into
the store and a redelivery or a restart needs no second lookup.

Answers are kept per learner in a ``cachetools.TTLCache`` (one per account, so per account and
user), ``locale_cache_size`` of them for ``locale_cache_s``, the least recently used out first.  A refusal that will not
change by asking again (``missing_scope``, ``user_not_found``) is kept as ``""`` as long; a slow or
unavailable Slack is not kept, so the next message asks again.
"""

from __future__ import annotations

import asyncio
import logging

from cachetools import TTLCache
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.config import SlackConfig
from channels.slack.transport import call
from gateway.core.errors import GatewayError, PermanentError

log = logging.getLogger(__name__)


class SlackLocales:
    """The locale of a workspace's users, from users.info, remembered for a while."""

    def __init__(self, settings: SlackConfig, account: str) -> None:
        self.settings, self.account = settings, account
        self._known: TTLCache[str, str] = TTLCache(maxsize=settings.locale_cache_size, ttl=settings.locale_cache_s)

    async def of(self, client: AsyncWebClient, user: str) -> str:
        """``user``'s Slack locale, or ``""`` when it is off, unknown or not known in time."""
        if not self.settings.read_locale or not user:
            return ""
        known = self._known.get(user)
        if known is not None:
            return known
        try:
            said = await asyncio.wait_for(
                call("users.info", client.users_info(user=user, include_locale=True), self.settings.api_base),
                self.settings.locale_timeout_s)
        except TimeoutError:
            log.debug("slack locale unknown account=%s user=%s reason=no answer in %g s",
                      self.account, user, self.settings.locale_timeout_s)
            return ""
        except GatewayError as error:  # its message names the method and Slack's code, never a token
            log.debug("slack locale unknown account=%s user=%s reason=%s", self.account, user, error)
            if isinstance(error, PermanentError):
                self._known[user] = ""
            return ""
        found = said.get("user")
        locale = found.get("locale") if isinstance(found, dict) else None
        locale = locale if isinstance(locale, str) else ""
        self._known[user] = locale
        return locale
