"""The wire to Zulip's REST API on httpx, and the one place its answers are translated.

Every call is ``/api/v1/...`` with HTTP Basic auth (the bot's email and API
key), parameters form-encoded (lists as JSON text, as Zulip takes them), and
every answer JSON with ``result`` and, on failure, ``msg`` and usually a
``code``.  Translation, most specific first::

    code BAD_EVENT_QUEUE_ID (400)               -> QueueGone: the queue was garbage-collected, register again
    code RATE_LIMIT_HIT / 429                   -> RateLimited (``retry-after`` in the body, or Retry-After)
    401, INVALID_API_KEY, USER_DEACTIVATED,
    REALM_DEACTIVATED                           -> AuthFailed   (the account's key: a human must fix it)
    403                                         -> Forbidden    (that stream or person only)
    404                                         -> NotFound
    5xx, a timeout                              -> PeerUnavailable
    the server cannot be reached                -> PeerUnreachable, naming the site and the fix
    any other 4xx (BAD_REQUEST, a lapsed edit)  -> BadRequest

Nothing here retries: the kit's long-poll loop and the outbound path's
``RetryPolicy`` are the only layers that wait and try again.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from channels._kit.http_errors import ErrorKind, error_for, json_body, translate
from gateway.core.errors import BadRequest, PeerUnavailable, PeerUnreachable
from gateway.endpoints import origin, why_unreachable

PLATFORM = "zulip"
QUEUE_GONE = "BAD_EVENT_QUEUE_ID"
CODES: dict[str, ErrorKind] = {
    "RATE_LIMIT_HIT": ErrorKind.RATE_LIMITED, "INVALID_API_KEY": ErrorKind.AUTH_FAILED,
    "UNAUTHORIZED": ErrorKind.AUTH_FAILED, "USER_DEACTIVATED": ErrorKind.AUTH_FAILED,
    "REALM_DEACTIVATED": ErrorKind.AUTH_FAILED, "STREAM_DOES_NOT_EXIST": ErrorKind.NOT_FOUND,
}
"""Zulip's codes whose meaning is sharper than their status (a missing stream is a 400 that means NotFound)."""
RETRY_FIELDS = {"retry-after": 1.0}
"""Zulip writes the pause into the 429's body as ``retry-after``, in seconds."""
TIMEOUT = httpx.Timeout(20.0, connect=5.0)


class QueueGone(BadRequest):
    """The event queue is no more (garbage-collected after 10 minutes without a poll, or a server restart)."""


class ZulipApi:
    """The bot's REST calls, on an ``httpx.AsyncClient`` it makes and closes."""

    def __init__(self, site: str, email: str, key: str, *, poll_timeout_s: float) -> None:
        self.site = site.rstrip("/")
        self.poll_timeout_s = poll_timeout_s
        self._client = httpx.AsyncClient(base_url=f"{self.site}/api/v1", auth=httpx.BasicAuth(email, key),
                                         timeout=TIMEOUT, trust_env=False,
                                         headers={"User-Agent": "PartnersGateway/0.1"})

    async def call(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                   data: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """One request; the parsed answer, or the translated error raised."""
        action = f"{method} {path}"
        try:
            response = await self._client.request(
                method, path, params=_form(params), data=_form(data),
                timeout=httpx.Timeout(timeout, connect=5.0) if timeout is not None else TIMEOUT)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.site), why, check="the network or site", action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        body = json_body(response.content)
        code = body.get("code") if isinstance(body, dict) else None
        if response.status_code == 400 and code == QUEUE_GONE:
            raise QueueGone(PLATFORM, f"{action}: the event queue expired", code=QUEUE_GONE)
        said = f"{action} ({code})" if isinstance(code, str) else action
        failure = translate(PLATFORM, said, response.status_code, response.headers, body, retry_fields=RETRY_FIELDS)
        if failure is not None:
            kind = CODES.get(str(code))
            if kind is not None and kind is not ErrorKind.RATE_LIMITED:
                raise error_for(kind, PLATFORM, failure.detail, code=response.status_code) from None
            raise failure
        return body if isinstance(body, dict) else {}

    async def me(self) -> dict[str, Any]:
        return await self.call("GET", "/users/me")

    async def register(self) -> dict[str, Any]:
        """A new queue of message events, the raw Markdown kept (``apply_markdown=false``): what the
        learner typed, not its HTML.  ``fetch_event_types`` adds ``max_message_id``, where a first start begins."""
        return await self.call("POST", "/register", data={
            "event_types": ["message"], "fetch_event_types": ["message"], "apply_markdown": False,
            "client_gravatar": True, "slim_presence": True})

    async def events(self, queue_id: str, last_event_id: int) -> list[Any]:
        """One long poll: the events after ``last_event_id`` (heartbeats included), or ``QueueGone``."""
        body = await self.call("GET", "/events", params={"queue_id": queue_id, "last_event_id": last_event_id},
                               timeout=self.poll_timeout_s)
        events = body.get("events")
        return events if isinstance(events, list) else []

    async def messages_after(self, anchor: int, count: int) -> tuple[list[Any], bool]:
        """Messages the bot can see after message ``anchor``, oldest first, and whether they reach the newest."""
        body = await self.call("GET", "/messages", params={
            "anchor": max(anchor, 0), "include_anchor": False, "num_before": 0, "num_after": count,
            "apply_markdown": False, "client_gravatar": True, "narrow": []})
        messages = body.get("messages")
        return (messages if isinstance(messages, list) else []), bool(body.get("found_newest", True))

    async def send(self, *, kind: str, to: Any, content: str, topic: str | None) -> int:
        """``POST /messages``; the new message's id."""
        data: dict[str, Any] = {"type": kind, "to": to, "content": content}
        if topic is not None:
            data["topic"] = topic
        body = await self.call("POST", "/messages", data=data)
        sent = body.get("id")
        if not isinstance(sent, int):
            raise PeerUnavailable(PLATFORM, "POST /messages: the answer named no message id")
        return sent

    async def edit(self, message_id: int, content: str) -> None:
        await self.call("PATCH", f"/messages/{message_id}", data={"content": content})

    async def typing(self, data: dict[str, Any]) -> None:
        await self.call("POST", "/typing", data={"op": "start", **data})

    async def close(self) -> None:
        await self._client.aclose()


def _form(values: dict[str, Any] | None) -> dict[str, str] | None:
    """Zulip's form encoding: strings as they are, everything else (lists, booleans, numbers) as JSON."""
    if values is None:
        return None
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}

