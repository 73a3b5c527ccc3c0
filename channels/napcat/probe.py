"""What ``doctor`` says about a NapCat account: the ban risk, always, and whether NapCat answers.

The warning is a Problem of its own in every ``check`` (a WARNING: ``serve``
prints it at start, ``doctor`` on every run), not a footnote: the teacher opted
in once, and the gateway keeps saying what that means.  The probe adds only
what it found.
The probe (forward mode) opens one short websocket with the access token and
asks ``get_login_info``: a refused token, a NapCat that is not there, or one
logged in as another QQ account each get their own words.  In reverse mode
there is nothing to dial; the probe says where NapCat must connect.
"""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from channels.napcat.config import RISK, NapcatConfig
from gateway.core.probes import Gravity, ProbeResult, Problem

PROBE_ECHO = "doctor-login-info"


def check_settings(settings: NapcatConfig) -> list[Problem]:
    return [Problem(gravity=Gravity.WARNING, message=f"ban risk: {RISK}",
                    fix="keep this account on a QQ number made for the bot; remove the account to stop")]


async def probe_login(settings: NapcatConfig, *, timeout_s: float = 10.0) -> ProbeResult:
    checked = f"NapCat's websocket at {settings.ws_url}"
    problems: list[Problem] = []  # the warning is check()'s: doctor shows it once, beside this
    headers = {"Authorization": f"Bearer {settings.access_token.get_secret_value()}"}
    try:
        async with connect(settings.ws_url, additional_headers=headers, open_timeout=timeout_s,
                           ping_interval=None, proxy=None) as socket:
            await socket.send(json.dumps({"action": "get_login_info", "params": {}, "echo": PROBE_ECHO}))
            async with asyncio.timeout(timeout_s):
                async for wire in socket:
                    body = json.loads(wire)
                    if isinstance(body, dict) and body.get("echo") == PROBE_ECHO:
                        break
    except InvalidStatus as refused:
        status = refused.response.status_code
        problems.append(Problem(message=f"NapCat refused the access token ({status})",
                                fix="copy the token from NapCat's websocket server settings into access_token")
                        if status in (401, 403) else
                        Problem(message=f"NapCat answered the websocket handshake with {status}",
                                fix="check that ws_url is NapCat's websocket *server* port"))
        return ProbeResult(checked=checked, problems=tuple(problems))
    except (OSError, InvalidHandshake, InvalidURI, ConnectionClosed, TimeoutError, ValueError):
        problems.append(Problem(message=f"cannot reach NapCat at {settings.ws_url}, or it did not answer",
                                fix="start NapCat, enable its websocket server, and check ws_url"))
        return ProbeResult(checked=checked, problems=tuple(problems))
    data = body.get("data") if body.get("retcode") == 0 else None
    user = str(data.get("user_id")) if isinstance(data, dict) else None
    if user is None:
        problems.append(Problem(message="NapCat did not say which QQ account is logged in",
                                fix="log the QQ account in on NapCat (WebUI → scan the QR code)"))
    elif settings.self_id and user != settings.self_id:
        problems.append(Problem(message=f"NapCat is logged in as QQ {user}, not self_id {settings.self_id}",
                                fix="log in the right QQ account or correct self_id"))
    return ProbeResult(checked=checked, problems=tuple(problems))
