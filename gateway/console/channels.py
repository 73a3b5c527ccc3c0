"""The console's channels page: every channel account a viewer may see, its live state, and its switches.

==============================================  ====  ===================================================
route                                           verb  viewer -> answer
==============================================  ====  ===================================================
``/console/channels``                           GET   signed in 200: the accounts :class:`Viewer` sees
``/console/api/channels``                       GET   signed in 200 (the same, as JSON); stranger 401
``/console/channels/{channel}/{account}/{do}``  POST  the form: 303 back to the page
``/console/api/channels/{channel}/{account}/    POST  JSON: 200 with the account as it now is
{do}``
==============================================  ====  ===================================================

``do`` is ``disable``, ``enable`` or ``restart``.  An account the viewer does not see, or an unknown
one, is 404; one they see but may not operate (another teacher's partner is bound to it too) is 403;
restarting a disabled account is 409 (enable it).  The state and reason are the supervisor's, as
``/status`` reports them; a disabled account is stored (``channel_switches``), so it stays stopped
when the gateway starts again (ADR 0036, addendum).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer, bound_partners
from gateway.console.openapi import Operation, describe
from gateway.console.pages import HEADERS, Console
from gateway.console.services import ConsoleGateway
from gateway.core.config import Config
from gateway.http.responses import error_response
from gateway.store.console import ConsoleSession

log = logging.getLogger(__name__)

ACTIONS = ("disable", "enable", "restart")


class ChannelAccount(BaseModel):
    """One channel account as the console lists it."""

    channel: str
    account: str
    partners: list[str]
    """The partners bound to it (ids), in sight of this viewer or not -- a teacher sees that it is shared."""
    state: str
    """``running``, ``connecting``, ``action_required``, ``error``, ``stopped``, or ``unavailable`` (it did not load)."""
    reason: str
    """Why it is in that state; for ``action_required`` the action a human must take."""
    since: datetime | None
    restarts: int
    disabled_by: str | None
    operable: bool
    """Whether this viewer may disable, enable and restart it."""
    added_in_console: bool = False
    """Added in the console (its settings sealed in the store, ADR 0040): deleted there too; else a file account."""
    login: str | None = None
    """For its operators, the login page of an account that waits for a scan (personal WeChat's QR code), else None."""


def seen_config(console: Console, gateway: ConsoleGateway) -> Config:
    """The config with the console-made accounts' bindings (ADR 0040), so :class:`Viewer` judges those accounts
    by the same rules as the file's."""
    return console.config.model_copy(update={"bindings": gateway.account_bindings()})


class ChannelList(BaseModel):
    accounts: list[ChannelAccount]


class AccountAction(BaseModel):
    channel: str
    account: str
    do: Literal["disable", "enable", "restart"]


async def accounts_for(console: Console, gateway: ConsoleGateway, viewer: Viewer) -> list[ChannelAccount]:
    status = await gateway.status()
    disabled = await gateway.disabled_accounts()
    made = gateway.stored_accounts()
    config = seen_config(console, gateway)  # with the console-made accounts' bindings
    found = [
        ChannelAccount(channel=a.channel, account=a.account, partners=sorted(bound_partners(config, a.channel, a.account)),
                       state=a.state, reason=a.reason, since=a.since, restarts=a.restarts,
                       disabled_by=disabled.get((a.channel, a.account)),
                       operable=viewer.operates_account(config, a.channel, a.account),
                       added_in_console=(a.channel, a.account) in made and a.account not in config.channels.get(a.channel, {}),
                       login=gateway.login_page(a.channel, a.account)
                       if a.state == "action_required" and viewer.operates_account(config, a.channel, a.account) else None)
        for a in status.accounts if viewer.sees_account(config, a.channel, a.account)
    ]
    for u in status.unavailable:
        row = made.get((u.channel, u.account))
        if row is not None:  # a console-made account that does not run: judged by the partner it was made for
            if viewer.acts_for(console.config, row.partner):
                found.append(ChannelAccount(channel=u.channel, account=u.account, partners=[row.partner],
                                            state="unavailable", reason=u.reason, since=None, restarts=0,
                                            disabled_by=None, operable=True, added_in_console=True))
        elif viewer.sees_account(config, u.channel, u.account):
            found.append(ChannelAccount(channel=u.channel, account=u.account,
                                        partners=sorted(bound_partners(config, u.channel, u.account)),
                                        state="unavailable", reason=u.reason, since=None, restarts=0, disabled_by=None,
                                        operable=False))
    return sorted(found, key=lambda a: (a.channel, a.account))


def routes(console: Console) -> list[BaseRoute]:
    def running() -> ConsoleGateway:
        assert console.gateway is not None, "the channels page needs the running gateway"
        return console.gateway

    async def page(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return console.render(request, "channels.html", viewer=viewer, csrf=session.csrf,
                              accounts=await accounts_for(console, running(), viewer),
                              refused=request.query_params.get("refused"), added=request.query_params.get("added"),
                              replaced=request.query_params.get("replaced"))

    async def listing(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        accounts = await accounts_for(console, running(), viewer)
        return JSONResponse(ChannelList(accounts=accounts).model_dump(mode="json"))

    async def act(request: Request, viewer: Viewer, session: ConsoleSession, *, api: bool) -> Response:
        channel, account, do = (request.path_params[k] for k in ("channel", "account", "do"))
        gateway = running()
        listed = {(a.channel, a.account): a for a in await accounts_for(console, gateway, viewer)}
        found = listed.get((channel, account))
        if do not in ACTIONS or found is None or found.state == "unavailable":
            return error_response(404, "no such channel account")
        if not found.operable:
            return error_response(403, "a partner of another teacher is bound to this account too; ask an administrator")
        by = session.user.username
        if do == "disable":
            await gateway.disable_account(channel, account, by)
        elif do == "enable":
            await gateway.enable_account(channel, account)
        elif not await gateway.restart_account(channel, account):
            if not api:
                return RedirectResponse("/console/channels?refused=disabled", status_code=303, headers=HEADERS)
            return error_response(409, "the account is disabled: enable it to start it again")
        log.info("console channel action=%s platform=%s account=%s user=%s", do, channel, account, by)
        if not api:
            return RedirectResponse("/console/channels", status_code=303, headers=HEADERS)
        now = {(a.channel, a.account): a for a in await accounts_for(console, gateway, viewer)}
        return JSONResponse(now[(channel, account)].model_dump(mode="json"))

    async def act_form(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return await act(request, viewer, session, api=False)

    async def act_api(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return await act(request, viewer, session, api=True)

    return [
        Route("/channels", console.guarded(page, api=False)),
        Route("/api/channels", describe(console.guarded(listing, api=True),
                                        get=Operation("The channel accounts in sight, with their state", answers=ChannelList))),
        Route("/channels/{channel}/{account}/{do}", console.guarded(act_form, api=False), methods=["POST"]),
        Route("/api/channels/{channel}/{account}/{do}", describe(
            console.guarded(act_api, api=True),
            post=Operation("Disable, enable or restart a channel account", answers=ChannelAccount, path=AccountAction)),
            methods=["POST"]),
    ]
