"""What ``partners doctor`` says about a Discord account: the settings alone, then the token and the intents.

The probe logs in over REST only (``GET users/@me``; no Gateway session, so
the running account keeps its own) and reads the application's flags
(``GET oauth2/applications/@me``): whether the privileged MESSAGE_CONTENT
intent is enabled decides whether the Gateway will accept the intents the
account asks for (it closes with 4014 when it will not), and what the bot can
read in servers.  The same answer's ``verify_key`` is the application's Public
Key: a ``public_key`` that differs would make the interactions endpoint refuse
every request Discord signs.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import discord

from channels.discord.config import DISCORD_API, DiscordConfig
from channels.discord.transport import call, new_client
from gateway.core.errors import AuthFailed, GatewayError, PeerUnreachable
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.endpoints import origin, placeholder_host

TOKEN_SHAPE = re.compile(r"^[\w-]{20,}\.[\w-]{4,}\.[\w-]{20,}$")
FROM_PORTAL = "copy the token from Developer Portal > your application > Bot > Reset Token into the variable token: names"
INTENT_PAGE = "Developer Portal > your application > Bot > Privileged Gateway Intents > Message Content Intent"
KEY_PAGE = "Developer Portal > your application > General Information"


def check_settings(settings: DiscordConfig) -> list[Problem]:
    problems: list[Problem] = []
    token = settings.token.get_secret_value().strip()
    if not token:
        problems.append(Problem(message="the bot token is empty", fix=FROM_PORTAL))
    elif not TOKEN_SHAPE.match(token.removeprefix("Bot ")):
        problems.append(Problem(message="the token does not look like a bot token (three parts joined by dots)",
                                fix=FROM_PORTAL + " (the Bot page's token, not the application id or the public key)"))
    for name, url, schemes in (("api_base", settings.api_base, ("http", "https")),
                               ("gateway_url", settings.gateway_url, ("ws", "wss"))):
        if urlsplit(url).scheme not in schemes:
            problems.append(Problem(message=f"{name} {url!r} is not a {'/'.join(schemes)} address",
                                    fix=f"remove {name} to use Discord's own"))
        elif host := placeholder_host(url):
            problems.append(Problem(message=f"{name} still names the example host {host}", fix=f"remove {name} to use Discord's own"))
    return problems


def intent_problems(settings: DiscordConfig, flags: discord.ApplicationFlags) -> list[Problem]:
    enabled = flags.gateway_message_content or flags.gateway_message_content_limited
    if settings.message_content and not enabled:
        return [Problem(message="the account asks for the MESSAGE CONTENT intent, which is not enabled for this application: "
                                "Discord refuses the connection (close code 4014)",
                        fix=f"turn on {INTENT_PAGE}, or set message_content: false (the bot then reads only DMs, "
                            "mentions of it and replies to it)")]
    if not settings.message_content:
        return [Problem(gravity=Gravity.WARNING,
                        message="the MESSAGE CONTENT intent is not asked for: in servers the bot reads only messages that "
                                "mention it or reply to it (DMs are read in full)",
                        fix=("set message_content: true" if enabled else f"turn on {INTENT_PAGE} and set message_content: true")
                            + " for a partner that follows a whole channel")]
    return []


def _failure(error: GatewayError, where: str) -> Problem:
    if isinstance(error, PeerUnreachable):
        return Problem(message=f"nothing answers at {error.endpoint} ({error.why})", fix="check the network, or api_base")
    if isinstance(error, AuthFailed):
        return Problem(message="Discord says the bot token is invalid (401)", fix=FROM_PORTAL)
    return Problem(message=f"Discord at {where} answered: {error}", fix="try again in a minute; if it lasts, check api_base")


async def probe_application(settings: DiscordConfig) -> ProbeResult:
    where = origin(settings.api_base) if settings.api_base != DISCORD_API else "discord.com"
    client = new_client(settings)
    try:
        await call("login", client.login(settings.token.get_secret_value()), endpoint=settings.api_base)
        info = await call("application", client.application_info(), endpoint=settings.api_base)
    except GatewayError as error:
        return ProbeResult(checked=f"Discord at {where}", problems=(_failure(error, where),))
    finally:
        await client.close()
    checked = f"bot {client.user} of application {info.name} ({info.id}) at {where}"
    return ProbeResult(checked=checked, problems=(*intent_problems(settings, info.flags),
                                                  *key_problems(settings, info.verify_key, info.name)))


def key_problems(settings: DiscordConfig, verify_key: str, application: str) -> list[Problem]:
    """A ``public_key`` that is not the application's: Discord signs with its own, so every request fails."""
    if settings.public_key is None or settings.public_key.lower() == verify_key.lower():
        return []
    return [Problem(message=f"public_key is not the Public Key of application {application} ({verify_key[:8]}…): the "
                            "interactions endpoint would refuse every request Discord signs (401), and Discord "
                            "would not save the Interactions Endpoint URL",
                    fix=f"copy the Public Key from {KEY_PAGE} of the application this bot token belongs to into "
                        "public_key, or remove public_key to take slash commands on the Gateway")]
