"""The console's persona editor: a persona's ``persona.yaml`` and ``SOUL.md`` as two text areas.

======================================  ===========  ==================================================
route                                   method       what
======================================  ===========  ==================================================
``/console/personas/{persona}``         GET / POST   the two files / save them (form ``spec``, ``soul``)
``/console/api/personas/{persona}``     GET / PUT    ``{"spec", "soul", "version"}`` both ways
======================================  ===========  ==================================================

Who sees a persona is :func:`gateway.console.access.sees_persona` (an administrator: all; a teacher: those
their partners use; any other is 404), who may save it :func:`~gateway.console.access.edits_persona`
(a teacher only when no other teacher's partner uses it: 403).  Saving goes through
:class:`gateway.personaedit.PersonaEditor`: checked as the loader checks (400 with the file's error),
written atomically, 409 on a stale version or without a config file.  The form is sent as multipart,
because a SOUL.md may be larger than the console's small-form limit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.configedit import NoConfigFile, StaleFile
from gateway.console.access import Viewer, edits_persona, sees_persona
from gateway.console.signin import read_form
from gateway.core.errors import ConfigError, InvalidEvent
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.personaedit import PersonaEditor, PersonaFiles
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024


class PersonaText(BaseModel):
    """A persona's two files as text, and the version they were read at (send it back to save)."""

    spec: str
    soul: str
    version: str = ""

    @classmethod
    def of(cls, files: PersonaFiles) -> PersonaText:
        return cls(spec=files.spec, soul=files.soul, version=files.version)


class Personas:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.editor = PersonaEditor(console.config)

    def found(self, viewer: Viewer, name: str) -> PersonaFiles | None:
        if not sees_persona(viewer, self.console.config, name):
            return None
        try:
            return self.editor.files(name)
        except ConfigError:
            return None

    async def saved(self, viewer: Viewer, name: str, text: PersonaText) -> tuple[int, str] | PersonaFiles:
        """The new files, or the status and message of the refusal."""
        if not edits_persona(viewer, self.console.config, name):
            return 403, "another teacher's partner uses this persona too: only an administrator may change it"
        try:
            files = await self.editor.save(name, text.spec, text.soul, text.version)
        except (NoConfigFile, StaleFile) as error:
            return 409, str(error)
        except ConfigError as error:
            return 400, str(error)
        log.info("console persona saved persona=%s by=%s", name, viewer.username)
        return files

    def page(self, request: Request, viewer: Viewer, session: ConsoleSession, files: PersonaFiles, *, status: int = 200,
             text: PersonaText | None = None, error: str | None = None) -> Response:
        return self.console.render(
            request, "persona.html", status, viewer=viewer, csrf=session.csrf, persona=files.name, files=files,
            text=text or PersonaText.of(files), error=error, notice="persona_saved" if "saved" in request.query_params else None,
            editable=edits_persona(viewer, self.console.config, files.name), has_file=self.console.config.source is not None)

    async def persona_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        name = request.path_params["persona"]
        files = self.found(viewer, name)
        if files is None:
            return self.console.render(request, "message.html", 404, message="not_found")
        if request.method == "GET":
            return self.page(request, viewer, session, files)
        form = await read_form(request) or {}
        text = PersonaText(spec=form.get("spec", ""), soul=form.get("soul", ""), version=form.get("version", ""))
        outcome = await self.saved(viewer, name, text)
        if isinstance(outcome, tuple):
            return self.page(request, viewer, session, files, status=outcome[0], text=text, error=outcome[1])
        return RedirectResponse(f"/console/personas/{name}?saved=1", status_code=303)

    async def api_persona(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        name = request.path_params["persona"]
        files = self.found(viewer, name)
        if files is None:
            return error_response(404, "no such persona")
        if request.method == "GET":
            return JSONResponse(PersonaText.of(files).model_dump())
        raw = await read_limited(request, MAX_BODY_BYTES)
        if raw is None:
            return error_response(413, f"the body is over {MAX_BODY_BYTES // 1024} KiB")
        try:
            text = PersonaText.model_validate(decode_json(raw))
        except InvalidEvent as error:
            return error_response(400, str(error))
        except ValidationError as error:
            return error_response(422, "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()))
        outcome = await self.saved(viewer, name, text)
        if isinstance(outcome, tuple):
            return error_response(*outcome)
        return JSONResponse(PersonaText.of(outcome).model_dump())


def routes(console: Console) -> list[BaseRoute]:
    personas = Personas(console)
    return [
        Route("/personas/{persona}", console.guarded(personas.persona_page, api=False), methods=["GET", "POST"]),
        Route("/api/personas/{persona}", console.guarded(personas.api_persona, api=True), methods=["GET", "PUT"]),
    ]
