"""A served gateway with its real brain, the model being the stub over HTTP, and console users.

The console tests whose page shows what a model did -- the dashboard's tokens and cost, an answer
built from a document uploaded in the console -- need the gateway to build its own brain (no
``PARTNERS_RESPONDER``) and a model to call: :class:`tests.peers.model_stub.ModelStub`, scripted by
the test.  The one partner is the end-to-end rig's ``buddy`` (:func:`tests.e2e.rig.e2e_config`) on the
web chat, owned by Ada (``telegram:100``) unless the test says otherwise.  Such a test asks for the
``real_brain`` fixture (``tests/console/conftest.py``), which sets the stub's key and clears any responder.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.store.console import ConsoleUser
from tests.console.rig import ADA_ID, Served
from tests.e2e.rig import e2e_config, served

STUB_KEY = "sk-console-brain-heron-4417"
"""The stub model's key (it checks none; naming one runs the config's secret handling)."""


@contextlib.asynccontextmanager
async def brain_console(data_dir: Any, api_base: str, *users: ConsoleUser, owner: str = ADA_ID,
                        model: dict[str, Any] | None = None) -> AsyncIterator[Served]:
    """The gateway on ``data_dir`` with the partner's model at ``api_base`` (``model`` adds to its settings)
    and ``users`` able to sign in to its console."""
    raw = e2e_config(data_dir, api_base)
    channel, user_id = owner.split(":", 1)
    raw["partners"][0]["owners"] = [{"channel": channel, "user": user_id}]
    raw["partners"][0]["model"] |= model or {}
    async with Gateway(parse_config(raw)) as gateway, served(gateway) as url:
        for made in users:
            assert await gateway.store.add_console_user(made)
        yield Served(url, gateway)
