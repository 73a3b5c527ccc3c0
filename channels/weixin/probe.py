"""Does an Official Account work?  Its settings' shape, then one ``cgi-bin/token`` with appid and appsecret.

Getting a token is the one question WeChat answers that proves the appid,
the appsecret and the IP allow-list at once (40013, 40125, 40164).  It takes no
message from anyone; WeChat keeps the previous token good for a few minutes
after a new one is fetched, and a running gateway fetches again on its first
40001 anyway.  The Token and EncodingAESKey cannot be probed from here: WeChat
proves them by calling the gateway (the console's URL check).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.weixin.config import API_BASE, OfficialAccountConfig
from channels.weixin.transport import OfficialAccountApi
from gateway.core.errors import AuthFailed, GatewayError, PeerUnreachable
from gateway.core.probes import ProbeResult, Problem
from gateway.endpoints import origin, placeholder_host

CONSOLE = "mp.weixin.qq.com, Settings and Development → Basic configuration"
REFUSALS = {
    "40013": ("WeChat does not know this appid", f"copy the AppID again from {CONSOLE}"),
    "40125": ("WeChat refuses the appsecret", f"reset the AppSecret in {CONSOLE} and put the new one in the environment"),
    "40164": ("WeChat refuses calls from this machine's IP address",
              f"add the gateway's public IP address to the IP allow-list in {CONSOLE}"),
    "61004": ("WeChat refuses calls from this machine's IP address",
              f"add the gateway's public IP address to the IP allow-list in {CONSOLE}"),
}


def check_settings(settings: OfficialAccountConfig) -> list[Problem]:
    problems: list[Problem] = []
    if urlsplit(settings.api_base).scheme not in ("http", "https"):
        problems.append(Problem(message=f"api_base {settings.api_base!r} is not an http(s) address",
                                fix=f"remove api_base to use WeChat's own ({API_BASE})"))
    elif host := placeholder_host(settings.api_base):
        problems.append(Problem(message=f"api_base still names the example host {host}",
                                fix=f"remove api_base to use WeChat's own ({API_BASE})"))
    return problems


def _failure(error: GatewayError) -> Problem:
    if isinstance(error, PeerUnreachable):
        return Problem(message=f"nothing answers at {error.endpoint} ({error.why})", fix="check the network and api_base")
    code = str(getattr(error, "code", "") or "")
    if code in REFUSALS:
        message, fix = REFUSALS[code]
        return Problem(message=f"{message} ({code})", fix=fix)
    if isinstance(error, AuthFailed):
        return Problem(message=f"WeChat refuses the account's credentials ({code})", fix=f"check appid and appsecret in {CONSOLE}")
    return Problem(message=f"WeChat answered {code or 'an error'} when asked for a token",
                   fix="try again in a minute; if it lasts, check api_base")


async def probe_account(settings: OfficialAccountConfig) -> ProbeResult:
    where = f"Official Account {settings.appid} at {origin(settings.api_base)}"
    problems = check_settings(settings)
    if problems:
        return ProbeResult(checked=where, problems=tuple(problems))
    api = OfficialAccountApi(settings)
    try:
        await api.token()
    except GatewayError as error:
        return ProbeResult(checked=where, problems=(_failure(error),))
    finally:
        await api.close()
    return ProbeResult(checked=where)
