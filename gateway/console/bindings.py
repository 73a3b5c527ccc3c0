"""The console's bindings: which partner answers where, changed in the config file and applied live.

=========================================================  ======  ================================================
route                                                      method  viewer -> answer
=========================================================  ======  ================================================
``/console/partners/{partner}/bindings``                   GET     where the partner answers, and a form to add a
                                                                   place: a channel account, or one chat or thread
                                                                   of it
``/console/partners/{partner}/bindings``                   POST    add: 303 back; a place already answered 409; an
                                                                   account another teacher's partner answers on 403;
                                                                   no such account or a bad form 400; stale 409
``/console/partners/{partner}/bindings/remove``            POST    remove one of the file's bindings: 303 back
``/console/api/partners/{partner}/bindings``               GET     the same as JSON, with the file's ``version``
``/console/api/partners/{partner}/bindings``               POST    JSON ``{binding, version}``: 201, or as the form
``/console/api/partners/{partner}/bindings/remove``        POST    JSON ``{binding, version}``: 200, or as the form
=========================================================  ======  ================================================

A partner the viewer does not see answers 404.  A teacher binds their partner only to an account no
other teacher's partner answers on (at any level): binding a chat of a shared account would take that
chat from a colleague's learners.  An administrator binds anywhere.  The binding a console-made
account carries (the whole account, ADR 0040) is listed but goes with the account, on the Channels
page.  Every change is a :class:`gateway.configedit.AddBinding` or ``RemoveBinding`` through the
console's one :class:`~gateway.configedit.ConfigEditor`: validated as ``serve`` loads the file,
written atomically, applied by ``Gateway.apply`` (ADR 0039).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.configedit import AddBinding, NoConfigFile, RemoveBinding
from gateway.console.access import Viewer, bound_partners
from gateway.console.channels import seen_config
from gateway.console.edits import Refused, write_edit
from gateway.console.openapi import Operation, describe
from gateway.console.signin import read_form
from gateway.core.config import Binding, Config, PartnerConfig
from gateway.core.errors import ConfigError, InvalidEvent
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:  # pages imports the areas
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024
PLACE_CHARS = 256
"""The longest chat or thread id a form takes: platform ids are far shorter."""


class Place(BaseModel):
    """Where a binding routes: an account, or one chat (and thread) of it, as a form or a JSON body names it."""

    model_config = ConfigDict(extra="forbid")
    channel: str = Field(min_length=1, max_length=64)
    account: str = Field(default="default", min_length=1, max_length=64)
    chat: str | None = Field(default=None, min_length=1, max_length=PLACE_CHARS)
    thread: str | None = Field(default=None, min_length=1, max_length=PLACE_CHARS)

    def bound_to(self, partner: str) -> Binding:
        return Binding(partner=partner, channel=self.channel, account=self.account, chat=self.chat, thread=self.thread)


class BindingChange(BaseModel):
    """The JSON body of an add or a remove."""

    model_config = ConfigDict(extra="forbid")
    binding: Place
    version: str


class ShownBinding(BaseModel):
    """One place the partner answers, and where that binding is kept."""

    channel: str
    account: str
    chat: str | None
    thread: str | None
    kept_in: Literal["file", "console_account"]


class PartnerBindings(BaseModel):
    partner: str
    version: str
    """The config file's version, sent back with a change (409 when the file moved on)."""
    bindings: list[ShownBinding]
    accounts: list[str]
    """``channel/account`` of each account this viewer may bind the partner to."""


class Bindings:
    """The bindings routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def config(self) -> Config:
        return self.console.config

    def _routing(self) -> Config:
        """The config with the console-made accounts' bindings, as the router holds it."""
        gateway = self.console.gateway
        return seen_config(self.console, gateway) if gateway is not None else self.config

    def _accounts(self) -> list[tuple[str, str]]:
        """Every channel account the gateway knows: the file's and the console-made ones."""
        known = {(channel, account) for channel, accounts in self.config.channels.items() for account in accounts}
        if self.console.gateway is not None:
            known |= set(self.console.gateway.stored_accounts())
        return sorted(known)

    @staticmethod
    def _may_bind(viewer: Viewer, routing: Config, channel: str, account: str) -> bool:
        """An administrator anywhere; a teacher where every partner bound (at any level) is theirs, or none is."""
        if viewer.administers:
            return True
        mine = {partner.id for partner in viewer.partners(routing)}
        return bound_partners(routing, channel, account) <= mine

    def shown(self, viewer: Viewer, partner: PartnerConfig) -> PartnerBindings:
        routing = self._routing()
        rows = [ShownBinding(channel=b.channel, account=b.account, chat=b.chat, thread=b.thread,
                             kept_in="file" if b in self.config.bindings else "console_account")  # the store holds the rest
                for b in routing.bindings if b.partner == partner.id]
        accounts = [f"{channel}/{account}" for channel, account in self._accounts()
                    if self._may_bind(viewer, routing, channel, account)]
        try:
            version = self.console.editor.snapshot().version
        except (NoConfigFile, ConfigError):
            version = ""
        return PartnerBindings(partner=partner.id, version=version, bindings=rows, accounts=accounts)

    async def change(self, viewer: Viewer, partner: PartnerConfig, place: Place, version: str, *, add: bool) -> None:
        """Add or remove one binding of ``partner``; :class:`Refused` with the status and the words otherwise."""
        if add:
            if (place.channel, place.account) not in self._accounts():
                raise Refused(400, f"there is no channel account {place.channel}/{place.account}")
            routing = self._routing()
            if not self._may_bind(viewer, routing, place.channel, place.account):
                raise Refused(403, f"another teacher's partner answers on {place.channel}/{place.account}; ask an administrator")
            where = (place.channel, place.account, place.chat, place.thread)
            taken = next((b for b in routing.bindings if (b.channel, b.account, b.chat, b.thread) == where), None)
            if taken is not None:  # the file's check alone would miss a console-made account's binding
                raise Refused(409, f"partner {taken.partner!r} answers there already; remove that binding first, or bind"
                                   " one chat of the account instead")
        binding = place.bound_to(partner.id)
        await write_edit(self.console, AddBinding(binding) if add else RemoveBinding(binding), version)
        log.info("console binding %s partner=%s channel=%s account=%s chat=%s thread=%s by=%s", "added" if add else "removed",
                 partner.id, place.channel, place.account, place.chat, place.thread, viewer.username)

    # ------------------------------------------------------------------ pages

    def _page(self, request: Request, viewer: Viewer, session: ConsoleSession, partner: PartnerConfig,
              status: int = 200, error: str = "") -> Response:
        return self.console.render(request, "bindings.html", status, viewer=viewer, csrf=session.csrf, partner=partner,
                                   shown=self.shown(viewer, partner), error=error, done=request.query_params.get("done", ""))

    async def page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.console.refuse(request, 404, api=False, detail="no such partner", message="not_found")
        if request.method == "GET":
            return self._page(request, viewer, session, partner)
        return await self._form_change(request, viewer, session, partner, add=True)

    async def remove_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.console.refuse(request, 404, api=False, detail="no such partner", message="not_found")
        return await self._form_change(request, viewer, session, partner, add=False)

    async def _form_change(self, request: Request, viewer: Viewer, session: ConsoleSession, partner: PartnerConfig,
                           *, add: bool) -> Response:
        form = await read_form(request) or {}
        channel, _, account = (form.get("account_ref") or "").partition("/")
        try:
            place = Place(channel=form.get("channel") or channel, account=form.get("account") or account or "default",
                          chat=form.get("chat") or None, thread=form.get("thread") or None)
            await self.change(viewer, partner, place, form.get("version", ""), add=add)
        except ValidationError as error:
            return self._page(request, viewer, session, partner, 400, _first(error))
        except Refused as refused:
            return self._page(request, viewer, session, partner, refused.status, refused.message)
        return RedirectResponse(f"/console/partners/{partner.id}/bindings?done={'added' if add else 'removed'}", status_code=303)

    # ------------------------------------------------------------------ the JSON twins

    async def api(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return error_response(404, "no such partner")
        if request.method == "GET":
            return JSONResponse(self.shown(viewer, partner).model_dump(mode="json"))
        return await self._api_change(request, viewer, partner, add=True)

    async def api_remove(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return error_response(404, "no such partner")
        return await self._api_change(request, viewer, partner, add=False)

    async def _api_change(self, request: Request, viewer: Viewer, partner: PartnerConfig, *, add: bool) -> Response:
        raw = await read_limited(request, MAX_BODY_BYTES)
        if raw is None:
            return error_response(413, f"the body is over {MAX_BODY_BYTES} bytes")
        try:
            body = BindingChange.model_validate(decode_json(raw))
            await self.change(viewer, partner, body.binding, body.version, add=add)
        except InvalidEvent as error:
            return error_response(400, str(error))
        except ValidationError as error:
            return error_response(422, _first(error))
        except Refused as refused:
            return error_response(refused.status, refused.message)
        return JSONResponse(self.shown(viewer, partner).model_dump(mode="json"), status_code=201 if add else 200)


def _first(error: ValidationError) -> str:
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else problem["msg"]


def routes(console: Console) -> list[BaseRoute]:
    bindings = Bindings(console)
    page, api = (lambda h: console.guarded(h, api=False)), (lambda h: console.guarded(h, api=True))
    return [
        Route("/partners/{partner}/bindings", page(bindings.page), methods=["GET", "POST"]),
        Route("/partners/{partner}/bindings/remove", page(bindings.remove_page), methods=["POST"]),
        Route("/api/partners/{partner}/bindings", describe(
            api(bindings.api), get=Operation("Where the partner answers", answers=PartnerBindings),
            post=Operation("Bind the partner to a place", answers=PartnerBindings, status=(201,), body=BindingChange)),
              methods=["GET", "POST"]),
        Route("/api/partners/{partner}/bindings/remove", describe(api(bindings.api_remove), post=Operation(
            "Remove a binding", answers=PartnerBindings, body=BindingChange)), methods=["POST"]),
    ]
