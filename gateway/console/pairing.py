"""The console's pairing: the learners waiting for a teacher's approval, approved or denied with one click.

======================================  ======  ========================================================
route                                   method  viewer -> answer
======================================  ======  ========================================================
``/console/pairing``                    GET     the codes waiting for the viewer's partners
``/console/pairing/{code}/approve``     POST    let the learner in; their held messages are answered now
``/console/pairing/{code}/deny``        POST    refuse them; their held messages are dropped
``/console/api/pairing[/{code}/...]``   both    the JSON twins
======================================  ======  ========================================================

A code belongs to the partner its learner's direct chat routes to (the partner whose greeting and
pairing notice they got); a code of a partner the viewer does not see answers 404, like one that
does not exist or expired.  Approving and denying are the store's ``pairing_resolve``, the very call
``partners pairing approve|deny`` makes; an approval then asks the running dispatcher to answer the
learner's held messages at once (``release_approved``), instead of at its next sweep.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer
from gateway.console.openapi import Operation, describe
from gateway.console.services import ConsoleGateway
from gateway.core.config import PartnerConfig
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind
from gateway.http.responses import error_response
from gateway.store import PairingRequest
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:  # pages imports the areas
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

CODE = re.compile(r"[A-Z0-9]{4,16}")
DECISIONS = {"approve": True, "deny": False}
DONE_WORDS = {"approve": "done_approve", "deny": "done_deny"}


class PairingSummary(BaseModel):
    """A learner waiting for approval, as the console lists them."""

    code: str
    partner: str
    partner_name: str
    channel: str
    account: str
    user: str
    display_name: str
    expires_in_s: int


class PairingList(BaseModel):
    waiting: list[PairingSummary]


class Decided(BaseModel):
    done: str
    """``approve`` or ``deny``."""
    code: str
    released: int
    """Held messages answered at once (an approval)."""


def partner_of(gateway: ConsoleGateway, request: PairingRequest) -> PartnerConfig | None:
    """The partner the learner's direct chat is bound to (the one that held their messages)."""
    direct = Conversation(chat=ChatId(request.user), kind=ConversationKind.DIRECT)
    return gateway.router.route(Address(channel=ChannelName(request.channel), account=AccountId(request.account),
                                        conversation=direct))


class Pairing:
    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def gateway(self) -> ConsoleGateway:
        assert self.console.gateway is not None, "the pairing area needs the running gateway"
        return self.console.gateway

    async def _waiting(self, viewer: Viewer) -> list[PairingSummary]:
        now = time.time()
        found = []
        for request in await self.gateway.store.pairing_list():
            partner = partner_of(self.gateway, request)
            if partner is not None and viewer.sees(partner):
                found.append(PairingSummary(code=request.code, partner=partner.id, partner_name=partner.name,
                                            channel=request.channel, account=request.account, user=request.user,
                                            display_name=request.display_name,
                                            expires_in_s=max(0, int(request.expires_at - now))))
        return found

    async def page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        done = request.query_params.get("done")
        return self.console.render(request, "pairing.html", viewer=viewer, csrf=session.csrf,
                                   waiting=await self._waiting(viewer), notice=DONE_WORDS.get(done or ""))

    async def api_list(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return JSONResponse(PairingList(waiting=await self._waiting(viewer)).model_dump())

    def decide(self, decision: str, *, api: bool) -> Callable[[Request, Viewer, ConsoleSession], Awaitable[Response]]:
        async def endpoint(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
            code = request.path_params["code"].strip().upper()
            if not CODE.fullmatch(code) or code not in {w.code for w in await self._waiting(viewer)}:
                return error_response(404, "no such pairing code waiting (unknown, used, expired, or not your partner's)")
            resolved = await self.gateway.store.pairing_resolve(code, DECISIONS[decision])
            if resolved is None:  # resolved or expired since the list was read
                return error_response(404, "no such pairing code waiting (unknown, used, expired, or not your partner's)")
            released = await self.gateway.dispatcher.release_approved() if DECISIONS[decision] else 0
            log.info("console pairing decision=%s user=%s platform=%s account=%s sender=%s released=%d", decision,
                     viewer.username, resolved.channel, resolved.account, resolved.user, released)
            if api:
                return JSONResponse(Decided(done=decision, code=code, released=released).model_dump())
            return RedirectResponse(f"/console/pairing?done={decision}", status_code=303, headers={"Cache-Control": "no-store"})

        return endpoint


def routes(console: Console) -> list[BaseRoute]:
    area = Pairing(console)
    guarded = console.guarded
    found: list[BaseRoute] = [
        Route("/pairing", guarded(area.page, api=False)),
        Route("/api/pairing", describe(guarded(area.api_list, api=True),
                                       get=Operation("The learners waiting for approval", answers=PairingList))),
    ]
    for decision in DECISIONS:
        found.append(Route(f"/pairing/{{code}}/{decision}", guarded(area.decide(decision, api=False), api=False), methods=["POST"]))
        found.append(Route(f"/api/pairing/{{code}}/{decision}",
                           describe(guarded(area.decide(decision, api=True), api=True),
                                    post=Operation(f"{decision.title()} a waiting learner", answers=Decided)),
                           methods=["POST"]))
    return found
