"""The console's routes: server-rendered pages, their JSON twins, and who gets what.

==============================  =========  ==========================================================
route                           method     viewer -> answer
==============================  =========  ==========================================================
``/console/login``              GET        anyone 200 (signed in: 303 to ``/console/``)
``/console/login``              POST       200-class: 303 + cookie; wrong name or password 401 (one
                                           answer for both); over the rate limit 429; stale form 403
``/console/setup?token=``       GET/POST   a live token 200 / 303 to sign-in; any other 404
``/console/logout``             POST       a session with its CSRF token: 303, session ended; no CSRF 403
``/console/``                   GET        signed in 200; stranger 303 to ``/console/login``
``/console/api/partners``       GET        signed in 200 (only what :class:`Viewer` sees); stranger 401
``/console/api/partners/{id}``  GET        sees it 200; not theirs or no such partner 404; stranger 401
``/console/api/users``          GET        administrator 200; teacher 403; stranger 401
``/console/api/openapi.json``   GET        signed in 200: the JSON API's OpenAPI document; stranger 401
``/console/static/...``         GET        anyone (the stylesheet)
==============================  =========  ==========================================================

A stranger is anyone without a live session: no cookie, a forged or expired one, a disabled user;
a cookie that opens no session is cleared in the answer.  Every ``/console/api`` route also takes an
API token, ``Authorization: Bearer <token>`` (:mod:`gateway.console.tokens`), in place of the cookie: it
acts as the user who made it, needs no CSRF token (it is sent by a script on purpose, never attached by a
browser on its own), and a header that opens nothing is 401 -- never a fall back to the cookie.  Every unsafe request of a session needs
its CSRF token (:mod:`gateway.console.signin`).  Pages say ``Cache-Control: no-store``, send a
``Referer`` only to the gateway itself (the setup link's token must not leave in one; ``no-referrer``
would make Chromium post the forms with ``Origin: null``, which the host guard rightly refuses) and
allow no script at all.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from gateway.configedit import ConfigEditor
from gateway.console import passwords
from gateway.console.access import Viewer
from gateway.console.areas import AREAS
from gateway.console.openapi import Operation, describe, openapi
from gateway.console.services import ConsoleGateway
from gateway.console.signin import (
    CSRF_FIELD,
    FORM_COOKIE,
    SESSION_COOKIE,
    SESSION_TTL_S,
    SignInLimit,
    clear_session,
    csrf_of,
    form_token,
    new_secret,
    read_form,
    same,
    secure,
    set_form_cookie,
    set_session,
)
from gateway.console.texts import language_of, words
from gateway.console.tokens import is_console_token
from gateway.core.config import Config, PartnerConfig
from gateway.http.admin import REALM, bearer
from gateway.http.responses import error_response
from gateway.store import Store
from gateway.store.console import ConsoleSession, ConsoleUser, Role, normal_username

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
USERNAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
}
_templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))


class PartnerSummary(BaseModel):
    """A partner as the console lists it."""

    id: str
    name: str
    persona: str
    owners: list[str]
    """Its teachers' accounts, ``CHANNEL:USER``."""

    @classmethod
    def of(cls, partner: PartnerConfig) -> PartnerSummary:
        return cls(id=partner.id, name=partner.name, persona=partner.persona,
                   owners=[f"{owner.channel}:{owner.user}" for owner in partner.owners])


class UserSummary(BaseModel):
    """A console user as an administrator lists them (never the hash)."""

    username: str
    display_name: str
    role: Role
    teacher: str | None
    created_at: float
    disabled: bool

    @classmethod
    def of(cls, user: ConsoleUser) -> UserSummary:
        return cls(username=user.username, display_name=user.display_name, role=user.role, teacher=user.teacher,
                   created_at=user.created_at, disabled=user.disabled)


class PartnerList(BaseModel):
    partners: list[PartnerSummary]


class UserList(BaseModel):
    users: list[UserSummary]


class OpenApiDocument(BaseModel):
    """The OpenAPI 3.1 document itself (its shape is OpenAPI's)."""

    model_config = {"extra": "allow"}

    openapi: str


Handler = Callable[[Request, Viewer, ConsoleSession], Awaitable[Response]]


class Console:
    """The routes of one gateway's console, over its config and store, and the running gateway's services.

    ``gateway`` is what the areas of the console (conversations, learners, channels...) read and
    operate; it is None only where a test builds the routes without a gateway to list them."""

    def __init__(self, config: Config, store: Store, limit: SignInLimit | None = None, *,
                 gateway: ConsoleGateway | None = None) -> None:
        self._config, self.store, self.gateway = config, store, gateway
        self.limit = limit or SignInLimit()
        self._openapi: dict[str, Any] | None = None
        self.editor = ConfigEditor(config.source, config.secrets)
        """The one writer of the config file: every area's edits queue on its lock (ADR 0039)."""

    @property
    def config(self) -> Config:
        """The running gateway's config, so a partner added in the console is in sight at once (ADR 0039)."""
        return self.gateway.config if self.gateway is not None else self._config

    # ------------------------------------------------------------------ rendering

    def _secure(self, request: Request) -> bool:
        return secure(request, self.config.http.public_url)

    def word(self, request: Request, key: str) -> str:
        """One of the console's words in the language the browser asks for (a message a handler words itself)."""
        return words(language_of(request.headers.get("accept-language")))[key]

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        language = language_of(request.headers.get("accept-language"))
        body = _templates.get_template(template).render(t=words(language), lang=language, path=request.url.path, **values)
        return HTMLResponse(body, status_code=status, headers={**HEADERS, "Content-Language": language})

    def refuse(self, request: Request, status: int, *, api: bool, detail: str, message: str) -> Response:
        """One refusal two ways: the JSON error ``detail`` for the API, the ``message`` page for a browser."""
        if api:
            return error_response(status, detail)
        return self.render(request, "message.html", status, message=message)

    def _form_page(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A pre-session form, with its double-submit token (cookie and field)."""
        token, fresh = form_token(request)
        response = self.render(request, template, status, form_token=token, **values)
        if fresh:
            set_form_cookie(response, token, secure=self._secure(request))
        return response

    # ------------------------------------------------------------------ who is asking

    async def session_of(self, request: Request) -> ConsoleSession | None:
        presented = request.cookies.get(SESSION_COOKIE)
        if not presented or len(presented) > 100:
            return None
        return await self.store.session(presented)

    def guarded(self, handler: Handler, *, api: bool, administrators_only: bool = False) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` for signed-in viewers only: strangers are sent to sign in (pages) or 401 (API);
        unsafe methods need the session's CSRF token (403); ``administrators_only`` answers a teacher 403."""

        async def endpoint(request: Request) -> Response:
            if api and "authorization" in request.headers:
                return await self._by_token(request, handler, administrators_only)
            session = await self.session_of(request)
            if session is None:
                response: Response = (error_response(401, "sign in to the console first") if api
                                      else RedirectResponse("/console/login", status_code=303, headers=HEADERS))
                if SESSION_COOKIE in request.cookies:
                    clear_session(response, secure=self._secure(request))
                return response
            viewer = Viewer.of(session.user)
            if request.method not in ("GET", "HEAD") and not same(csrf_of(request, await read_form(request)), session.csrf):
                return error_response(403, "the request lacks this session's CSRF token")
            if administrators_only and not viewer.administers:
                return error_response(403, "only an administrator may do this")
            return await handler(request, viewer, session)

        return endpoint

    async def _by_token(self, request: Request, handler: Handler, administrators_only: bool) -> Response:
        """An API request with ``Authorization``: a live token's user, or 401 -- the cookie is not looked at."""
        presented = bearer(request.headers["authorization"])
        if presented is None:
            return error_response(401, "send the token as `Authorization: Bearer <token>`", {"WWW-Authenticate": REALM})
        found = await self.store.api_token_user(presented) if is_console_token(presented) else None
        if found is None:
            return error_response(401, "this token opens nothing: unknown, revoked or expired, or its user is disabled",
                                  {"WWW-Authenticate": f'{REALM}, error="invalid_token"'})
        user, token = found
        viewer = Viewer.of(user)
        if administrators_only and not viewer.administers:
            return error_response(403, "only an administrator may do this")
        # A session in form only: its CSRF token is a fresh secret nobody holds, so nothing can match it.
        session = ConsoleSession(user, new_secret(), token.created_at, token.expires_at or float("inf"))
        return await handler(request, viewer, session)

    # ------------------------------------------------------------------ sign-in and out

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            if await self.session_of(request) is not None:
                return RedirectResponse("/console/", status_code=303, headers=HEADERS)
            notice = ("administrator_created" if "created" in request.query_params
                      else "signed_out" if "signed_out" in request.query_params else None)
            return self._form_page(request, "login.html", notice=notice)
        form = await read_form(request)
        if form is None:
            return error_response(400, "send the sign-in form as application/x-www-form-urlencoded")
        if not same(form.get(CSRF_FIELD), request.cookies.get(FORM_COOKIE) or ""):
            return self._form_page(request, "login.html", 403, error="form_expired")
        username = normal_username(form.get("username", ""))[:64]
        address = request.client.host if request.client else ""
        wait_s = self.limit.wait_s(username, address)
        if wait_s:
            log.warning("console sign-in refused reason=rate_limited address=%s", address)
            limited = self._form_page(request, "login.html", 429, error="too_many_failures", minutes=-(-wait_s // 60))
            limited.headers["Retry-After"] = str(wait_s)
            return limited
        user = await self.store.console_user(username) if username else None
        matches = await passwords.verify(user.password_hash if user else None, form.get("password", ""))
        if user is None or not matches or user.disabled:
            self.limit.failed(username, address)
            log.info("console sign-in refused reason=bad_credentials address=%s", address)
            return self._form_page(request, "login.html", 401, error="bad_credentials", username=username)
        self.limit.succeeded(username)
        session_id = new_secret()
        await self.store.open_session(user.username, session_id, new_secret(), SESSION_TTL_S)
        log.info("console signed in user=%s role=%s", user.username, user.role.value)
        response = RedirectResponse("/console/", status_code=303, headers=HEADERS)
        set_session(response, session_id, secure=self._secure(request))
        return response

    async def logout(self, request: Request) -> Response:
        session = await self.session_of(request)
        response = RedirectResponse("/console/login?signed_out=1", status_code=303, headers=HEADERS)
        if session is not None:
            if not same(csrf_of(request, await read_form(request)), session.csrf):
                return error_response(403, "the request lacks this session's CSRF token")
            await self.store.end_session(request.cookies[SESSION_COOKIE])
            log.info("console signed out user=%s", session.user.username)
        clear_session(response, secure=self._secure(request))
        return response

    async def setup(self, request: Request) -> Response:
        form = await read_form(request) if request.method == "POST" else None
        token = (form or {}).get("token", "") if request.method == "POST" else request.query_params.get("token", "")
        if not token or len(token) > 100 or not await self.store.setup_token_live(token):
            return self.render(request, "message.html", 404, message="setup_invalid")
        if request.method == "GET":
            return self._form_page(request, "setup.html", token=token)
        assert form is not None  # a live token came from a parsed form
        if not same(form.get(CSRF_FIELD), request.cookies.get(FORM_COOKIE) or ""):
            return self._form_page(request, "setup.html", 403, token=token, error="form_expired")
        username = normal_username(form.get("username", ""))
        display_name = form.get("display_name", "").strip()[:100] or username
        password = form.get("password", "")
        error = ("username_rule" if not USERNAME.fullmatch(username)
                 else "password_rule" if not passwords.acceptable(password)
                 else "passwords_differ" if not same(form.get("password_again"), password)
                 else None)
        if error is not None:
            return self._form_page(request, "setup.html", 400, token=token, error=error, username=username,
                                   display_name=display_name, minimum=passwords.MIN_CHARS, maximum=passwords.MAX_CHARS)
        user = ConsoleUser(username, display_name, Role.ADMINISTRATOR, None, passwords.hash_password(password), time.time())
        if not await self.store.redeem_setup_token(token, user):  # used or voided since the form was shown
            return self.render(request, "message.html", 404, message="setup_invalid")
        log.info("console first administrator created user=%s", username)
        return RedirectResponse("/console/login?created=1", status_code=303, headers=HEADERS)

    # ------------------------------------------------------------------ what a viewer sees

    async def home(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return self.render(request, "partners.html", viewer=viewer, csrf=session.csrf,
                           partners=[PartnerSummary.of(p) for p in viewer.partners(self.config)])

    async def api_partners(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return JSONResponse(PartnerList(partners=[PartnerSummary.of(p) for p in viewer.partners(self.config)]).model_dump())

    async def api_partner(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        partner = viewer.partner(self.config, request.path_params["partner"])
        if partner is None:  # not there, or not theirs: the same answer
            return error_response(404, "no such partner")
        return JSONResponse(PartnerSummary.of(partner).model_dump())

    async def api_users(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return JSONResponse(UserList(users=[UserSummary.of(u) for u in await self.store.console_users()]).model_dump(mode="json"))

    async def api_openapi(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        if self._openapi is None:  # the routes are fixed once the app is built
            from gateway import __version__

            self._openapi = openapi(request.app.routes, "Partners Gateway: console and admin API", __version__)
        return JSONResponse(self._openapi)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/console", lambda request: RedirectResponse("/console/", status_code=303)),
            Mount("/console", routes=[
                Route("/", self.guarded(self.home, api=False)),
                Route("/login", self.login, methods=["GET", "POST"]),
                Route("/logout", self.logout, methods=["POST"]),
                Route("/setup", self.setup, methods=["GET", "POST"]),
                Route("/api/partners", describe(self.guarded(self.api_partners, api=True),
                                                get=Operation("The partners in sight", answers=PartnerList))),
                Route("/api/partners/{partner}", describe(self.guarded(self.api_partner, api=True),
                                                          get=Operation("One partner in sight", answers=PartnerSummary))),
                Route("/api/users", describe(self.guarded(self.api_users, api=True, administrators_only=True),
                                             get=Operation("The console's users (administrators only)", answers=UserList))),
                Route("/api/openapi.json", describe(self.guarded(self.api_openapi, api=True),
                                                    get=Operation("This document", answers=OpenApiDocument))),
                Mount("/static", app=StaticFiles(directory=HERE / "static"), name="console-static"),
                *[route for area in AREAS for route in area(self)],
            ]),
        ]


def console_routes(config: Config, store: Store, gateway: ConsoleGateway) -> list[BaseRoute]:
    return Console(config, store, gateway=gateway).routes()
