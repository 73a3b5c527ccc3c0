"""An emulated Bot Framework + Teams for one bot: OpenID metadata, keys, Entra's token endpoint, the Bot Connector.

Written from Microsoft's documentation of the Bot Connector (TM1-TM6), not from the gateway:

- **Inbound auth.**  ``GET /v1/.well-known/openidconfiguration`` names the
  issuer and ``jwks_uri``; ``GET /v1/.well-known/keys`` publishes RSA keys
  with ``endorsements: ["msteams"]``.  Each activity the peer posts carries
  ``Authorization: Bearer <jwt>``, RS256 with one of those keys: issuer
  ``https://api.botframework.com``, audience the App ID, ``serviceurl`` the
  activity's ``serviceUrl``, an hour's life.  :meth:`TeamsPeer.rotate` signs
  with a new key from then on; ``forge`` lets a test sign otherwise.
- **Outbound auth.**  ``POST /botframework.com/oauth2/v2.0/token``
  (client credentials, scope ``https://api.botframework.com/.default``)
  hands out ``{"access_token", "expires_in": 3599}``; a wrong secret is 401
  ``invalid_client``.  The connector takes only its tokens (401 otherwise).
- **Connector.**  ``POST /v3/conversations/{id}/activities[/{replyToId}]``
  records a ``message`` and answers its ``id``; faults can be injected
  (429 with ``Retry-After``, 401, 503, 400) on the next message.  A payload
  over 100 KB is 413.
- **Streaming** (1:1 only): a ``typing`` activity with a ``streaminfo``
  entity opens a stream (its answer's id is the streamId) or adds to one --
  ``streamSequence`` must grow and each text must extend the one before,
  else 400; a ``message`` with ``streamType: final`` ends it; more after
  that is 403 ``ContentStreamNotAllowed``.  A stream is one message to the
  learner, shown once it has text.
- **Delivery.**  :meth:`TeamsPeer.say` posts a learner's activity to the
  gateway and posts it again -- :data:`RETRIES` times, ``retry_after_s``
  apart -- while the answer is not 2xx.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.peers.tencent_api import TLS

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
RETRIES = 3
PAYLOAD_MAX = 100_000
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


@dataclass
class Delivery:
    activity_id: str
    attempt: int
    status: int
    failed: str = ""


@dataclass
class Shown:
    """A message as the chat shows it: a posted message, or a stream (its latest text)."""

    id: str
    conversation: str
    text: str = ""
    reply_to: str | None = None
    attachments: tuple[str, ...] = ()
    stream: bool = False
    sequence: int = 0
    final: bool = False
    stopped: bool = False
    """The learner pressed Stop: Teams takes no more of the stream."""
    at: float = field(default_factory=time.time)
    """When the peer took it (a stream: when it ended)."""


def _key() -> tuple[str, rsa.RSAPrivateKey]:
    return secrets.token_urlsafe(12), rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class TeamsPeer:
    app_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(30))
    callback_url: str = ""
    base: str = ""
    """Where the peer serves (``http://127.0.0.1:P/``): the serviceUrl of every activity it posts."""
    retry_after_s: float = 3.0
    shown: list[Shown] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    send_calls: int = 0
    typing: int = 0
    key_fetches: int = 0
    tokens_issued: int = 0
    down: bool = False
    _signing: tuple[str, rsa.RSAPrivateKey] = field(default_factory=_key)
    _published: list[tuple[str, rsa.RSAPrivateKey]] = field(default_factory=list)
    _tokens: set[str] = field(default_factory=set)
    _faults: list[tuple[int, float]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(int(time.time() * 1000)))

    def __post_init__(self) -> None:
        self._published.append(self._signing)

    @property
    def bot_id(self) -> str:
        return "28:" + self.app_id

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/.well-known/openidconfiguration", self._openid),
            Route("/v1/.well-known/keys", self._keys),
            Route("/botframework.com/oauth2/v2.0/token", self._token, methods=["POST"]),
            Route("/v3/conversations/{conversation}/activities", self._activity, methods=["POST"]),
            Route("/v3/conversations/{conversation}/activities/{reply_to}", self._activity, methods=["POST"]),
        ])

    def settings(self) -> dict[str, Any]:
        """What an account on this peer sets besides app_id and app_password."""
        return {"openid_url": f"{self.base}v1/.well-known/openidconfiguration",
                "token_url": f"{self.base}botframework.com/oauth2/v2.0/token", "service_urls": [self.base]}

    # ------------------------------------------------------------------ keys and tokens

    def rotate(self) -> None:
        """Sign with a new key from now on, published beside the old one (as the Bot Framework rotates)."""
        self._signing = _key()
        self._published.append(self._signing)

    async def _openid(self, request: Request) -> JSONResponse:
        return JSONResponse({"issuer": ISSUER, "authorization_endpoint": "https://invalid.botframework.com",
                             "jwks_uri": f"{self.base}v1/.well-known/keys",
                             "id_token_signing_alg_values_supported": ["RS256"],
                             "token_endpoint_auth_methods_supported": ["private_key_jwt"]})

    async def _keys(self, request: Request) -> JSONResponse:
        self.key_fetches += 1
        keys = []
        for kid, private in self._published:
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
            keys.append({**public, "kid": kid, "use": "sig", "endorsements": ["msteams", "webchat"]})
        return JSONResponse({"keys": keys})

    def token_for(self, service_url: str, *, audience: str | None = None, issuer: str = ISSUER,
                  lifetime_s: float = 3600, key: tuple[str, rsa.RSAPrivateKey] | None = None) -> str:
        kid, private = key or self._signing
        now = int(time.time())
        return jwt.encode({"serviceurl": service_url, "iss": issuer, "aud": audience or self.app_id,
                           "nbf": now - 300, "exp": now + int(lifetime_s)}, private, algorithm="RS256",
                          headers={"kid": kid})

    async def _token(self, request: Request) -> JSONResponse:
        form = await request.form()
        if form.get("client_id") != self.app_id or form.get("client_secret") != self.secret:
            return JSONResponse({"error": "invalid_client",
                                 "error_description": "AADSTS7000215: Invalid client secret provided."}, 401)
        if form.get("grant_type") != "client_credentials" or form.get("scope") != SCOPE:
            return JSONResponse({"error": "invalid_request", "error_description": "AADSTS900144"}, 400)
        token = secrets.token_urlsafe(24)
        self._tokens.add(token)
        self.tokens_issued += 1
        return JSONResponse({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
                             "access_token": token})

    # ------------------------------------------------------------------ the connector

    def fail_next(self, status: int, retry_after: float = 1.0) -> None:
        self._faults.append((status, retry_after))

    def error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        self.refused.append(status)
        return JSONResponse({"error": {"code": code, "message": message}}, status, headers=headers)

    async def _activity(self, request: Request) -> JSONResponse:
        if self.down:
            return self.error(503, "ServiceUnavailable", "down")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme != "Bearer" or token not in self._tokens:
            return self.error(401, "Unauthorized", "Authorization has been denied for this request.")
        raw = await request.body()
        activity = json.loads(raw)
        conversation = request.path_params["conversation"]
        stream = next((e for e in activity.get("entities") or [] if e.get("type") == "streaminfo"), None)
        if activity.get("type") == "typing" and stream is None:
            self.typing += 1
            return JSONResponse({"id": str(next(self._ids))})
        if activity.get("type") == "message" and stream is None:
            self.send_calls += 1
            if self._faults:
                status, pause = self._faults.pop(0)
                headers = {"Retry-After": f"{pause:g}"} if status == 429 else None
                return self.error(status, {429: "TooManyRequests", 401: "Unauthorized", 503: "ServiceUnavailable",
                                           400: "BadArgument"}.get(status, "Error"), "injected", headers)
        if len(raw) > PAYLOAD_MAX:
            return self.error(413, "MessageSizeTooBig", "Message size too large")
        if stream is not None:
            return self._stream(conversation, activity, stream)
        attachments = tuple(str(a.get("contentUrl")) for a in activity.get("attachments") or [])
        shown = Shown(id=str(next(self._ids)), conversation=conversation, text=str(activity.get("text") or ""),
                      reply_to=request.path_params.get("reply_to"), attachments=attachments)
        if not shown.text.strip() and not attachments:
            return self.error(400, "BadArgument", "Activity must have text or attachments")
        self.shown.append(shown)
        return JSONResponse({"id": shown.id}, 201)

    def _stream(self, conversation: str, activity: dict, info: dict) -> JSONResponse:
        if not conversation.startswith("a:"):
            return self.error(400, "BadArgument", "Streaming is supported in one-on-one chats only")
        kind, stream_id = info.get("streamType"), info.get("streamId")
        text = str(activity.get("text") or "")
        if stream_id is None:
            if activity.get("type") != "typing" or kind not in ("informative", "streaming"):
                return self.error(400, "BadArgument", "A stream starts with an informative or streaming update")
            opened = Shown(id=str(next(self._ids)), conversation=conversation, stream=True,
                           sequence=int(info.get("streamSequence") or 0), text=text if kind == "streaming" else "")
            self.shown.append(opened)
            return JSONResponse({"id": opened.id}, 201)
        found = next((s for s in self.shown if s.stream and s.id == stream_id), None)
        if found is None:
            return self.error(404, "NotFound", "Unknown streamId")
        if found.stopped:
            return self.error(403, "ContentStreamNotAllowed", "Content stream was cancelled by user.")
        if found.final:
            return self.error(403, "ContentStreamNotAllowed",
                              "Content stream is not allowed on an already completed streamed message")
        if kind == "final" and activity.get("type") == "message":
            found.text, found.final, found.at = text, True, time.time()
            return JSONResponse({"id": found.id}, 201)
        sequence = int(info.get("streamSequence") or 0)
        if sequence <= found.sequence:
            return self.error(400, "BadArgument", "streamSequence must increase")
        if kind == "streaming" and not text.startswith(found.text):
            return self.error(400, "BadArgument", "Request streamed content should contain the previously streamed content")
        found.sequence = sequence
        if kind == "streaming":
            found.text = text
        return JSONResponse({"id": found.id}, 201)

    def seen_in(self, conversation: str) -> list[Shown]:
        """What ``conversation`` (any thread of it) shows now, in order; a stream once it has text."""
        return [s for s in self.shown if s.conversation.split(";")[0] == conversation and (s.text or s.attachments)]

    # ------------------------------------------------------------------ the learners

    def activity(self, conversation: str, user: str, text: str, *, kind: str = "personal", mention: bool = False,
                 activity_id: str | None = None) -> dict:
        """A learner's message activity, as Teams writes it."""
        entities: list[dict] = [{"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"}]
        if mention:
            tag = "<at>Tutor</at>"
            text = f"{tag} {text}"
            entities.append({"type": "mention", "text": tag, "mentioned": {"id": self.bot_id, "name": "Tutor"}})
        now = datetime.now(UTC)
        return {
            "type": "message", "id": activity_id or str(next(self._ids)), "timestamp": now.isoformat(),
            "localTimestamp": now.isoformat(), "serviceUrl": self.base, "channelId": "msteams",
            "from": {"id": "29:" + user, "name": user.title(), "aadObjectId": str(uuid.uuid5(uuid.NAMESPACE_URL, user))},
            "conversation": {"conversationType": kind, "tenantId": TENANT, "id": conversation,
                             **({"isGroup": True} if kind != "personal" else {})},
            "recipient": {"id": self.bot_id, "name": "Tutor"}, "textFormat": "plain", "locale": "en-US",
            "text": text, "entities": entities, "channelData": {"tenant": {"id": TENANT}},
        }

    async def post(self, activity: dict, *, token: str | None = None, timeout: float = 10.0) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.token_for(self.base)}"} if token != "" else {}
        async with httpx.AsyncClient(timeout=timeout, trust_env=False, verify=TLS) as http:
            return await http.post(self.callback_url, content=json.dumps(activity), headers={
                **headers, "Content-Type": "application/json; charset=utf-8"})

    async def deliver(self, activity: dict) -> str:
        """Post ``activity`` as the Bot Framework does, again while the answer is not 2xx; its id."""
        for attempt in range(1 + RETRIES):
            began = time.monotonic()
            try:
                answer = await self.post(activity, timeout=self.retry_after_s)
                status, failed = answer.status_code, ""
            except httpx.TransportError as error:
                status, failed = 0, type(error).__name__
            self.deliveries.append(Delivery(activity["id"], attempt, status, failed))
            if 200 <= status < 300:
                break
            await asyncio.sleep(max(0.0, self.retry_after_s - (time.monotonic() - began)))
        return str(activity["id"])

    def acknowledged(self) -> set[str]:
        return {d.activity_id for d in self.deliveries if 200 <= d.status < 300}
