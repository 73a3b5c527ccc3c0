"""Does a Matrix account work?  Its settings' shape, then ``whoami`` on the homeserver.

With an access token, ``whoami`` says whose token it is and for which device,
without touching the account.  With a password, the probe logs in on a
throwaway device and logs that device out at once: logging in as the
gateway's own ``device_id`` could end the running gateway's session.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from nio import AsyncClient

from channels.matrix.config import MatrixConfig
from channels.matrix.transport import call, new_client
from gateway.core.errors import AuthFailed, GatewayError, NotFound, PeerUnreachable, PlatformError
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.endpoints import origin, placeholder_host
from gateway.redaction import register_secret

NEW_TOKEN = ("log the bot in again on its own device and export the new access token "
             "(docs/channels/matrix.md, step 3)")
HOMESERVER_FIX = ("set homeserver to the client-server API address, e.g. https://matrix.example.org "
                  "(Element shows it under Settings, Help & About)")


def check_settings(settings: MatrixConfig) -> list[Problem]:
    problems = []
    if urlsplit(settings.homeserver).scheme not in ("http", "https"):
        problems.append(Problem(message=f"homeserver {settings.homeserver!r} is not an http(s) address", fix=HOMESERVER_FIX))
    elif host := placeholder_host(settings.homeserver):
        problems.append(Problem(message=f"homeserver still names the example host {host}", fix=HOMESERVER_FIX))
    server = settings.user_id.partition(":")[2]
    if server and (host := placeholder_host(server)):
        problems.append(Problem(message=f"user_id {settings.user_id} still names the example server {host}",
                                fix="set user_id to the bot's own MXID, e.g. @tutor:matrix.example.org"))
    for name, secret in (("access_token", settings.access_token), ("password", settings.password)):
        if secret is not None and not secret.get_secret_value().strip():
            problems.append(Problem(message=f"{name} is empty (its environment variable holds nothing)",
                                    fix=f"put the bot's {name.replace('_', ' ')} in the variable that {name}: names"))
    return problems


def _failure(error: GatewayError, where: str) -> Problem:
    detail = error.detail if isinstance(error, PlatformError) else str(error)
    if isinstance(error, PeerUnreachable):
        return Problem(message=f"nothing answers at {error.endpoint} ({error.why})",
                       fix="check the network, and that homeserver is the client-server API address "
                           "(Element shows it under Settings, Help & About)")
    if isinstance(error, AuthFailed):
        return Problem(message=f"the homeserver {where} refused the bot's credentials ({error.code or 'auth'})",
                       fix=NEW_TOKEN)
    if isinstance(error, NotFound) or (isinstance(error, PlatformError) and error.code in (404, 405, "M_UNRECOGNIZED")):
        return Problem(message=f"{where} does not answer like a Matrix homeserver ({error.code})", fix=HOMESERVER_FIX)
    return Problem(message=f"the homeserver {where} answered: {detail}", fix="try again in a minute; if it lasts, check homeserver")


async def _with_password(client: AsyncClient, settings: MatrixConfig) -> str:
    """Log in on a throwaway device and log it out again; returns the MXID the password belongs to."""
    assert settings.password is not None
    login = await call("login", client.login(settings.password.get_secret_value(), device_name="partners doctor"))
    register_secret(login.access_token, "matrix access token (doctor's password login)")
    try:
        return login.user_id
    finally:
        await call("logout", client.logout())


async def probe_homeserver(settings: MatrixConfig) -> ProbeResult:
    where = origin(settings.homeserver)
    checked = f"{settings.user_id} on {where}"
    client = new_client(settings.homeserver, settings.user_id, None if settings.access_token is None else settings.device_id)
    problems: list[Problem] = []
    try:
        if settings.access_token is not None:
            client.restore_login(settings.user_id, settings.device_id or "", settings.access_token.get_secret_value())
            who = await call("whoami", client.whoami())
            if who.user_id != settings.user_id:
                problems.append(Problem(message=f"the access token belongs to {who.user_id}, not to user_id {settings.user_id}",
                                        fix=f"set user_id: {who.user_id}, or use a token of {settings.user_id}"))
            elif settings.device_id and who.device_id and who.device_id != settings.device_id:
                problems.append(Problem(
                    gravity=Gravity.WARNING,
                    message=f"the access token is for device {who.device_id}, not device_id {settings.device_id}",
                    fix=f"set device_id: {who.device_id}, so the homeserver deduplicates the gateway's sends"))
        else:
            owner = await _with_password(client, settings)
            if owner != settings.user_id:
                problems.append(Problem(message=f"the password logs in as {owner}, not as user_id {settings.user_id}",
                                        fix=f"set user_id: {owner}"))
    except GatewayError as error:
        problems.append(_failure(error, where))
    finally:
        await client.close()
    return ProbeResult(checked=checked, problems=tuple(problems))
