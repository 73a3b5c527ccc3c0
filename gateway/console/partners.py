"""The console's Partners area: create, edit and delete partners, test their model, try them in a chat panel.

=====================================================  ===========  ========================================
route                                                  method       what
=====================================================  ===========  ========================================
``/console/new-partner``                               GET / POST   the empty form / create
``/console/partners/{partner}``                        GET / POST   the partner's page / save its form
``/console/partners/{partner}/delete``                 GET / POST   the confirmation page / delete
``/console/partners/{partner}/test-model``             POST         one tiny completion: ok and latency, or why not
``/console/partners/{partner}/chat``                   POST         one turn in the chat panel
``/console/api/partners``                              POST         create: ``{"partner": {...}, "version"}``
``/console/api/partners/{partner}``                    PUT          save: ``{"partner": {...}, "version"}``
                                                       DELETE       delete: ``?version=``
``/console/api/partners/{partner}/settings``           GET          the editable fields and the file's version
``/console/api/partners/{partner}/test-model``         POST         as the page's button, as JSON
``/console/api/partners/{partner}/chat``               POST         ``{"text"}`` -> ``{"reply"}``
=====================================================  ===========  ========================================

**Where an edit goes.**  Into the gateway's config file, through :class:`gateway.configedit.ConfigEditor`,
which validates the whole file as ``serve`` would and writes it atomically; the running gateway then takes
the new partner set (``Gateway.apply``).  Every form carries the file's version; a file changed since the
page was shown answers 409.  A gateway started without a file says so and refuses edits (409).

**Who may.**  A viewer edits and deletes only partners :class:`~gateway.console.access.Viewer` shows them
(any other is 404); a teacher's new partner is owned by them; only an administrator sets ``owners``.
Problems with the form's shape are 422 in the API (400 on the page); a file that would not load is 400
with the very :class:`~gateway.core.errors.ConfigError` text the gateway would print.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.configedit import (
    DeletePartner,
    ModelFields,
    NoConfigFile,
    PartnerFields,
    SavePartner,
    fields_in,
)
from gateway.console.access import Viewer
from gateway.console.edits import Refused, write_edit
from gateway.console.openapi import Operation, describe
from gateway.console.partner_forms import fields_of_form, form_values, shape_error
from gateway.console.signin import read_form
from gateway.core.config import Config, OwnerRef, PartnerConfig, teacher_account
from gateway.core.errors import ConfigError, InvalidEvent
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_CHAT_CHARS = 4000
OWNERS_ONLY_ADMIN = "only an administrator may change a partner's owners"
class PartnerDetail(BaseModel):
    """A partner's editable fields as its file spells them, the file's version, and what its persona gives it."""

    partner: PartnerFields
    version: str
    persona_tools: list[str]
    """The persona's enabled tools: the ceiling the partner's tool rules subtract from."""


class ModelTest(BaseModel):
    """What one tiny completion with the partner's model settings showed (never the key)."""

    ok: bool
    model: str
    configured: bool = True
    """False when neither the partner nor its persona names a model: it answers from its notes."""
    latency_ms: int | None = None
    problems: list[str] = []


class TrialAnswer(BaseModel):
    reply: str


class PartnerEdit(BaseModel):
    """The JSON body of a create or an edit: the partner's fields, and the file's version they were read at."""

    partner: PartnerFields
    version: str


class TrialText(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_CHAT_CHARS)


class DeleteQuery(BaseModel):
    version: str
    """The config file's version the delete was decided on (409 when it moved on)."""


class Deleted(BaseModel):
    deleted: str


class Partners:
    """The Partners routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.editor = console.editor

    @property
    def config(self) -> Config:
        return self.console.config

    # ------------------------------------------------------------------ reading

    def version(self) -> str:
        try:
            return self.editor.snapshot().version
        except (NoConfigFile, ConfigError):  # a save then reports why
            return ""

    def fields(self, partner: PartnerConfig) -> PartnerFields:
        """The partner's fields from the file (its ``env:NAME`` references intact), else from the running config."""
        try:
            found = fields_in(self.editor.snapshot().text, partner.id)
        except (NoConfigFile, ConfigError, ValidationError):  # no file, or one broken by hand since it was loaded
            found = None
        if found is not None:
            return found
        model = partner.model
        return PartnerFields(id=partner.id, name=partner.name, persona=partner.persona, greeting=partner.greeting,
                             tool_rules=list(partner.tool_rules), owners=list(partner.owners),
                             model=None if model is None else ModelFields(
                                 model=model.model, api_base=model.api_base, temperature=model.temperature,
                                 max_tokens=model.max_tokens, timeout_s=model.timeout_s))

    def persona_tools(self, persona: str) -> list[str]:
        from personas.loader import load_persona, persona_dirs

        try:
            return list(load_persona(persona, persona_dirs(self.config), secrets=self.config.secrets).enabled_tools)
        except ConfigError:
            return []

    def detail(self, partner: PartnerConfig) -> PartnerDetail:
        fields = self.fields(partner)
        return PartnerDetail(partner=fields, version=self.version(), persona_tools=self.persona_tools(fields.persona))

    # ------------------------------------------------------------------ writing

    def checked(self, viewer: Viewer, fields: PartnerFields, before: PartnerFields | None) -> PartnerFields:
        """``fields`` as this viewer may save them: a teacher's new partner is theirs, and only an administrator
        changes owners (a teacher's form that sends the owners unchanged is fine)."""
        if viewer.administers:
            return fields
        if before is None:  # a teacher creating: they are its owner
            assert viewer.teacher is not None
            channel, _, user = teacher_account(viewer.teacher).partition(":")
            mine = [OwnerRef(channel=channel, user=user)]
            if fields.owners is not None and [(o.channel, o.user) for o in fields.owners] != [(channel, user)]:
                raise Refused(403, OWNERS_ONLY_ADMIN)
            return fields.model_copy(update={"owners": mine})
        if fields.owners is not None and [(o.channel, o.user) for o in fields.owners] != \
                [(o.channel, o.user) for o in before.owners or []]:
            raise Refused(403, OWNERS_ONLY_ADMIN)
        return fields.model_copy(update={"owners": None})

    async def save(self, viewer: Viewer, fields: PartnerFields, version: str, *, new: bool) -> PartnerConfig:
        """Write the partner into the file and apply it; :class:`Refused` with the status and words otherwise."""
        before = None
        if not new:
            seen = viewer.partner(self.config, fields.id)
            if seen is None:
                raise Refused(404, "no such partner")
            before = self.fields(seen)
        elif viewer.role is not None and not viewer.administers and viewer.teacher is None:
            raise Refused(403, "this console account names no teacher account to own a partner")
        fields = self.checked(viewer, fields, before)
        config = await self.write(SavePartner(fields, new=new), version)
        log.info("console partner %s partner=%s by=%s", "created" if new else "saved", fields.id, viewer.username)
        return config.partner(fields.id)

    async def delete(self, viewer: Viewer, partner_id: str, version: str) -> None:
        if viewer.partner(self.config, partner_id) is None:
            raise Refused(404, "no such partner")
        gateway = self.console.gateway
        answering = sorted(f"{channel}/{account}" for (channel, account), row in
                           (gateway.stored_accounts().items() if gateway is not None else ()) if row.partner == partner_id)
        if answering:  # the file's own check sees only the file's bindings
            raise Refused(409, f"partner {partner_id} answers on the console-made channel account {', '.join(answering)};"
                               " delete that account on the Channels page first")
        await self.write(DeletePartner(partner_id), version)
        log.info("console partner deleted partner=%s by=%s", partner_id, viewer.username)

    async def write(self, change: SavePartner | DeletePartner, version: str) -> Config:
        return await write_edit(self.console, change, version)

    # ------------------------------------------------------------------ the model and the chat panel

    async def test_model(self, partner: PartnerConfig) -> ModelTest:
        """One completion of one token through litellm with the partner's settings (its persona's when it has none)."""
        from brain.probe import probe_model
        from personas.loader import load_persona, persona_dirs

        settings = partner.model
        if settings is None:
            try:
                settings = load_persona(partner.persona, persona_dirs(self.config), secrets=self.config.secrets).model
            except ConfigError as error:
                return ModelTest(ok=False, model="", problems=[str(error)])
        if settings is None:
            return ModelTest(ok=False, model="", configured=False,
                             problems=["no model is configured, here or in the persona: the partner answers from its notes"])
        started = time.perf_counter()
        try:
            result = await probe_model(settings.model_copy(update={"backup": None}))
        except ConfigError as error:  # an unset env:NAME, in a config loaded without resolving secrets
            return ModelTest(ok=False, model=settings.model, problems=[str(error)])
        latency = round((time.perf_counter() - started) * 1000)
        return ModelTest(ok=result.ok, model=settings.model, latency_ms=latency if result.ok else None,
                         problems=[f"{p.message} (fix: {p.fix})" for p in result.problems])

    async def chat(self, viewer: Viewer, partner: PartnerConfig, text: str) -> TrialAnswer:
        gateway = self.console.gateway
        if gateway is None:
            raise Refused(503, "no running gateway to answer")
        who = viewer.username or "console"
        try:
            reply = await gateway.trial_turn(partner.id, who, text)
        except KeyError:
            raise Refused(404, "no such partner") from None
        log.info("console chat panel turn partner=%s by=%s", partner.id, who)
        return TrialAnswer(reply=reply)

    # ------------------------------------------------------------------ forms

    def page(self, request: Request, viewer: Viewer, session: ConsoleSession, partner: PartnerConfig | None, *,
             status: int = 200, values: dict[str, str] | None = None, version: str | None = None,
             error: str | None = None, notice: str | None = None, test: ModelTest | None = None,
             said: str | None = None, answer: TrialAnswer | None = None) -> Response:
        """The partner's page (``partner`` None: the new-partner form), with whatever the last action showed."""
        from personas.loader import list_personas, persona_dirs

        fields = self.fields(partner) if partner is not None else None
        shown = values or (form_values(fields) if fields is not None else
                           {"persona": "study-buddy", "owners": "" if viewer.administers else (viewer.teacher or "")})
        return self.console.render(
            request, "partner.html", status, viewer=viewer, csrf=session.csrf, partner=partner, values=shown,
            version=self.version() if version is None else version, editable=self.config.source is not None,
            personas=list(list_personas(persona_dirs(self.config))), error=error, notice=notice, test=test, said=said,
            answer=answer, persona_tools=self.persona_tools(shown.get("persona", "")) if partner else [])

    def missing(self, request: Request) -> Response:
        return self.console.render(request, "message.html", 404, message="not_found")

    async def new_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        if request.method == "GET":
            return self.page(request, viewer, session, None)
        form = await read_form(request) or {}
        try:
            partner_id = form.get("id", "").strip()
            fields = fields_of_form(form if viewer.administers else {k: v for k, v in form.items() if k != "owners"},
                                         partner_id)
            saved = await self.save(viewer, fields, form.get("version", ""), new=True)
        except Refused as refused:
            return self.page(request, viewer, session, None, status=refused.status, values=form, error=refused.message)
        return RedirectResponse(f"/console/partners/{saved.id}?saved=1", status_code=303)

    async def partner_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.missing(request)
        if request.method == "GET":
            notice = "partner_saved" if "saved" in request.query_params else None
            return self.page(request, viewer, session, partner, notice=notice)
        form = await read_form(request) or {}
        try:
            fields = fields_of_form(form if viewer.administers else {k: v for k, v in form.items() if k != "owners"},
                                         partner.id)
            await self.save(viewer, fields, form.get("version", ""), new=False)
        except Refused as refused:
            return self.page(request, viewer, session, partner, status=refused.status, values={**form, "id": partner.id},
                             version=form.get("version", ""), error=refused.message)
        return RedirectResponse(f"/console/partners/{partner.id}?saved=1", status_code=303)

    async def delete_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.missing(request)
        def confirmation(status: int = 200, error: str | None = None) -> Response:
            return self.console.render(request, "partner_delete.html", status, viewer=viewer, csrf=session.csrf,
                                       partner=partner, version=self.version(), editable=self.config.source is not None,
                                       error=error)

        if request.method == "GET":
            return confirmation()
        form = await read_form(request) or {}
        if form.get("confirm") != partner.id:
            return confirmation(400, self.console.word(request, "delete_unconfirmed"))
        try:
            await self.delete(viewer, partner.id, form.get("version", ""))
        except Refused as refused:
            return confirmation(refused.status, refused.message)
        return RedirectResponse("/console/", status_code=303)

    async def test_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.missing(request)
        return self.page(request, viewer, session, partner, test=await self.test_model(partner))

    async def chat_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return self.missing(request)
        text = ((await read_form(request)) or {}).get("text", "").strip()
        if not text or len(text) > MAX_CHAT_CHARS:
            return self.page(request, viewer, session, partner, status=400,
                             error=self.console.word(request, "chat_text_rule").format(limit=MAX_CHAT_CHARS))
        try:
            answer = await self.chat(viewer, partner, text)
        except Refused as refused:
            return self.page(request, viewer, session, partner, status=refused.status, error=refused.message)
        return self.page(request, viewer, session, partner, said=text, answer=answer)

    # ------------------------------------------------------------------ the JSON twins

    async def body(self, request: Request) -> dict[str, Any]:
        raw = await read_limited(request, MAX_BODY_BYTES)
        if raw is None:
            raise Refused(413, f"the body is over {MAX_BODY_BYTES // 1024} KiB")
        try:
            body = decode_json(raw)
        except InvalidEvent as error:
            raise Refused(400, str(error)) from None
        if not isinstance(body, dict):
            raise Refused(422, "send a JSON object")
        return body

    async def edit_body(self, request: Request, partner_id: str | None) -> tuple[PartnerFields, str]:
        body = await self.body(request)
        raw, version = body.get("partner"), body.get("version")
        if not isinstance(raw, dict) or not isinstance(version, str):
            raise Refused(422, 'send {"partner": {...the partner\'s fields...}, "version": "<the file\'s version>"}')
        if partner_id is not None:
            raw = {**raw, "id": raw.get("id", partner_id)}
            if raw["id"] != partner_id:
                raise Refused(422, "a partner's id cannot change; create a new partner instead")
        try:
            return PartnerFields.model_validate(raw), version
        except ValidationError as error:
            raise Refused(422, shape_error(error, raw)) from None

    async def api_create(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        try:
            fields, version = await self.edit_body(request, None)
            saved = await self.save(viewer, fields, version, new=True)
        except Refused as refused:
            return error_response(refused.status, refused.message)
        return JSONResponse(self.detail(saved).model_dump(mode="json"), status_code=201)

    async def api_partner(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner_id = request.path_params["partner"]
        if viewer.partner(self.config, partner_id) is None:
            return error_response(404, "no such partner")
        try:
            if request.method == "DELETE":
                await self.delete(viewer, partner_id, request.query_params.get("version", ""))
                return JSONResponse(Deleted(deleted=partner_id).model_dump())
            fields, version = await self.edit_body(request, partner_id)
            saved = await self.save(viewer, fields, version, new=False)
        except Refused as refused:
            return error_response(refused.status, refused.message)
        return JSONResponse(self.detail(saved).model_dump(mode="json"))

    async def api_settings(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return error_response(404, "no such partner")
        return JSONResponse(self.detail(partner).model_dump(mode="json"))

    async def api_test(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return error_response(404, "no such partner")
        return JSONResponse((await self.test_model(partner)).model_dump(mode="json"))

    async def api_chat(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:
            return error_response(404, "no such partner")
        try:
            text = (await self.body(request)).get("text")
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHAT_CHARS:
                raise Refused(422, f'send {{"text": "..."}} with 1 to {MAX_CHAT_CHARS} characters')
            answer = await self.chat(viewer, partner, text.strip())
        except Refused as refused:
            return error_response(refused.status, refused.message)
        return JSONResponse(answer.model_dump(mode="json"))


def routes(console: Console) -> list[BaseRoute]:
    partners = Partners(console)
    page, api = (lambda h: console.guarded(h, api=False)), (lambda h: console.guarded(h, api=True))
    return [
        Route("/new-partner", page(partners.new_page), methods=["GET", "POST"]),
        Route("/partners/{partner}", page(partners.partner_page), methods=["GET", "POST"]),
        Route("/partners/{partner}/delete", page(partners.delete_page), methods=["GET", "POST"]),
        Route("/partners/{partner}/test-model", page(partners.test_page), methods=["POST"]),
        Route("/partners/{partner}/chat", page(partners.chat_page), methods=["POST"]),
        Route("/api/partners", describe(api(partners.api_create), post=Operation(
            "Create a partner", answers=PartnerDetail, status=(201,), body=PartnerEdit)), methods=["POST"]),
        Route("/api/partners/{partner}", describe(
            api(partners.api_partner), put=Operation("Edit a partner", answers=PartnerDetail, body=PartnerEdit),
            delete=Operation("Delete a partner", answers=Deleted, query=DeleteQuery)), methods=["PUT", "DELETE"]),
        Route("/api/partners/{partner}/settings", describe(api(partners.api_settings), get=Operation(
            "A partner's editable fields and the file's version", answers=PartnerDetail))),
        Route("/api/partners/{partner}/test-model", describe(api(partners.api_test), post=Operation(
            "One tiny completion with the partner's model settings", answers=ModelTest)), methods=["POST"]),
        Route("/api/partners/{partner}/chat", describe(api(partners.api_chat), post=Operation(
            "Try the partner: one message, its answer", answers=TrialAnswer, body=TrialText)), methods=["POST"]),
    ]
