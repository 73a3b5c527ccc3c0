"""The login a QR scan brought: the bot token and base URL, kept in the gateway's store, never in the config file.

A personal WeChat account has no secret a teacher could type: the token is
handed out when the teacher's WeChat confirms the QR login, and it ends when
the platform says the session expired.  So it is runtime state, like a poll
cursor, and lives where the cursors live -- the account's own namespace in
the store (:class:`~gateway.core.channel.CursorStore`) -- under
:data:`SESSION`.  Written by ``partners channels login weixin ACCOUNT``, read
when the account starts.  Whoever reads it registers the token with the log
scrubber before anything else can log.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from gateway.core.channel import CursorStore
from gateway.redaction import register_secret

SESSION = "ilink-session"
"""The store entry that holds :class:`IlinkSession` as JSON."""
CURSOR = "get_updates_buf"
"""The store entry that holds the long poll's position."""


class IlinkSession(BaseModel):
    """What a confirmed QR login returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: SecretStr
    base_url: str
    bot_id: str = ""
    """``ilink_bot_id``: which bot the token speaks as."""
    user_id: str = ""
    """``ilink_user_id``: the WeChat user who scanned (the teacher)."""

    def dump(self) -> str:
        """The JSON the store keeps, the token in clear: the store is where it lives, and nothing logs it."""
        return json.dumps({**self.model_dump(exclude={"token"}), "token": self.token.get_secret_value()})


async def load(cursors: CursorStore) -> IlinkSession | None:
    """The stored session, its token registered with the scrubber; None when the account never logged in."""
    raw = await cursors.get(SESSION)
    if not raw:
        return None
    try:
        session = IlinkSession.model_validate_json(raw)
    except ValidationError:
        return None
    register_secret(session.token.get_secret_value())
    return session


async def save(cursors: CursorStore, session: IlinkSession) -> None:
    """Keep a confirmed login (replacing the last); the poll position starts again with the new session."""
    register_secret(session.token.get_secret_value())
    await cursors.put(SESSION, session.dump())
    await cursors.put(CURSOR, "")
