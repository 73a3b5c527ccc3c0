"""The console's Learners area: who talks to a teacher's partners, what they are remembered by, and forgetting.

==========================================================  ===========  ===================================
route                                                       method       what
==========================================================  ===========  ===================================
``/console/partners/{partner}/learners``                    GET          the partner's learners
``/console/partners/{partner}/learners/{person}``           GET          one learner: identities, usage, memory
``/console/partners/{partner}/learners/{person}/notes``     POST         replace the notes (form ``markdown``)
``/console/partners/{partner}/learners/{person}/export``    GET          the memory as a JSON download
``/console/partners/{partner}/learners/{person}/forget``    GET / POST   the confirmation page / forget
``/console/api/partners/{partner}/learners``                GET          the learners, as JSON
``/console/api/partners/{partner}/learners/{person}``       GET / PUT    memory as JSON / ``{"markdown"}``
                                                            DELETE       forget; needs ``?confirm={person}``
==========================================================  ===========  ===================================

**Whose learners.**  A learner is a *person* of the memory (``brain.memory.people``): every identity
they were linked by, one memory per *teacher scope* -- the partner's first owner
(:func:`brain.memory.scopes.teacher_of`), which all of that teacher's partners share.  The learners of a
partner are the people of its teacher scope; a viewer reaches them only through a partner
:class:`~gateway.console.access.Viewer` shows them, and a person of another scope under that partner's
URL is 404, like one that does not exist.  The conversations shown are those with the partners in the
viewer's sight only: a co-owner of one partner sees what that partner's turns read (the learner's
notes, facts and preferences), not the learner's chats with another teacher's partners.

**The same controls.**  Every read and write goes through the gateway's own
:class:`brain.memory.guarded.GuardedControls` -- the admin API's instance, holding the turns' locks --
so an edit or a forget waits for the learner's running turn and a turn that does not end in time is
answered 409 with nothing changed.  A gateway running a plugged-in responder has no brain memory: the
pages say so, the API answers 503.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer
from gateway.console.signin import read_form
from gateway.core.config import PartnerConfig
from gateway.core.errors import InvalidEvent
from gateway.http.admin import MAX_NOTES_BYTES, NO_BRAIN, RETRY_AFTER_S
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:
    from brain.memory.guarded import GuardedControls
    from brain.memory.roster import Person
    from gateway.console.pages import Console

log = logging.getLogger(__name__)


class LearnerSummary(BaseModel):
    """A learner as the console lists them: the person and every identity linked to it."""

    id: str
    name: str
    identities: list[str]

    @classmethod
    def of(cls, person: Person) -> LearnerSummary:
        return cls(id=person.id, name=person.name, identities=[str(a.identity) for a in person.accounts])


class Learners:
    """The Learners routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    # ------------------------------------------------------------------ who is in sight

    @property
    def controls(self) -> GuardedControls | None:
        gateway = self.console.gateway
        return gateway.memory_controls if gateway is not None else None

    def partner(self, request: Request, viewer: Viewer) -> PartnerConfig | None:
        return viewer.partner(self.console.config, request.path_params["partner"])

    async def learners(self, controls: GuardedControls, partner: PartnerConfig) -> list[Person]:
        """The people of the partner's teacher scope, oldest first."""
        from brain.memory.scopes import teacher_of

        teacher = teacher_of(partner)
        return [person for person in await controls.people() if person.teacher == teacher]

    async def learner(self, controls: GuardedControls, partner: PartnerConfig, person_id: str) -> Person | None:
        return next((p for p in await self.learners(controls, partner) if p.id == person_id), None)

    def conversations_in_sight(self, viewer: Viewer, partner: PartnerConfig, person: Person) -> set[str]:
        """The session-log keys of the learner's chats with partners the viewer sees in this teacher scope."""
        from brain.memory.scopes import person_history_key, teacher_of

        return {person_history_key(person.id, p.id) for p in viewer.partners(self.console.config)
                if teacher_of(p) == teacher_of(partner)}

    async def memory(self, controls: GuardedControls, viewer: Viewer, partner: PartnerConfig, person: Person) -> dict[str, Any]:
        """The learner's export (``MemoryControls.export``), its history cut to the conversations in sight."""
        from brain.memory.scopes import learner_scope

        kept = await controls.export(learner_scope(person.teacher, person.id))
        shown = self.conversations_in_sight(viewer, partner, person)
        kept["history"] = {key: events for key, events in kept["history"].items() if key in shown}
        return kept

    def resolve_partner(self, request: Request, viewer: Viewer, *, api: bool) -> tuple[GuardedControls, PartnerConfig] | Response:
        """The controls and the partner a request names, or the answer when one is missing."""
        partner = self.partner(request, viewer)
        if partner is None:
            return self.console.refuse(request, 404, api=api, detail="no such partner", message="not_found")
        controls = self.controls
        if controls is None:
            return self.console.refuse(request, 503, api=api, detail=NO_BRAIN, message="memory_unavailable")
        return controls, partner

    async def resolve(self, request: Request, viewer: Viewer, *, api: bool
                      ) -> tuple[GuardedControls, PartnerConfig, Person] | Response:
        """The controls, partner and learner a request names, or the answer when one is missing."""
        found = self.resolve_partner(request, viewer, api=api)
        if isinstance(found, Response):
            return found
        controls, partner = found
        person = await self.learner(controls, partner, request.path_params["person"])
        if person is None:  # not there, or of another teacher scope: the same answer
            return self.console.refuse(request, 404, api=api, detail="no such learner", message="not_found")
        return controls, partner, person

    # ------------------------------------------------------------------ pages

    async def list_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve_partner(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        controls, partner = found
        notice = "forgotten" if "forgotten" in request.query_params else None
        return self.console.render(request, "learners.html", viewer=viewer, csrf=session.csrf, partner=partner, notice=notice,
                                   learners=[LearnerSummary.of(p) for p in await self.learners(controls, partner)])

    async def learner_page(self, request: Request, viewer: Viewer, session: ConsoleSession, *,
                           status: int = 200, error: str | None = None, draft: str | None = None) -> Response:
        found = await self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        controls, partner, person = found
        gateway = self.console.gateway
        usage = await gateway.usage_today(partner, person.id) if gateway is not None else None
        kept = await self.memory(controls, viewer, partner, person)
        notice = "notes_saved" if "saved" in request.query_params else None
        document = kept["document"]
        notes = draft if draft is not None else (document["markdown"] if document else "")
        return self.console.render(request, "learner.html", status, viewer=viewer, csrf=session.csrf, partner=partner,
                                   learner=LearnerSummary.of(person), kept=kept, notes=notes, usage=usage,
                                   notice=notice, error=error, max_notes_kib=MAX_NOTES_BYTES // 1024)

    async def notes_form(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = await self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        form = await read_form(request)
        markdown = (form or {}).get("markdown")
        if markdown is None:
            return await self.learner_page(request, viewer, session, status=400, error="notes_missing")
        if len(markdown.encode()) > MAX_NOTES_BYTES:
            return await self.learner_page(request, viewer, session, status=413, error="notes_too_long", draft=markdown)
        answer = await self.edit(found, markdown, viewer)
        if answer is not None:
            return await self.learner_page(request, viewer, session, status=409, error="turn_running", draft=markdown)
        controls, partner, person = found
        return RedirectResponse(f"/console/partners/{partner.id}/learners/{person.id}?saved=1", status_code=303)

    async def edit(self, found: tuple[GuardedControls, PartnerConfig, Person], markdown: str, viewer: Viewer) -> str | None:
        """Replace the learner's notes; the TurnRunning message when their turn did not end in time."""
        from brain.memory.guarded import TurnRunning
        from brain.memory.scopes import learner_scope

        controls, partner, person = found
        try:
            await controls.edit(learner_scope(person.teacher, person.id), markdown)
        except TurnRunning as error:
            return str(error)
        log.info("console notes replaced partner=%s person=%s by=%s", partner.id, person.id, viewer.username)
        return None

    async def export(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = await self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        controls, partner, person = found
        body = json.dumps(await self.memory(controls, viewer, partner, person), indent=2, ensure_ascii=False) + "\n"
        return Response(body, media_type="application/json; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="memory-{partner.id}-{person.id}.json"',
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})

    async def forget_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = await self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        controls, partner, person = found
        if request.method == "GET":
            return self.console.render(request, "forget.html", viewer=viewer, csrf=session.csrf, partner=partner,
                                       learner=LearnerSummary.of(person))
        form = await read_form(request) or {}
        if form.get("confirm") != person.id:  # the confirmation page's box, ticked
            return self.console.render(request, "forget.html", 400, viewer=viewer, csrf=session.csrf, partner=partner,
                                       learner=LearnerSummary.of(person), error="forget_unconfirmed")
        if await self.forget(found, viewer) is not None:
            return self.console.render(request, "forget.html", 409, viewer=viewer, csrf=session.csrf, partner=partner,
                                       learner=LearnerSummary.of(person), error="turn_running")
        return RedirectResponse(f"/console/partners/{partner.id}/learners?forgotten=1", status_code=303)

    async def forget(self, found: tuple[GuardedControls, PartnerConfig, Person], viewer: Viewer) -> str | None:
        """Erase the person as ``/forget`` does; the TurnRunning message when their turn did not end in time."""
        from brain.memory.guarded import TurnRunning

        controls, partner, person = found
        try:
            counts = await controls.forget(person.id)
        except TurnRunning as error:
            return str(error)
        log.info("console learner forgotten partner=%s person=%s by=%s %s", partner.id, person.id, viewer.username,
                 " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        return None

    # ------------------------------------------------------------------ the JSON twins

    async def api_list(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve_partner(request, viewer, api=True)
        if isinstance(found, Response):
            return found
        controls, partner = found
        return JSONResponse({"learners": [LearnerSummary.of(p).model_dump() for p in await self.learners(controls, partner)]})

    async def api_learner(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = await self.resolve(request, viewer, api=True)
        if isinstance(found, Response):
            return found
        controls, partner, person = found
        if request.method == "GET":
            usage = await self.console.gateway.usage_today(partner, person.id) if self.console.gateway else None
            return JSONResponse({"learner": LearnerSummary.of(person).model_dump(),
                                 "usage_today": None if usage is None else asdict(usage),
                                 "memory": await self.memory(controls, viewer, partner, person)})
        if request.method == "DELETE":
            if request.query_params.get("confirm") != person.id:
                return error_response(400, f"forgetting erases the learner for good: repeat their id as ?confirm={person.id}")
            running = await self.forget(found, viewer)
            return error_response(409, running, {"Retry-After": str(RETRY_AFTER_S)}) if running else JSONResponse({"forgotten": person.id})
        raw = await read_limited(request, MAX_NOTES_BYTES)
        if raw is None:
            return error_response(413, f"the notes are larger than {MAX_NOTES_BYTES // 1024} KiB; shorten them and send again")
        try:
            body = decode_json(raw)
        except InvalidEvent:
            body = None
        markdown = body.get("markdown") if isinstance(body, dict) else None
        if not isinstance(markdown, str):
            return error_response(400, 'send JSON {"markdown": "..."}')
        running = await self.edit(found, markdown, viewer)
        return error_response(409, running, {"Retry-After": str(RETRY_AFTER_S)}) if running else JSONResponse({"saved": True})


def routes(console: Console) -> list[BaseRoute]:
    area = Learners(console)

    page, api = partial(console.guarded, api=False), partial(console.guarded, api=True)
    learner = "/partners/{partner}/learners/{person}"
    return [
        Route("/partners/{partner}/learners", page(area.list_page)),
        Route(learner, page(area.learner_page)),
        Route(learner + "/notes", page(area.notes_form), methods=["POST"]),
        Route(learner + "/export", page(area.export)),
        Route(learner + "/forget", page(area.forget_page), methods=["GET", "POST"]),
        Route("/api/partners/{partner}/learners", api(area.api_list)),
        Route("/api" + learner, api(area.api_learner), methods=["GET", "PUT", "DELETE"]),
    ]
