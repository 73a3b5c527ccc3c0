"""The login page a running gateway serves while a personal WeChat account waits for its QR login.

``GET /channels/weixin/<account>/login?t=<token>`` shows the current QR code
(inline SVG) and the scan's state, and reloads itself every few seconds.  The
first request starts a login with the platform (:func:`~channels.weixin.ilink.login.login`,
the same one ``partners channels login`` runs); its confirmed session is stored
and the waiting account picks it up.  An expired code is replaced by the
login itself; a login that gave up is started afresh by the next reload.

Who may open it: whoever scans the code logs the bot in as *their* WeChat,
so the page is behind a token made fresh each time the account starts
waiting, compared in constant time.  Without it (or a wrong one) the answer
is 403.  The token is kept in the account's store entry :data:`PAGE_TOKEN`
while the account waits (emptied when it stops waiting), so that
``partners channels login weixin ACCOUNT`` -- which opens the same store --
can print the page's whole address (:func:`stored_path`); the gateway's log
line prints the path too.  The store already holds the bot token itself, so
whoever can read it gains nothing by the page token.  Once the account is logged
in, the page says so and starts nothing more; a later waiting spell has a
new token.  Before the account ever waited there is no page (404).

The page speaks the language the browser asks for (``Accept-Language``): its
sentences are the phrase catalogue's (:mod:`gateway.core.phrases`), in
Simplified Chinese or English, English when the browser names neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import logging
import secrets
from typing import TYPE_CHECKING

from channels.weixin.config import IlinkConfig
from channels.weixin.ilink.login import Scan, login
from gateway.core.channel import CursorStore
from gateway.core.errors import GatewayError
from gateway.core.phrases import ENGLISH, Phrase, catalogued, say
from gateway.languages import preferred_language

if TYPE_CHECKING:  # pragma: no cover - typing only; starlette loads with the routes
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

log = logging.getLogger(__name__)
REFRESH_S = 2
"""The page reloads this often: the scan's state moves within seconds of the phone."""
PAGE_TOKEN = "ilink-login-page"
"""The store entry holding the waiting spell's page token (empty when the account is not waiting)."""
SAID = {Scan.WAIT: Phrase.LOGIN_WAIT, Scan.SCANNED: Phrase.LOGIN_SCANNED, Scan.CONFIRMED: Phrase.LOGIN_CONFIRMED,
        Scan.EXPIRED: Phrase.LOGIN_EXPIRED}


def page_path(account: str, token: str) -> str:
    """The page's path and query for ``account`` behind ``token``; the caller puts the gateway's address in front."""
    return f"/channels/weixin/{account}/login?t={token}"


async def stored_path(cursors: CursorStore, account: str) -> str | None:
    """The path of the page a gateway serves for ``account`` now, from its store; None when it is not waiting."""
    token = await cursors.get(PAGE_TOKEN)
    return page_path(account, token) if token else None


def page_language(accept_language: str | None) -> str:
    """The catalogue language the browser weighs highest, English when it names none the catalogue has."""
    return catalogued(preferred_language(accept_language)) or ENGLISH


class LoginPage:
    """One waiting spell of one account: its token, and the login the page started (if any)."""

    def __init__(self, settings: IlinkConfig, cursors: CursorStore, account: str) -> None:
        self._settings, self._cursors, self._account = settings, cursors, account
        self.token: str | None = None
        self.link: str | None = None
        self.state: Scan | None = None
        self.failed: str | None = None
        self.waiting = False
        self._task: asyncio.Task[object] | None = None

    @property
    def path(self) -> str:
        return page_path(self._account, self.token or "")

    async def open(self) -> str:
        """A fresh token for a new waiting spell, kept in the store for the login command; the path (with it)."""
        self.token, self.link, self.state, self.failed = secrets.token_urlsafe(24), None, None, None
        self.waiting = True
        await self._cursors.put(PAGE_TOKEN, self.token)
        return self.path

    async def close(self) -> None:
        """The account is logged in (or stopping): the page says so, a login it started stops."""
        if self.waiting:
            self.waiting = False
            await self._cursors.put(PAGE_TOKEN, "")
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, GatewayError):
                await task

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [Route("/login", self._page, methods=["GET"])]

    async def _page(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse, PlainTextResponse

        language = page_language(request.headers.get("accept-language"))
        vary = {"Vary": "Accept-Language", "Content-Language": language}
        if self.token is None:
            return PlainTextResponse(say(Phrase.LOGIN_NOT_WAITING, language), status_code=404, headers=vary)
        given = request.query_params.get("t", "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return PlainTextResponse(say(Phrase.LOGIN_FORBIDDEN, language), status_code=403, headers=vary)
        if self.waiting and (self._task is None or self._task.done()):
            self.link, self.state, self.failed = None, None, None
            self._task = asyncio.create_task(self._login())
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", **vary}
        return HTMLResponse(self._render(language), headers=headers)

    async def _login(self) -> None:
        def show(link: str) -> None:
            self.link = link

        def said(state: Scan) -> None:
            self.state = state

        try:
            await login(self._settings, self._cursors, account=self._account, show=show, said=said)
        except GatewayError as error:  # no code confirmed, another bot, the platform away: the next reload retries
            self.failed = str(error)
            log.warning("weixin ilink login page: the login stopped account=%s reason=%s", self._account, error)
        except Exception:  # a bug must not leave a page that waits forever: said, logged, and the reload retries
            self.failed = "the login stopped unexpectedly (the gateway's log has the details)"
            log.exception("weixin ilink login page: the login failed account=%s", self._account)

    def _render(self, language: str) -> str:
        from channels.weixin.ilink.qr import svg

        def text(phrase: Phrase) -> str:
            return html.escape(say(phrase, language, account=self._account))

        if not self.waiting:
            body = f"<p>{text(Phrase.LOGIN_CONFIRMED)}</p>"
        elif self.failed is not None:  # the error's own words are the gateway's log's, in English
            body = f"<p>{html.escape(self.failed)}</p><p>{text(Phrase.LOGIN_RELOAD)}</p>"
        elif self.link is None:
            body = f"<p>{text(Phrase.LOGIN_ASKING)}</p>"
        else:
            state = self.state or Scan.WAIT
            code = "" if state is Scan.CONFIRMED else f'<div class="qr">{svg(self.link)}</div>'
            body = f'<p class="state" data-state="{state.value}">{text(SAID[state])}</p>{code}'
        return (f'<!doctype html><html lang="{language}"><head><meta charset="utf-8">'
                f'<meta http-equiv="refresh" content="{REFRESH_S}"><title>{text(Phrase.LOGIN_TITLE)}</title>'
                f"<style>.qr svg{{width:18rem;height:18rem}}</style></head>"
                f"<body><h1>{text(Phrase.LOGIN_HEADING)}</h1>{body}</body></html>")
