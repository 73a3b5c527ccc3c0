"""The console's areas, each a module of its own that adds its pages and API routes.

An area is a function ``routes(console) -> list[BaseRoute]``: it builds its endpoints with the
console's ``guarded`` (sign-in, CSRF, administrators-only) and ``render``, and reads the running
gateway through ``console.gateway`` (:class:`gateway.console.services.ConsoleGateway`).  Who sees
what is decided by :class:`gateway.console.access.Viewer`, never in an area.  Adding an area is
one line here, its module, its templates, its words in ``texts.toml`` and its rows in
``tests/console/test_authorization.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from gateway.console import conversations, knowledge, learners, pairing

if TYPE_CHECKING:
    from gateway.console.pages import Console

Area = Callable[["Console"], list[BaseRoute]]


def _channels(console: Console) -> list[BaseRoute]:
    from gateway.console import channels, dashboard

    return [*channels.routes(console), *dashboard.routes(console)]


def _channel_accounts(console: Console) -> list[BaseRoute]:
    from gateway.console import accounts

    return accounts.routes(console)
def _partners(console: Console) -> list[BaseRoute]:
    from gateway.console import bindings, partners, personas

    return [*partners.routes(console), *personas.routes(console), *bindings.routes(console)]


AREAS: tuple[Area, ...] = (
    learners.routes,
    knowledge.routes,
    conversations.routes,
    pairing.routes,
    _channels,
    _channel_accounts,
    _partners,
)
