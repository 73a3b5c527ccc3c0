"""The first administrator, from a one-time link ``partners serve`` prints when the console has no user.

A gateway someone started for a teacher has no console account yet, and the teacher may never open
a terminal.  So each start that finds no console user makes a random token, keeps only its digest
(:mod:`gateway.store.console`) with an expiry of :data:`~gateway.console.signin.SETUP_TTL_S`, voids
any earlier unused one, and hands ``/console/setup?token=...`` to the caller to print -- on the
terminal, once, never in a log: the token is registered with the log scrubber
(:func:`gateway.redaction.register_secret`) before anything could log it.  The link makes one
administrator and then stops working, as it does once any user exists (one made by
``partners console add-user`` included).
"""

from __future__ import annotations

from urllib.parse import quote

from gateway.console.signin import SETUP_TTL_S, new_secret
from gateway.redaction import register_secret
from gateway.store.console import ConsoleStore

SETUP_PATH = "/console/setup"


async def first_start_token(store: ConsoleStore) -> str | None:
    """A new setup token (any earlier unused one voided), or None when the console already has a user."""
    if await store.console_user_count() > 0:
        return None
    token = new_secret()
    register_secret(token, "console setup token")
    await store.issue_setup_token(token, SETUP_TTL_S)
    return token


def setup_link(base_url: str, token: str) -> str:
    """The address to open: ``http.public_url`` when set, else the address the gateway listens on."""
    return f"{base_url.rstrip('/')}{SETUP_PATH}?token={quote(token, safe='')}"
