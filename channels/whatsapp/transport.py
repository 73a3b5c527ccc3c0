"""The wire to Meta's Graph API for one business number: sends, read receipts, media; errors translated once.

Every call carries ``Authorization: Bearer <access token>`` and goes to
``{graph_base}/{api_version}/...`` (config.py).  A send is
``POST /{phone-number-id}/messages`` with ``messaging_product: whatsapp``; Meta
answers ``{"messages": [{"id": "wamid..."}]}``.  The Cloud API takes no
idempotency key, so a send whose answer is lost may show twice; the outbound
path's send gate keeps that to one message per account (ADR 0022, ADR 0049).

**Errors** are ``{"error": {"code": N, "message", "error_subcode", "fbtrace_id"}}``
with a 4xx/5xx (WA2)::

    131047 re-engagement: more than 24 h since the learner wrote   -> ReplyWindowClosed
    130429 throughput, 131056 pair rate (one user, too often), 4, 80007 -> RateLimited
    190 token expired or revoked, 10 and 200 permission              -> AuthFailed
    131026 not deliverable (not a WhatsApp user, old app)            -> NotFound
    5xx, 1, 2, 131000 (Meta's own trouble)                           -> PeerUnavailable

Media in is two steps (Meta's media reference, cloud-api/reference/media): ``GET /{media-id}`` answers a short-lived ``url``,
which is downloaded with the same token.  Media out is uploaded first
(``POST /{phone-number-id}/media``, multipart) and sent by the id it gets.
No header, token or secret is ever logged; errors name the call only.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels._kit.media import download
from channels.whatsapp.config import Template, WhatsappConfig
from gateway.core.channel import MediaStream
from gateway.core.errors import PeerUnavailable, PeerUnreachable
from gateway.endpoints import origin, why_unreachable

log = logging.getLogger(__name__)
PLATFORM = "whatsapp"
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
CODES = BodyCodes(code_field="error.code", message_fields=("error.message",), kinds={
    "131047": ErrorKind.REPLY_WINDOW_CLOSED, "130429": ErrorKind.RATE_LIMITED, "131056": ErrorKind.RATE_LIMITED,
    "4": ErrorKind.RATE_LIMITED, "80007": ErrorKind.RATE_LIMITED, "190": ErrorKind.AUTH_FAILED,
    "10": ErrorKind.AUTH_FAILED, "200": ErrorKind.AUTH_FAILED, "131026": ErrorKind.NOT_FOUND,
    "1": ErrorKind.UNAVAILABLE, "2": ErrorKind.UNAVAILABLE, "131000": ErrorKind.UNAVAILABLE,
}, explained={"131047": "more than 24 hours since the learner last wrote: only a template can reach them",
              "131056": "too many messages to this learner in a short time (pair rate)"})


class GraphApi:
    """One business number's calls, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, config: WhatsappConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self._auth = {"Authorization": f"Bearer {config.access_token.get_secret_value()}"}

    @property
    def client(self) -> httpx.AsyncClient:
        """The client the calls use (an outbound file given by URL is read through it)."""
        return self._client

    async def _call(self, method: str, path: str, action: str, **kwargs: Any) -> dict:
        url = self.config.url(path)
        try:
            response = await self._client.request(method, url, headers=self._auth, **kwargs)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(url), why, check="the network and graph_base",
                                      action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(PLATFORM, action, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def _message(self, to: str, kind: str, content: dict, *, context: str | None = None) -> str:
        body: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
                                "type": kind, kind: content}
        if context:
            body["context"] = {"message_id": context}
        said = await self._call("POST", f"{self.config.phone_number_id}/messages", "messages", json=body)
        messages = said.get("messages")
        first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
        return str(first.get("id") or "")

    async def send_text(self, to: str, text: str) -> str:
        """A free-form text (inside the window); the ``wamid`` Meta gave it."""
        return await self._message(to, "text", {"body": text, "preview_url": "http" in text})

    async def send_template(self, to: str, template: Template, text: str) -> str:
        """An approved template with ``text`` as its one body parameter (outside the window too).

        Meta refuses a parameter holding a newline, a tab or more than four spaces in a row (132018),
        so the text goes as one line, its whitespace runs made single spaces."""
        text = " ".join(text.split())
        return await self._message(to, "template", {
            "name": template.name, "language": {"code": template.language},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": text}]}]})

    async def send_media(self, to: str, kind: str, media_id: str, caption: str = "", name: str = "") -> str:
        """A file uploaded before (:meth:`upload`), by its id."""
        content: dict[str, str] = {"id": media_id}
        if caption and kind != "audio":
            content["caption"] = caption
        if name and kind == "document":
            content["filename"] = name
        return await self._message(to, kind, content)

    async def mark_read(self, message: str, *, typing: bool) -> None:
        """The blue ticks on the learner's ``message``, and with ``typing`` the typing bubble (WA3)."""
        body: dict[str, Any] = {"messaging_product": "whatsapp", "status": "read", "message_id": message}
        if typing:
            body["typing_indicator"] = {"type": "text"}
        await self._call("POST", f"{self.config.phone_number_id}/messages", "messages(read)", json=body)

    async def upload(self, data: bytes, name: str, content_type: str) -> str:
        """``POST /{phone-number-id}/media``: the id a send names the file by."""
        said = await self._call("POST", f"{self.config.phone_number_id}/media", "media",
                                data={"messaging_product": "whatsapp", "type": content_type},
                                files={"file": (name, data, content_type)})
        return str(said.get("id") or "")

    async def media(self, media_id: str, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """Step one of a download, ``GET /{media-id}``; the stream of step two, the ``url`` with the token."""
        said = await self._call("GET", media_id, "media(url)")
        url = str(said.get("url") or "")
        if not url:
            raise PeerUnavailable(PLATFORM, "media(url): Meta named no url for the file")
        return download(self._client, url, limit=limit, platform=PLATFORM, headers=self._auth,
                        declared_type=str(said.get("mime_type") or ""), codes=CODES)

    async def me(self) -> dict:
        """``GET /{phone-number-id}``: the number's display name and quality (the probe)."""
        return await self._call("GET", self.config.phone_number_id, "phone number",
                                params={"fields": "display_phone_number,verified_name"})

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
