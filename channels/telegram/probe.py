"""Does a Telegram account work?  Its settings' shape, then ``getMe`` and ``getWebhookInfo``.

Both calls only read: nothing is fetched from the update queue, so probing
a bot while its gateway runs neither steals updates nor trips a 409.  What
they find is said as a teacher can act on it ("Telegram says the token is
invalid: copy it again from @BotFather"), never with the token in it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from telegram import Bot

from channels.telegram.config import CLOUD_API, TelegramConfig
from channels.telegram.transport import call, redact
from gateway.core.errors import AuthFailed, GatewayError, PeerUnreachable, PlatformError
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.endpoints import origin, placeholder_host

TOKEN_SHAPE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
"""Digits, a colon, then letters, digits, - and _: what BotFather hands out (``123456789:AAH...``)."""
FROM_BOTFATHER = "copy it again from @BotFather (/mybots, your bot, API Token) into the variable that token: names"


def _is_cloud(settings: TelegramConfig) -> bool:
    return origin(settings.api_url) == origin(CLOUD_API)


def check_settings(settings: TelegramConfig) -> list[Problem]:
    """What the settings alone show: a token that cannot be one, an example host, a webhook Telegram refuses."""
    problems: list[Problem] = []
    token = settings.token.get_secret_value()
    if not token.strip():
        problems.append(Problem(message="the bot token is empty (its environment variable holds nothing)",
                                fix="put the token @BotFather gave you in the variable that token: names (env:NAME)"))
    elif not TOKEN_SHAPE.match(token):
        problems.append(Problem(message="the token does not look like a bot token (digits, a colon, then letters and digits)",
                                fix=FROM_BOTFATHER))
    if urlsplit(settings.api_url).scheme not in ("http", "https"):
        problems.append(Problem(message=f"api_url {settings.api_url!r} is not an http(s) address",
                                fix=f"remove api_url to use Telegram's own server ({CLOUD_API}), or set your Bot API server's address"))
    elif host := placeholder_host(settings.api_url):
        problems.append(Problem(message=f"api_url still names the example host {host}",
                                fix=f"remove api_url to use Telegram's own server ({CLOUD_API}), or set your Bot API server's address"))
    if settings.mode == "webhook" and settings.webhook_url:
        url = settings.webhook_url
        if host := placeholder_host(url):
            problems.append(Problem(message=f"webhook_url still names the example host {host}",
                                    fix="set webhook_url to this gateway's public address: https://your-host/webhooks/telegram/<account>"))
        elif urlsplit(url).scheme != "https" and _is_cloud(settings):
            problems.append(Problem(
                message=f"webhook_url {url} is not https: Telegram delivers webhooks only to https:// addresses",
                fix="use this gateway's public https:// address (a reverse proxy with a certificate in front of it), "
                    "or remove mode: webhook to poll instead"))
    return problems


def _failure(error: GatewayError, where: str) -> Problem:
    """A failed Bot API call as a problem with its fix."""
    if isinstance(error, PeerUnreachable):
        return Problem(message=f"nothing answers at {error.endpoint} ({error.why})",
                       fix="check the network; if you run your own Bot API server, check that it runs and that api_url is its address")
    if isinstance(error, AuthFailed):
        if error.code == 404 and where != origin(CLOUD_API):
            return Problem(message=f"{where} does not know this token (404)",
                           fix=f"{FROM_BOTFATHER}; and check that api_url is a Bot API server")
        return Problem(message=f"Telegram says the token is invalid ({error.code})", fix=FROM_BOTFATHER)
    if isinstance(error, PlatformError):
        return Problem(message=f"Telegram at {where} answered {redact(error.detail)}" + (f" ({error.code})" if error.code else ""),
                       fix="try again in a minute; if it lasts, check api_url")
    return Problem(message=f"Telegram at {where}: {redact(str(error))}", fix="check api_url and the network")


async def probe_bot(bot: Bot, settings: TelegramConfig) -> ProbeResult:
    where = origin(settings.api_url)
    try:
        await call("getMe", bot.initialize())  # initialize asks getMe, once
        me = bot.bot
        info = await call("getWebhookInfo", bot.get_webhook_info())
    except GatewayError as error:
        return ProbeResult(checked=f"Telegram at {where}", problems=(_failure(error, where),))
    checked = f"bot @{me.username} at {where}"
    hooked = redact(info.url or "")
    problems: list[Problem] = []
    if settings.mode == "webhook":
        if info.url and info.url != settings.webhook_url:
            problems.append(Problem(
                gravity=Gravity.WARNING,
                message=f"Telegram sends this bot's updates to {hooked}, not to webhook_url",
                fix="if another program or gateway serves this bot, stop it or give this account a bot of its own; "
                    "otherwise `partners serve` sets the webhook to webhook_url when it starts"))
        elif info.url and info.last_error_message:
            problems.append(Problem(
                gravity=Gravity.WARNING,
                message=f"Telegram's last delivery to {hooked} failed: {redact(info.last_error_message)}",
                fix="make sure that address reaches this gateway (its public https address, through the reverse proxy)"))
    elif info.url:
        problems.append(Problem(
            gravity=Gravity.WARNING,
            message=f"this bot has a webhook set ({hooked}): polling removes it when the gateway starts",
            fix="if another program serves this bot through that webhook, give this account a bot of its own; "
                "if it is an old webhook of yours, nothing to do"))
    return ProbeResult(checked=checked, problems=tuple(problems))
