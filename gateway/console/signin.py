"""Signing in to the console: the session cookie, CSRF tokens, forms and the sign-in rate limit.

**Sessions.**  A sign-in makes a random 32-byte session id; the browser holds it in the
``partners_console`` cookie (HttpOnly, SameSite=Lax, path ``/console``, ``Secure`` when the request
came over https -- directly, or through a proxy uvicorn trusts (``FORWARDED_ALLOW_IPS``) that says
``X-Forwarded-Proto: https`` -- or when ``http.public_url`` is https).  The store keeps only the id's
digest, with its user, its CSRF token and an expiry :data:`SESSION_TTL_S` after sign-in; signing
out deletes the row, so a copied cookie dies with it.

**CSRF.**  Every unsafe request of a session carries that session's token, as the form field
``csrf`` or the ``X-CSRF-Token`` header, compared with :func:`hmac.compare_digest`.  The forms shown
before there is a session (sign-in, first administrator) use a double-submit token instead: a random
value in a SameSite=Strict cookie that the form must repeat.  On top of both, the app's host guard
refuses writes whose ``Origin``/``Sec-Fetch-Site`` name another site (:mod:`gateway.http.hosts`).

**Rate limit.**  Failed sign-ins are counted in a sliding window of :data:`WINDOW_S`, per username
(:data:`MAX_FAILURES_PER_USER`) and per client address (:data:`MAX_FAILURES_PER_ADDRESS`); past
either, sign-in answers 429 with ``Retry-After`` *before* any password is checked, so guessing is
slow for one account and for one machine spraying many.  A success clears that username's count.
The counts live in the serving process: a restart forgets them, which costs a guesser a restart of
someone else's gateway -- not a way in.
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from cachetools import TTLCache
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from gateway.http.body import read_limited

SESSION_COOKIE = "partners_console"
FORM_COOKIE = "partners_console_form"
COOKIE_PATH = "/console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_TTL_S = 12 * 3600.0
"""A working day: a teacher signs in in the morning and is not asked again before evening."""
SETUP_TTL_S = 24 * 3600.0
"""How long the first-start link stays good."""
WINDOW_S = 15 * 60.0
MAX_FAILURES_PER_USER = 5
"""Five wrong passwords for one name in a quarter of an hour: a typo or two, not a guesser."""
MAX_FAILURES_PER_ADDRESS = 20
"""A classroom behind one address may hold several teachers mistyping; twenty is past any of them."""
MAX_FORM_BYTES = 16 * 1024
_TRACKED = 10_000
"""Usernames and addresses counted at once; the oldest fall out first (a flood cannot grow memory)."""


def new_secret() -> str:
    """A session id, CSRF token or setup token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def same(given: str | None, expected: str) -> bool:
    """Constant-time equality of two tokens; a missing one is never equal."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def secure(request: Request, public_url: str | None) -> bool:
    return request.url.scheme == "https" or (public_url or "").startswith("https://")


def set_session(response: Response, session_id: str, *, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, session_id, max_age=int(SESSION_TTL_S), path=COOKIE_PATH,
                        secure=secure, httponly=True, samesite="lax")


def clear_session(response: Response, *, secure: bool) -> None:
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, secure=secure, httponly=True, samesite="lax")


def form_token(request: Request) -> tuple[str, bool]:
    """The double-submit token of a pre-session form: the browser's, or a new one (True: set its cookie)."""
    token = request.cookies.get(FORM_COOKIE)
    if token and len(token) <= 100:
        return token, False
    return new_secret(), True


def set_form_cookie(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(FORM_COOKIE, token, path=COOKIE_PATH, secure=secure, httponly=True, samesite="strict")


FORM_STATE = "console_form"
"""Where :func:`read_form` keeps what it parsed on ``request.state``: the guard reads the CSRF field first,
and the handler behind it reads the same form again (the body can be read from the wire only once)."""
MAX_UPLOAD_FIELDS = 10


async def read_form(request: Request) -> dict[str, str] | None:
    """A form body's text fields as single values; None when too large or not a form.

    ``application/x-www-form-urlencoded`` up to :data:`MAX_FORM_BYTES`; ``multipart/form-data`` (an upload)
    within the app's body limit, parsed by Starlette, whose parsed form -- files included -- the handler then
    gets from ``request.form()`` again."""
    if hasattr(request.state, FORM_STATE):
        return getattr(request.state, FORM_STATE)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    parsed: dict[str, str] | None = None
    if kind == "application/x-www-form-urlencoded":
        parsed = await _urlencoded(request)
    elif kind == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=MAX_UPLOAD_FIELDS)
        except HTTPException as error:
            if error.status_code == 413:
                raise  # over the app's body limit: its 413, not "no form"
            form = None
        parsed = None if form is None else {key: value for key, value in form.items() if isinstance(value, str)}
    setattr(request.state, FORM_STATE, parsed)
    return parsed


async def _urlencoded(request: Request) -> dict[str, str] | None:
    raw = await read_limited(request, MAX_FORM_BYTES)
    if raw is None:
        return None
    try:
        parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return {key: values[0] for key, values in parsed.items()}


def csrf_of(request: Request, form: Mapping[str, str] | None) -> str | None:
    """The CSRF token a request presents: its header, else its form field."""
    return request.headers.get(CSRF_HEADER) or (form or {}).get(CSRF_FIELD)


@dataclass
class FailureWindow:
    """Failed sign-ins per key within :data:`WINDOW_S` (a username, or a client address)."""

    limit: int
    window_s: float = WINDOW_S
    _seen: TTLCache[str, tuple[float, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self._seen = TTLCache(maxsize=_TRACKED, ttl=self.window_s)

    def _recent(self, key: str, now: float) -> tuple[float, ...]:
        return tuple(at for at in self._seen.get(key, ()) if at > now - self.window_s)

    def wait_s(self, key: str) -> int:
        """Seconds until ``key`` may try again; 0 when it may now."""
        now = time.monotonic()
        recent = self._recent(key, now)
        if len(recent) < self.limit:
            return 0
        return max(1, math.ceil(recent[-self.limit] + self.window_s - now))

    def failed(self, key: str) -> None:
        now = time.monotonic()
        self._seen[key] = (*self._recent(key, now), now)

    def clear(self, key: str) -> None:
        self._seen.pop(key, None)


@dataclass
class SignInLimit:
    """The two windows sign-in is held to; :meth:`wait_s` is asked before any password is checked."""

    users: FailureWindow = field(default_factory=lambda: FailureWindow(MAX_FAILURES_PER_USER))
    addresses: FailureWindow = field(default_factory=lambda: FailureWindow(MAX_FAILURES_PER_ADDRESS))

    def wait_s(self, username: str, address: str) -> int:
        return max(self.users.wait_s(username), self.addresses.wait_s(address))

    def failed(self, username: str, address: str) -> None:
        self.users.failed(username)
        self.addresses.failed(address)

    def succeeded(self, username: str) -> None:
        self.users.clear(username)
