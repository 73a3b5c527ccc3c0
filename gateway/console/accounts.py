"""Adding and deleting channel accounts in the console: a guided form per channel, probed before it is saved.

=================================================  ======  ==================================================
route                                              verb    viewer -> answer
=================================================  ======  ==================================================
``/console/channel-accounts/new``                  GET     signed in 200: the channels one can add here
``/console/channel-accounts/new/{channel}``        GET     signed in 200: the form; a channel without a guide 404
``/console/channel-accounts/new/{channel}``        POST    probe ok: 303 to the channels page; bad settings or a
                                                           failed probe 400 (the form again, with the reasons);
                                                           a partner not theirs 404; a name taken 409; no key 503
``/console/channel-accounts/{channel}/{account}/   POST    303 to the channels page; not in sight 404; shared
delete``                                                   with another teacher 403; a file account 409
``/console/api/channel-accounts/{channel}``        POST    JSON ``{account, partner, settings}``: 201 with the
                                                           probe, or 400/404/409/503 as the form
``/console/api/channel-accounts/{channel}/         DELETE  200, or as the form's delete
{account}``
``/console/channel-accounts/{channel}/{account}/   GET     which secrets are set (never their values), and a
secrets``                                          POST    password input each; new ones probed first: 303, or
                                                           400 with the probe's reasons (the old ones stay)
``/console/api/channel-accounts/{channel}/         PUT     JSON ``{"secrets": {name: value}}``: 200, or as the
{account}/secrets``                                        form
=================================================  ======  ==================================================

Every add runs the channel's own ``probe()`` (Telegram ``getMe``, Slack ``auth.test``) with the
settings validated by the channel's own model (:mod:`gateway.accounts`); a failed probe shows its
reasons and stores nothing.  A teacher adds accounts only for partners they own, and the account is
bound whole to that partner; an administrator for any partner.  Secrets are password inputs, never
shown back: the channels page says an account's secrets are set (sealed), and its secrets page takes
new ones, probed before they replace the old.  Without ``PARTNERS_SECRET_KEY`` the form says that adding
accounts needs it, and how to make one.

The ``{channel}`` of the ``new`` routes is a guide's path: the channel's name, or a slug for a platform's
second kind (``weixin-official-account``, ``wecom-app``), so each kind has its own entry and form.  The
built-in channels (web chat, console) need no account and have none.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from channels.registry import load_channel
from gateway.accounts import (
    ACCOUNT_NAME,
    AccountRefused,
    FormField,
    InputKind,
    account_fields,
    kind_of,
    secret_settings,
    settings_from_form,
    with_kind,
)
from gateway.console.access import Viewer
from gateway.console.channels import seen_config
from gateway.console.openapi import Operation, describe
from gateway.console.pages import HEADERS, Console
from gateway.console.services import ConsoleGateway
from gateway.console.signin import read_form
from gateway.core.errors import ChannelUnavailable, ConfigError, InvalidEvent
from gateway.core.probes import Gravity, ProbeResult
from gateway.http.body import read_limited
from gateway.http.responses import error_response
from gateway.jsonbody import decode_json
from gateway.secretbox import KEY_ENV, SecretBox
from gateway.store.console import ConsoleSession

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024


@dataclass(frozen=True)
class Guide:
    """What the form of one channel says besides its fields: the steps, the help of each field, the extras."""

    channel: str
    title: str
    """A texts.toml key."""
    steps: str
    """A texts.toml key: how to get what the form asks."""
    kind: str | None = None
    """The kind of account the form adds, on a platform with several (personal WeChat: ``ilink``)."""
    first: tuple[str, ...] = ()
    """Fields shown before "more settings" (the required ones always are)."""
    help: dict[str, str] = field(default_factory=dict)
    """field -> texts.toml key; a field without one reads ``help_default``."""
    manifest: bool = False
    """Show the Slack app manifest to paste."""
    slug: str = ""
    """Where the form lives (``/console/channel-accounts/new/<slug>``) when it is not the channel's name: the
    second kind of a platform with two (``weixin-official-account``) has its own entry and its own form."""

    @property
    def path(self) -> str:
        return self.slug or self.channel


_GUIDES: tuple[Guide, ...] = (
    Guide("telegram", "guide_telegram_title", "guide_telegram_steps", first=("token", "dm"),
          help={"token": "help_telegram_token", "api_url": "help_telegram_api_url",
                "mode": "help_telegram_mode", "webhook_url": "help_telegram_webhook_url",
                "webhook_secret": "help_telegram_webhook_secret", "poll_timeout": "help_telegram_poll_timeout",
                "drafts": "help_telegram_drafts", "dm": "help_dm"}),
    Guide("slack", "guide_slack_title", "guide_slack_steps", first=("bot_token", "app_token", "dm"),
          help={"bot_token": "help_slack_bot_token", "app_token": "help_slack_app_token",
                "signing_secret": "help_slack_signing_secret", "mode": "help_slack_mode",
                "api_base": "help_slack_api_base", "streaming": "help_slack_streaming",
                "read_locale": "help_slack_read_locale", "dm": "help_dm"}, manifest=True),
    Guide("weixin", "guide_weixin_title", "guide_weixin_steps", kind="ilink", first=("dm",),
          help={"base_url": "help_weixin_base_url", "bot_id": "help_weixin_bot_id", "dm": "help_dm"}),
    Guide("discord", "guide_discord_title", "guide_discord_steps", first=("token", "message_content", "dm"),
          help={"token": "help_discord_token", "message_content": "help_discord_message_content",
                "slash_commands": "help_discord_slash_commands", "public_key": "help_discord_public_key",
                "long_answer_thread": "help_discord_long_answer_thread", "api_base": "help_endpoint_test",
                "gateway_url": "help_endpoint_test", "dm": "help_dm"}),
    Guide("matrix", "guide_matrix_title", "guide_matrix_steps", first=("access_token", "password", "device_id", "dm"),
          help={"homeserver": "help_matrix_homeserver", "user_id": "help_matrix_user_id",
                "access_token": "help_matrix_access_token", "password": "help_matrix_password",
                "device_id": "help_matrix_device_id", "invites": "help_matrix_invites", "dm": "help_dm"}),
    Guide("email", "guide_email_title", "guide_email_steps",
          first=("username", "imap_port", "imap_security", "smtp_port", "smtp_security", "dm"),
          help={"address": "help_email_address", "password": "help_email_password", "username": "help_email_username",
                "imap_host": "help_email_imap_host", "imap_port": "help_email_imap_port",
                "imap_security": "help_email_imap_security", "smtp_host": "help_email_smtp_host",
                "smtp_port": "help_email_smtp_port", "smtp_security": "help_email_smtp_security",
                "smtp_username": "help_email_smtp_username", "smtp_password": "help_email_smtp_password",
                "mailbox": "help_email_mailbox", "display_name": "help_email_display_name", "dm": "help_dm"}),
    Guide("weixin", "guide_weixin_oa_title", "guide_weixin_oa_steps", kind="official_account",
          slug="weixin-official-account", first=("encoding_aes_key", "mode", "dm"),
          help={"appid": "help_weixin_oa_appid", "appsecret": "help_weixin_oa_appsecret", "token": "help_weixin_oa_token",
                "encoding_aes_key": "help_weixin_oa_encoding_aes_key", "mode": "help_weixin_oa_mode",
                "passive_reply": "help_weixin_oa_passive_reply", "api_base": "help_endpoint_test", "dm": "help_dm"}),
    Guide("wecom", "guide_wecom_ai_bot_title", "guide_wecom_ai_bot_steps", kind="ai_bot", first=("dm",),
          help={"bot_id": "help_wecom_bot_id", "secret": "help_wecom_secret", "ws_url": "help_endpoint_test",
                "connect_timeout_s": "help_default", "dm": "help_dm"}),
    Guide("wecom", "guide_wecom_app_title", "guide_wecom_app_steps", kind="app", slug="wecom-app", first=("dm",),
          help={"corpid": "help_wecom_corpid", "corpsecret": "help_wecom_corpsecret", "agentid": "help_wecom_agentid",
                "token": "help_wecom_token", "encoding_aes_key": "help_wecom_encoding_aes_key",
                "api_base": "help_endpoint_test", "dm": "help_dm"}),
    Guide("dingtalk", "guide_dingtalk_title", "guide_dingtalk_steps", first=("dm",),
          help={"client_id": "help_dingtalk_client_id", "client_secret": "help_dingtalk_client_secret",
                "card_template_id": "help_dingtalk_card_template_id", "api_base": "help_endpoint_test", "dm": "help_dm"}),
)
GUIDES: dict[str, Guide] = {guide.path: guide for guide in _GUIDES}
"""Every guided form by where it lives: one entry per channel, one per kind where a platform has two."""


def guide_for(channel: str, kind: Any) -> Guide | None:
    """The guide an existing account was made with, by its stored ``kind`` (its secrets page asks what that form
    asked); an account without a kind has its platform's first guide, the default kind."""
    of_channel = [g for g in _GUIDES if g.channel == channel]
    return next((g for g in of_channel if g.kind == kind), of_channel[0] if of_channel else None)


SLACK_MANIFEST = "slack/manifest.yaml"
"""The Slack app manifest, in the ``channels`` package: the one copy the form shows and docs/channels/slack.md embeds."""


def slack_manifest() -> str:
    """The manifest's text, read without importing the Slack channel (its extra may not be installed)."""
    return resources.files("channels").joinpath(SLACK_MANIFEST).read_text(encoding="utf-8")


def _fields(guide: Guide) -> list[FormField]:
    return account_fields(load_channel(guide.channel).config_model, guide.kind)


class FormProblem(BaseModel):
    """One reason an account was not saved: a setting the channel's model refuses, or what its probe found."""

    field: str = ""
    """The setting it is about (``token``); empty for the account as a whole (the probe's findings)."""
    message: str
    fix: str = ""
    gravity: Gravity = Gravity.ERROR

    @classmethod
    def of(cls, error: ConfigError) -> list[FormProblem]:
        return [cls(field=p.field or "", message=p.message, fix=p.fix or "") for p in error.problems]


class AddOutcome(BaseModel):
    """The JSON twin's answer to an add: whether it was saved, what the probe checked, and every problem."""

    added: bool
    checked: str
    problems: list[FormProblem]


class ReplaceOutcome(BaseModel):
    replaced: bool
    checked: str
    problems: list[FormProblem]


class NewAccount(BaseModel):
    account: str
    partner: str
    settings: dict[str, Any] = {}
    """The channel's settings, as its guided form names them."""


class NewSecrets(BaseModel):
    secrets: dict[str, str]


class RemovedAccount(BaseModel):
    removed: str


@dataclass(frozen=True)
class Added:
    """What one add (or one replacement of secrets) came to, for the form and for its JSON twin."""

    status: int
    problems: list[FormProblem]
    checked: str = ""

    @classmethod
    def refused(cls, status: int, message: str, fix: str = "", field: str = "") -> Added:
        return cls(status, [FormProblem(field=field, message=message, fix=fix)])

    def json(self, done: str) -> JSONResponse:
        return JSONResponse({done: self.status in (200, 201), "checked": self.checked,
                             "problems": [p.model_dump(mode="json") for p in self.problems]}, status_code=self.status)


def _from_probe(result: ProbeResult, ok: int) -> Added:
    listed = [FormProblem(message=p.message, fix=p.fix, gravity=p.gravity) for p in result.problems]
    return Added(ok if result.ok else 400, listed, result.checked)


async def add(console: Console, gateway: ConsoleGateway, viewer: Viewer, session: ConsoleSession, guide: Guide,
              account: str, partner_id: str, raw: dict[str, Any]) -> Added:
    """Check who asks and for which partner, then let the gateway validate, probe, store and start the account."""
    partner = viewer.partner(console.config, partner_id)
    if partner is None:
        return Added.refused(404, "no such partner", "choose one of your partners", field="partner")
    if not re.fullmatch(ACCOUNT_NAME, account):
        return Added.refused(400, "the account name must be 1-64 of a-z 0-9 _ - (starting with a letter or digit)",
                             "it appears in addresses: e.g. main, physics-bot", field="account")
    try:
        result = await gateway.add_account(guide.channel, account, partner.id, raw, session.user.username)
    except AccountRefused as refusal:
        return Added.refused(refusal.status, refusal.reason)
    except ConfigError as error:
        return Added(400, FormProblem.of(error))
    return _from_probe(result, 201)


def routes(console: Console) -> list[BaseRoute]:
    def running() -> ConsoleGateway:
        assert console.gateway is not None, "adding accounts needs the running gateway"
        return console.gateway

    def form_page(request: Request, viewer: Viewer, session: ConsoleSession, guide: Guide, status: int = 200,
                  **values: Any) -> Response:
        return console.render(request, "account_form.html", status, viewer=viewer, csrf=session.csrf, guide=guide,
                              fields=_fields(guide), partners=viewer.partners(console.config),
                              manifest=slack_manifest() if guide.manifest else "",
                              keyed=SecretBox.from_env() is not None, key_env=KEY_ENV, **values)

    def guide_of(request: Request) -> Guide | None:
        guide = GUIDES.get(request.path_params["channel"])
        return guide if guide is not None and _loads(guide) else None

    async def choose(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return console.render(request, "account_new.html", viewer=viewer, csrf=session.csrf, guides=list(GUIDES.values()))

    async def new(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        guide = guide_of(request)
        if guide is None:
            return error_response(404, "no guided form for this channel; add it in partners.yaml")
        if request.method == "GET":
            return form_page(request, viewer, session, guide, values={})
        values = await read_form(request)
        if values is None:
            return error_response(400, "send the form as application/x-www-form-urlencoded")
        raw = settings_from_form(_fields(guide), values, kind=guide.kind)
        added = await add(console, running(), viewer, session, guide, values.get("account", "").strip(),
                          values.get("partner", ""), raw)
        if added.status == 201:
            target = f"/console/channels?added={guide.channel}:{values['account'].strip()}"
            return RedirectResponse(target, status_code=303, headers=HEADERS)
        shown = {k: v for k, v in values.items() if k in ("account", "partner") or k not in _secret_names(guide)}
        return form_page(request, viewer, session, guide, added.status, values=shown, problems=added.problems)

    async def api_add(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        guide = guide_of(request)
        if guide is None:
            return error_response(404, "no guided form for this channel; add it in partners.yaml")
        body_bytes = await read_limited(request, MAX_BODY_BYTES)
        try:
            body = decode_json(body_bytes) if body_bytes is not None else None
        except InvalidEvent:
            body = None
        if not (isinstance(body, dict) and isinstance(body.get("account"), str) and isinstance(body.get("partner"), str)
                and isinstance(body.get("settings", {}), dict)):
            return error_response(400, 'send JSON {"account": "...", "partner": "...", "settings": {...}}')
        raw = with_kind(load_channel(guide.channel).config_model, body.get("settings", {}), guide.kind)  # its kind only
        added = await add(console, running(), viewer, session, guide, body["account"], body["partner"], raw)
        return added.json("added")

    def refused(request: Request, viewer: Viewer) -> Response | None:
        """Why this viewer may not change the console-made account the path names (None: they may)."""
        channel, account = request.path_params["channel"], request.path_params["account"]
        gateway = running()
        config = seen_config(console, gateway)
        row = gateway.stored_accounts().get((channel, account))
        shadowed = row is not None and account in console.config.channels.get(channel, {})
        if row is not None and (shadowed or row.partner not in {p.id for p in console.config.partners}):
            # it does not run, so no binding speaks for it: the partner it was made for does
            return None if viewer.acts_for(console.config, row.partner) else error_response(404, "no such channel account")
        if not viewer.sees_account(config, channel, account):
            return error_response(404, "no such channel account")
        if row is None:
            if account in console.config.channels.get(channel, {}):
                return error_response(409, "this account is in partners.yaml: change it there")
            return error_response(404, "no such channel account")
        if not viewer.operates_account(config, channel, account):
            return error_response(403, "a partner of another teacher is bound to this account too; ask an administrator")
        return None

    async def remove(request: Request, viewer: Viewer, session: ConsoleSession, *, api: bool) -> Response:
        channel, account = request.path_params["channel"], request.path_params["account"]
        if (refusal := refused(request, viewer)) is not None:
            return refusal
        try:
            await running().remove_account(channel, account, session.user.username)
        except KeyError:  # deleted meanwhile
            return error_response(404, "no such channel account")
        if api:
            return JSONResponse(RemovedAccount(removed=f"{channel}:{account}").model_dump())
        return RedirectResponse("/console/channels", status_code=303, headers=HEADERS)

    async def replace(request: Request, viewer: Viewer, session: ConsoleSession, secrets: dict[str, str]) -> Added:
        channel, account = request.path_params["channel"], request.path_params["account"]
        try:
            result = await running().replace_secrets(channel, account, secrets, session.user.username)
        except AccountRefused as refusal:
            return Added.refused(refusal.status, refusal.reason)
        except KeyError:  # deleted meanwhile
            return Added.refused(404, "no such channel account")
        except ConfigError as error:
            return Added(400, FormProblem.of(error))
        return _from_probe(result, 200)

    async def secrets_form(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        channel, account = request.path_params["channel"], request.path_params["account"]
        if (refusal := refused(request, viewer)) is not None:
            return refusal
        try:
            stored = running().stored_settings(channel, account)
        except ConfigError:
            stored = {}
        guide = guide_for(channel, _kind(channel, stored))
        if guide is None or not _loads(guide):
            return error_response(404, "no guided form for this channel")
        names = sorted(_secret_names(guide))
        problems: list[FormProblem] = []
        status = 200
        if request.method == "POST":
            form = await read_form(request) or {}
            given = {name: form[name].strip() for name in names if form.get(name, "").strip()}
            if not given:
                problems, status = Added.refused(400, "no new secret was entered", "paste at least one").problems, 400
            else:
                done = await replace(request, viewer, session, given)
                if done.status == 200:
                    return RedirectResponse(f"/console/channels?replaced={channel}:{account}", status_code=303,
                                            headers=HEADERS)
                problems, status = done.problems, done.status
        return console.render(request, "account_secrets.html", status, viewer=viewer, csrf=session.csrf, guide=guide,
                              channel=channel, account=account, names=names, problems=problems,
                              keyed=SecretBox.from_env() is not None, key_env=KEY_ENV,
                              set=_set(guide, stored, names))

    async def secrets_api(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        if (refusal := refused(request, viewer)) is not None:
            return refusal
        try:
            kind = _kind(request.path_params["channel"],
                         running().stored_settings(request.path_params["channel"], request.path_params["account"]))
        except ConfigError:
            kind = None
        guide = guide_for(request.path_params["channel"], kind)
        names = _secret_names(guide) if guide is not None and _loads(guide) else set()
        body_bytes = await read_limited(request, MAX_BODY_BYTES)
        try:
            body = decode_json(body_bytes) if body_bytes is not None else None
        except InvalidEvent:
            body = None
        given = body.get("secrets") if isinstance(body, dict) else None
        if (not isinstance(given, dict) or not given or not all(isinstance(v, str) and v for v in given.values())
                or not set(given) <= names):
            return error_response(400, f'send JSON {{"secrets": {{...}}}} naming some of: {", ".join(sorted(names)) or "none"}')
        done = await replace(request, viewer, session, given)
        return done.json("replaced")

    async def remove_form(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return await remove(request, viewer, session, api=False)

    async def remove_api(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        return await remove(request, viewer, session, api=True)

    return [
        Route("/channel-accounts/new", console.guarded(choose, api=False)),
        Route("/channel-accounts/new/{channel}", console.guarded(new, api=False), methods=["GET", "POST"]),
        Route("/channel-accounts/{channel}/{account}/delete", console.guarded(remove_form, api=False), methods=["POST"]),
        Route("/api/channel-accounts/{channel}", describe(console.guarded(api_add, api=True), post=Operation(
            "Add a channel account through its guided form's probe", answers=AddOutcome, status=(201,), body=NewAccount,
            outcome=AddOutcome)), methods=["POST"]),
        Route("/channel-accounts/{channel}/{account}/secrets", console.guarded(secrets_form, api=False),
              methods=["GET", "POST"]),
        Route("/api/channel-accounts/{channel}/{account}", describe(console.guarded(remove_api, api=True), delete=Operation(
            "Remove a channel account added in the console", answers=RemovedAccount)), methods=["DELETE"]),
        Route("/api/channel-accounts/{channel}/{account}/secrets", describe(console.guarded(secrets_api, api=True), put=Operation(
            "Replace some of an account's secrets (probed first)", answers=ReplaceOutcome, body=NewSecrets,
            outcome=ReplaceOutcome)), methods=["PUT"]),
    ]


def _set(guide: Guide, stored: dict[str, Any], names: list[str]) -> dict[str, bool]:
    """Which of the account's secrets are set (never what they are)."""
    given = secret_settings(load_channel(guide.channel).config_model, stored)
    return {name: bool(given.get(name)) for name in names}


def _kind(channel: str, stored: dict[str, Any]) -> str | None:
    """The kind a stored account names (None for one without, or a channel not installed)."""
    try:
        return kind_of(load_channel(channel).config_model, stored)
    except ChannelUnavailable:
        return None


def _loads(guide: Guide) -> bool:
    """Whether the guide's channel is installed (its extra may not be)."""
    try:
        load_channel(guide.channel)
    except ChannelUnavailable:
        return False
    return True


def _secret_names(guide: Guide) -> set[str]:
    return {f.name for f in _fields(guide) if f.kind is InputKind.SECRET}
