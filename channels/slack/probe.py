"""Does a Slack account work?  Its settings' shape, then ``auth.test`` and, in Socket Mode, ``apps.connections.open``.

auth.test's answer names the token's scopes (``x-oauth-scopes``); one without ``users:read``
is a warning, not a failure: the account works, its notices just ignore each learner's language.

Both calls only read: auth.test says who the bot token belongs to, and
apps.connections.open hands out a socket URL that nobody dials, so probing
next to a running gateway takes no event from it.  What they find is said
as a teacher can act on it, never with a token in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.config import CLOUD_API, SlackConfig
from channels.slack.transport import call
from gateway.core.errors import AuthFailed, GatewayError, PeerUnreachable, PlatformError
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.endpoints import origin, placeholder_host

APP_PAGE = "your app's page at api.slack.com/apps"


def check_settings(settings: SlackConfig) -> list[Problem]:
    problems: list[Problem] = []
    if not settings.bot_token.get_secret_value().startswith("xoxb-"):
        problems.append(Problem(message="bot_token does not look like a bot token (xoxb-...)",
                                fix=f"copy the Bot User OAuth Token from {APP_PAGE}, OAuth & Permissions"))
    if settings.mode == "socket" and settings.app_token and not settings.app_token.get_secret_value().startswith("xapp-"):
        problems.append(Problem(message="app_token does not look like an app-level token (xapp-...)",
                                fix=f"make one with the connections:write scope in {APP_PAGE}, Basic Information"))
    if urlsplit(settings.api_base).scheme not in ("http", "https"):
        problems.append(Problem(message=f"api_base {settings.api_base!r} is not an http(s) address",
                                fix=f"remove api_base to use Slack's own ({CLOUD_API})"))
    elif host := placeholder_host(settings.api_base):
        problems.append(Problem(message=f"api_base still names the example host {host}",
                                fix=f"remove api_base to use Slack's own ({CLOUD_API})"))
    return problems


def _failure(error: GatewayError, which: str) -> Problem:
    if isinstance(error, PeerUnreachable):
        return Problem(message=f"nothing answers at {error.endpoint} ({error.why})", fix="check the network and api_base")
    if isinstance(error, AuthFailed):
        return Problem(message=f"Slack refuses the {which} ({error.code})",
                       fix=f"copy the {which} again from {APP_PAGE}; reinstall the app to the workspace if it was removed")
    if isinstance(error, PlatformError):
        return Problem(message=f"Slack answered {error.code or ''} to {error.detail}".strip(),
                       fix="try again in a minute; if it lasts, check api_base")
    return Problem(message=f"Slack: {error}", fix="check api_base and the network")


async def probe_app(client: AsyncWebClient, settings: SlackConfig) -> ProbeResult:
    where = origin(settings.api_base)
    problems = check_settings(settings)
    if problems:
        return ProbeResult(checked=f"Slack at {where}", problems=tuple(problems))
    try:
        said = await call("auth.test", client.auth_test(), settings.api_base)
    except GatewayError as error:
        return ProbeResult(checked=f"Slack at {where}", problems=(_failure(error, "bot token"),))
    checked = f"bot {said.get('user')} in workspace {said.get('team')} at {where}"
    warnings = _scope_warnings(settings, getattr(said, "headers", None) or {})
    if settings.mode == "socket" and settings.app_token is not None:
        try:
            await call("apps.connections.open", client.apps_connections_open(
                app_token=settings.app_token.get_secret_value()), settings.api_base)
        except GatewayError as error:
            return ProbeResult(checked=checked, problems=(_failure(error, "app-level token"), *warnings))
    return ProbeResult(checked=checked, problems=warnings)


def _scope_warnings(settings: SlackConfig, headers: Mapping[str, Any]) -> tuple[Problem, ...]:
    """A warning when the token lacks ``users:read`` and the account reads learners' languages.

    Slack names a token's scopes in every answer's ``x-oauth-scopes``; an answer without the header
    (a proxy that strips it) says nothing, so nothing is warned about."""
    found = next((str(v) for k, v in headers.items() if k.lower() == "x-oauth-scopes"), None)
    if not settings.read_locale or found is None or "users:read" in {s.strip() for s in found.split(",")}:
        return ()
    return (Problem(gravity=Gravity.WARNING,
                    message="the bot token lacks the users:read scope, so notices ignore each learner's Slack language",
                    fix=f"add users:read in {APP_PAGE}, OAuth & Permissions, and reinstall the app; "
                        "or set read_locale: false"),)
