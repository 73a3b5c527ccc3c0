"""The teachers' JSON API over memory controls, for a web console.

The same operations as ``partners memory`` (see ``brain.memory.controls``),
over HTTP under ``/api/v1``.  Its tokens are the console's API tokens
(``/console/tokens``, ADR 0041): a teacher's reaches the partners that teacher
sees in the console, an administrator's every partner.  The config's tokens,
now deprecated, keep working: each teacher's in ``http.admin_tokens`` (reaching
only the partners that teacher owns), the operator's in ``http.admin_token``
(reaching every partner).  Without a store and without a config token the API
is off (404).
Every request carries ``Authorization: Bearer <token>`` (RFC 6750: the scheme
is required, in any case); a missing or wrong one is answered 401 with
``WWW-Authenticate: Bearer``, a partner the token does not reach 403.  Tokens
are compared in constant time, every one of them on every request.  A learner
is named by one of their identities, ``CHANNEL:ACCOUNT:USER``; the partner
decides whose teacher scope is used.

    GET    /api/v1/partners/{partner}/learners/{identity}/memory        export (JSON)
    GET    /api/v1/partners/{partner}/learners/{identity}/memory.md     notes, facts and history as Markdown
    PUT    /api/v1/partners/{partner}/learners/{identity}/memory        {"markdown": "..."} replaces the notes
    DELETE /api/v1/partners/{partner}/learners/{identity}/memory        ?keep_history=true keeps conversations

A ``PUT`` body is at most :data:`MAX_NOTES_BYTES`; a larger one is refused
with 413 before it is read further.

The controls are the gateway's own brain's (``brain.factory.BuiltBrain.memory``):
a ``PUT`` or ``DELETE`` waits for the learner's running turn, which would
otherwise write back what was just deleted (``brain.memory.guarded``), and a
turn that does not end within the wait is answered 409 with ``Retry-After``.
A gateway running a plugged-in responder has no brain memory to control: the
API answers 503 and says so.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gateway.console.access import Viewer
from gateway.console.openapi import Operation, describe
from gateway.core.config import AdminToken, Config, PartnerConfig
from gateway.core.errors import InvalidEvent
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.memory.guarded import GuardedControls
    from gateway.store.tokens import ApiTokenStore

PREFIX = "/api/v1/partners/{partner}/learners/{identity}/memory"
MAX_NOTES_BYTES = 64 * 1024
"""A learner's notes are a page or two; the model reads only their first few thousand characters."""
REALM = 'Bearer realm="partners"'
OPERATOR: Literal["operator"] = "operator"
"""The holder of ``http.admin_token``: every partner."""


def bearer(header: str) -> str | None:
    """The credentials of an ``Authorization: Bearer ...`` header (scheme in any case); None for any other."""
    scheme, _, credentials = header.strip().partition(" ")
    credentials = credentials.strip()
    return credentials if scheme.lower() == "bearer" and credentials else None


def holder(config: Config, presented: str) -> AdminToken | Literal["operator"] | None:
    """Whose token this is.  Every configured token is compared, so the time taken says nothing of which matched."""
    given = presented.encode()
    found: AdminToken | Literal["operator"] | None = None
    if config.http.admin_token is not None and hmac.compare_digest(given, config.http.admin_token.get_secret_value().encode()):
        found = OPERATOR
    for entry in config.http.admin_tokens:
        if hmac.compare_digest(given, entry.token.get_secret_value().encode()) and found is None:
            found = entry
    return found


async def console_holder(tokens: ApiTokenStore | None, presented: str) -> Viewer | None:
    """The console user a console API token acts as (:mod:`gateway.console.tokens`); None for any other string."""
    from gateway.console.tokens import is_console_token

    if tokens is None or not is_console_token(presented):
        return None
    found = await tokens.api_token_user(presented)
    viewer = Viewer.of(found[0]) if found is not None else None
    return viewer if viewer is not None and viewer.signed_in else None


class MemoryExport(BaseModel):
    """Everything kept for the learner: notes with footnote provenance, facts, preferences, history."""

    model_config = ConfigDict(extra="allow")


class NotesBody(BaseModel):
    markdown: str


class NotesSaved(BaseModel):
    footnotes_kept: int


class DeleteQuery(BaseModel):
    keep_history: bool = False


class Deleted(BaseModel):
    deleted: dict[str, int]
    """What was removed, by kind (facts, preferences, notes, conversations)."""


RETRY_AFTER_S = 5
"""What a 409 for a running turn suggests: turns end in seconds."""
NO_BRAIN = ("the memory controls are not available: this gateway runs a plugged-in responder "
            "(PARTNERS_RESPONDER or an embedding program's), not its own brain")


def admin_routes(config: Config, memory: GuardedControls | None, tokens: ApiTokenStore | None = None) -> list[Route]:
    """``memory``: the gateway's brain's controls; None with a plugged-in responder.  ``tokens``: the store
    that keeps the console's API tokens; None where there is no store (then only the config's tokens work)."""
    enabled = tokens is not None or config.http.admin_token is not None or bool(config.http.admin_tokens)

    async def handle(request: Request) -> Response:
        if not enabled:
            return error_response(404, "the admin API is off: make an API token at /console/tokens (the gateway needs its store)")
        presented = bearer(request.headers.get("authorization", ""))
        if presented is None:
            return error_response(401, "send the token as `Authorization: Bearer <token>`", {"WWW-Authenticate": REALM})
        viewer = await console_holder(tokens, presented)
        who = holder(config, presented) if viewer is None else None
        if viewer is None and who is None:
            return error_response(401, "a valid bearer token is required", {"WWW-Authenticate": f'{REALM}, error="invalid_token"'})
        name = request.path_params["partner"]
        partner = _partner(config, name)
        if isinstance(who, AdminToken) and (partner is None or not who.covers(partner)):  # unknown or not theirs: the same answer
            return error_response(403, f"this token does not reach partner {name!r}: it covers {who.teacher}'s partners only",
                          {"WWW-Authenticate": f'{REALM}, error="insufficient_scope"'})
        if viewer is not None and not viewer.administers and (partner is None or not viewer.sees(partner)):
            return error_response(403, f"this token does not reach partner {name!r}: it covers {viewer.teacher}'s partners only",
                                  {"WWW-Authenticate": f'{REALM}, error="insufficient_scope"'})
        if partner is None:
            return error_response(404, f"no partner {name!r}")
        if memory is None:
            return error_response(503, NO_BRAIN)
        return await _operate(memory, partner, request)

    async def handle_md(request: Request) -> Response:
        return await handle(request)

    return [
        Route(PREFIX, describe(handle, get=Operation("Export a learner's memory", answers=MemoryExport),
                               put=Operation("Replace a learner's notes", answers=NotesSaved, body=NotesBody),
                               delete=Operation("Delete a learner's memory", answers=Deleted, query=DeleteQuery)),
              methods=["GET", "PUT", "DELETE"]),
        Route(PREFIX + ".md", describe(handle_md, get=Operation("A learner's memory as Markdown", media="text/markdown")),
              methods=["GET"]),
    ]


def _partner(config: Config, partner_id: str) -> PartnerConfig | None:
    try:
        return config.partner(partner_id)
    except KeyError:
        return None


async def _operate(controls: GuardedControls, partner: PartnerConfig, request: Request) -> Response:
    from brain.memory.guarded import TurnRunning
    from brain.memory.scopes import Identity, learner_scope, teacher_of

    try:
        identity = Identity.parse(request.path_params["identity"])
    except ValueError as error:
        return error_response(400, str(error))
    teacher = teacher_of(partner)
    person = await controls.person(teacher, identity)
    if person is None:
        return error_response(404, f"{identity} has not written to {partner.id} or its teacher's other partners")
    scope = learner_scope(teacher, person)
    if request.method == "GET" and request.url.path.endswith(".md"):
        return PlainTextResponse(await controls.markdown(scope), media_type="text/markdown; charset=utf-8")
    if request.method == "GET":
        return JSONResponse(await controls.export(scope))
    try:
        if request.method == "DELETE":
            keep = request.query_params.get("keep_history", "").lower() in ("1", "true", "yes")
            return JSONResponse({"deleted": await controls.delete(scope, history=not keep)})
        raw = await read_limited(request, MAX_NOTES_BYTES)
        if raw is None:
            return error_response(413, f"the notes are larger than {MAX_NOTES_BYTES // 1024} KiB; shorten them and send again")
        try:
            body = decode_json(raw)
            markdown = body["markdown"]
            if not isinstance(markdown, str):
                raise TypeError
        except InvalidEvent as error:
            return error_response(400, f'{error}; send JSON {{"markdown": "..."}}')
        except (KeyError, TypeError):
            return error_response(400, 'send JSON {"markdown": "..."}')
        document = await controls.edit(scope, markdown)
        return JSONResponse({"footnotes_kept": len(document.footnotes)})
    except TurnRunning as error:
        return error_response(409, str(error), {"Retry-After": str(RETRY_AFTER_S)})
