"""The console's API tokens page: a user makes tokens for their scripts, sees them, and revokes them (ADR 0041).

=================================  ======  ==============================================================
route                              method  viewer -> answer
=================================  ======  ==============================================================
``/console/tokens``                GET     signed in 200: their tokens (an administrator: everyone's)
``/console/tokens``                POST    form ``name``, ``expires_in_days``: 200, the new token shown once
``/console/tokens/{id}/revoke``    POST    303 back to the page; a token not theirs (or none) 404
``/console/api/tokens``            GET     the same list as JSON
``/console/api/tokens``            POST    JSON ``{"name", "expires_in_days"}``: 201 with the token; by a token 403
``/console/api/tokens/{id}``       DELETE  revoke it: 200; not theirs or none 404
=================================  ======  ==============================================================

A token acts as the user who made it: the same :class:`~gateway.console.access.Viewer`, so a teacher's
token sees only their partners.  A token can list and revoke tokens -- a script that finds itself leaked
revokes itself -- but not make one: a stolen token must not be able to outlive its revocation by
minting a successor.  The secret is in the answer that makes it and nowhere else: never logged, never
listed, kept only as its digest (:mod:`gateway.store.tokens`).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer
from gateway.console.openapi import Operation, describe
from gateway.console.signin import read_form
from gateway.core.errors import InvalidEvent
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.store.console import ConsoleSession
from gateway.store.tokens import MAX_TOKENS_PER_USER, ApiToken

if TYPE_CHECKING:  # pages imports the areas
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

PREFIX = "pgt_"
"""Every console token starts so: the admin API tells it from a config token, and secret scanners can find one."""
MAX_BODY_BYTES = 4096
MAX_DAYS = 3650


def new_token() -> tuple[str, str]:
    """(public id, secret) of a new token: 16 hex digits, and 32 random bytes after :data:`PREFIX`."""
    return secrets.token_hex(8), PREFIX + secrets.token_urlsafe(32)


def is_console_token(presented: str) -> bool:
    return presented.startswith(PREFIX) and len(presented) <= 100


class NewToken(BaseModel):
    """What a user asks for: a name to know the token by, and an expiry in days (none: until revoked).

    A lone surrogate, which JSON can spell and SQLite cannot store, is already refused by pydantic's ``str``."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")
    expires_in_days: int | None = Field(default=None, ge=1, le=MAX_DAYS)


class TokenSummary(BaseModel):
    """A token as lists show it: never its secret."""

    id: str
    username: str
    name: str
    created_at: float
    last_used_at: float | None
    expires_at: float | None

    @classmethod
    def of(cls, token: ApiToken) -> TokenSummary:
        return cls(id=token.id, username=token.username, name=token.name, created_at=token.created_at,
                   last_used_at=token.last_used_at, expires_at=token.expires_at)


class TokenList(BaseModel):
    tokens: list[TokenSummary]


class MadeToken(BaseModel):
    """The answer that makes a token: the only time its secret is shown."""

    token: str
    """Send it as ``Authorization: Bearer <token>``."""
    summary: TokenSummary


class Revoked(BaseModel):
    revoked: str


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def by_bearer(request: Request) -> bool:
    """Whether the request came with a token (the guard let it in by one) rather than a session."""
    return "authorization" in request.headers


class Tokens:
    """The token routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def listed(self, viewer: Viewer) -> list[ApiToken]:
        return await self.console.store.api_tokens(None if viewer.administers else viewer.username)

    async def make(self, viewer: Viewer, asked: NewToken) -> tuple[str, ApiToken] | None:
        """A new token of the viewer's; None when they hold :data:`MAX_TOKENS_PER_USER` already."""
        assert viewer.username is not None  # the guard lets only signed-in viewers in
        token_id, secret = new_token()
        now = time.time()
        token = ApiToken(token_id, viewer.username, asked.name, now, None,
                         now + asked.expires_in_days * 86400.0 if asked.expires_in_days else None)
        if not await self.console.store.add_api_token(token, secret):
            return None
        log.info("console token created id=%s user=%s expires=%s", token_id, viewer.username,
                 "never" if token.expires_at is None else int(token.expires_at))
        return secret, token

    async def revoke(self, viewer: Viewer, token_id: str) -> bool:
        owner = None if viewer.administers else viewer.username
        done = len(token_id) <= 64 and await self.console.store.revoke_api_token(token_id, owner)
        if done:
            log.info("console token revoked id=%s by=%s", token_id, viewer.username)
        return done

    # ------------------------------------------------------------------ the page

    async def page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        made: MadeToken | None = None
        error, status = None, 200
        if request.method == "POST":
            form = await read_form(request) or {}
            try:
                asked = NewToken.model_validate({"name": form.get("name", ""), "expires_in_days": form.get("expires_in_days") or None})
            except ValidationError:
                asked, error, status = None, "token_rule", 400
            if asked is not None:
                result = await self.make(viewer, asked)
                if result is None:
                    error, status = "token_limit", 409
                else:
                    made = MadeToken(token=result[0], summary=TokenSummary.of(result[1]))
        notice = "token_revoked" if "revoked" in request.query_params else None
        return self.console.render(request, "tokens.html", status, viewer=viewer, csrf=session.csrf, made=made, error=error,
                                   notice=notice, tokens=[TokenSummary.of(t) for t in await self.listed(viewer)],
                                   max_days=MAX_DAYS, limit=MAX_TOKENS_PER_USER, when=_when)

    async def revoke_form(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        if not await self.revoke(viewer, request.path_params["token"]):
            return self.console.render(request, "message.html", 404, viewer=viewer, csrf=session.csrf, message="not_found")
        return RedirectResponse("/console/tokens?revoked=1", status_code=303, headers={"Cache-Control": "no-store"})

    # ------------------------------------------------------------------ the JSON twins

    async def api_tokens(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        if request.method == "GET":
            return JSONResponse(TokenList(tokens=[TokenSummary.of(t) for t in await self.listed(viewer)]).model_dump())
        if by_bearer(request):
            return error_response(403, "a token cannot make tokens: make one at /console/tokens or with `partners console token create`")
        raw = await read_limited(request, MAX_BODY_BYTES)
        if raw is None:
            return error_response(413, f"the request body is larger than {MAX_BODY_BYTES} bytes")
        try:
            asked = NewToken.model_validate(decode_json(raw))
        except InvalidEvent as problem:
            return error_response(400, f'{problem}; send JSON {{"name": "...", "expires_in_days": 90}}')
        except ValidationError as problem:
            first = problem.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the body"
            return error_response(400, f"{where}: {first['msg']}; send JSON {{\"name\": \"...\", \"expires_in_days\": 90}}")
        result = await self.make(viewer, asked)
        if result is None:
            return error_response(409, f"you hold {MAX_TOKENS_PER_USER} tokens already: revoke one first")
        return JSONResponse(MadeToken(token=result[0], summary=TokenSummary.of(result[1])).model_dump(), status_code=201,
                            headers={"Cache-Control": "no-store"})

    async def api_revoke(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        token_id = request.path_params["token"]
        if not await self.revoke(viewer, token_id):
            return error_response(404, "no such token")
        return JSONResponse(Revoked(revoked=token_id).model_dump())


def routes(console: Console) -> list[BaseRoute]:
    area = Tokens(console)
    guarded = console.guarded
    return [
        Route("/tokens", guarded(area.page, api=False), methods=["GET", "POST"]),
        Route("/tokens/{token}/revoke", guarded(area.revoke_form, api=False), methods=["POST"]),
        Route("/api/tokens", describe(guarded(area.api_tokens, api=True),
                                      get=Operation("Your API tokens (an administrator: everyone's)", answers=TokenList),
                                      post=Operation("Make an API token; the answer is the only time it is shown",
                                                     answers=MadeToken, status=(201,), body=NewToken)),
              methods=["GET", "POST"]),
        Route("/api/tokens/{token}", describe(guarded(area.api_revoke, api=True),
                                              delete=Operation("Revoke an API token", answers=Revoked)),
              methods=["DELETE"]),
    ]
