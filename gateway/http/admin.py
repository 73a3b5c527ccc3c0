"""The teachers' JSON API over memory controls, for a web console.

The same operations as ``partners memory`` (see ``brain.memory.controls``),
over HTTP under ``/api/v1``.  It is off until ``http.admin_token`` is set
(``env:NAME``); every request must then carry ``Authorization: Bearer <token>``,
compared in constant time.  A learner is named by one of their identities,
``CHANNEL:ACCOUNT:USER``; the partner decides whose teacher scope is used.

    GET    /api/v1/partners/{partner}/learners/{identity}/memory        export (JSON)
    GET    /api/v1/partners/{partner}/learners/{identity}/memory.md     notes, facts and history as Markdown
    PUT    /api/v1/partners/{partner}/learners/{identity}/memory        {"markdown": "..."} replaces the notes
    DELETE /api/v1/partners/{partner}/learners/{identity}/memory        ?keep_history=true keeps conversations
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gateway.errors import InvalidEvent
from gateway.jsonbody import decode_json

if TYPE_CHECKING:
    from gateway.config import Config

PREFIX = "/api/v1/partners/{partner}/learners/{identity}/memory"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def admin_routes(config: "Config") -> list[Route]:
    token = config.http.admin_token

    async def handle(request: Request) -> Response:
        if token is None:
            return _error(404, "the admin API is off: set http.admin_token (env:NAME) to turn it on")
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
            return _error(401, "a valid bearer token is required")
        try:
            partner = config.partner(request.path_params["partner"])
        except KeyError:
            return _error(404, f"no partner {request.path_params['partner']!r}")
        return await _operate(config, partner, request)

    return [
        Route(PREFIX, handle, methods=["GET", "PUT", "DELETE"]),
        Route(PREFIX + ".md", handle, methods=["GET"]),
    ]


async def _operate(config: "Config", partner: Any, request: Request) -> Response:
    from brain.memory import MEMORY_FILE
    from brain.memory.controls import MemoryControls
    from brain.memory.scopes import Identity, learner_scope, teacher_of
    from brain.memory.store import MemoryStore
    from brain.session_log import SessionLog
    from brain.usage import UsageLedger

    try:
        identity = Identity.parse(request.path_params["identity"])
    except ValueError as error:
        return _error(400, str(error))
    store, log, usage = MemoryStore(config.data_dir / MEMORY_FILE), SessionLog(config.data_dir / "brain.db"), UsageLedger(config.data_dir / "brain.db")
    try:
        controls = MemoryControls(store, log, usage)
        teacher = teacher_of(partner)
        person = await controls.person(teacher, identity)
        if person is None:
            return _error(404, f"{identity} has not written to {partner.id} or its teacher's other partners")
        scope = learner_scope(teacher, person)
        if request.method == "GET" and request.url.path.endswith(".md"):
            return PlainTextResponse(await controls.markdown(scope), media_type="text/markdown; charset=utf-8")
        if request.method == "GET":
            return JSONResponse(await controls.export(scope))
        if request.method == "DELETE":
            keep = request.query_params.get("keep_history", "").lower() in ("1", "true", "yes")
            return JSONResponse({"deleted": await controls.delete(scope, history=not keep)})
        try:
            body = decode_json(await request.body())
            markdown = body["markdown"]
            if not isinstance(markdown, str):
                raise TypeError
        except InvalidEvent as error:
            return _error(400, f'{error}; send JSON {{"markdown": "..."}}')
        except (KeyError, TypeError):
            return _error(400, 'send JSON {"markdown": "..."}')
        document = await controls.edit(scope, markdown)
        return JSONResponse({"footnotes_kept": len(document.footnotes)})
    finally:
        store.close()
        log.close()
        usage.close()
