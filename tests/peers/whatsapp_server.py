"""An emulated WhatsApp Cloud API for one business number: Meta's Graph and the webhook it posts.

Written from Meta's Cloud API documentation (WA1-WA4 in platform-facts, and its media reference), not from
the gateway:

- **Auth.**  Every Graph call needs ``Authorization: Bearer <token>``; another
  token is 401 ``{"error": {"code": 190, "type": "OAuthException"}}``.
- **Messages.**  ``POST /{version}/{phone-number-id}/messages`` with
  ``messaging_product: whatsapp`` takes a ``text`` (at most :data:`TEXT_LIMIT`
  characters), a ``template`` (only one the business had approved:
  ``approved``), or an uploaded ``image``/``audio``/``video``/``document`` by
  id, and answers ``{"messages": [{"id": "wamid..."}]}``.  A free-form message
  more than 24 h after the learner last wrote is answered 200 all the same and
  then fails by status callback with 131047 (re-engagement), as the Cloud API
  does; it is not shown.  ``status: read`` (with ``typing_indicator``) marks a
  learner's message read and is recorded in ``reads``.  Statuses ``sent`` and
  ``delivered`` of each shown message are posted back with ``post_statuses``.
- **Media.**  ``POST /{phone-number-id}/media`` (multipart ``file``) keeps the
  bytes and answers ``{"id"}``; ``GET /{media-id}`` answers a ``url`` here,
  which serves the bytes to the same bearer token only.
- **Webhook.**  :meth:`WhatsappPeer.say` posts a ``messages`` change signed
  ``X-Hub-Signature-256: sha256=HMAC(app secret, body)`` and posts it again --
  :data:`RETRIES` times, ``retry_after_s`` apart -- while the answer is not a 200;
  :meth:`WhatsappPeer.verify` sends the GET with ``hub.challenge``.
- **Faults.**  :meth:`WhatsappPeer.fail_next` answers the next send with an
  HTTP status and Meta's error code for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import secrets
import time
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.peers.tencent_api import TLS
from tests.waits import HTTP_S

RETRIES = 3
TEXT_LIMIT = 4096
WINDOW_S = 86400.0
VERSION = "v24.0"


@dataclass
class Shown:
    """One message the learner's phone shows: its wamid, its text (a template's filled in), a file's bytes."""

    id: str
    to: str
    kind: str
    text: str
    data: bytes = b""


@dataclass
class WhatsappPeer:
    phone_number_id: str = field(default_factory=lambda: str(100000000000000 + secrets.randbelow(10**14)))
    token: str = field(default_factory=lambda: "EAAG" + secrets.token_hex(24))
    app_secret: str = field(default_factory=lambda: secrets.token_hex(16))
    approved: dict[str, str] = field(default_factory=lambda: {"study_reminder": "Reminder from your tutor: {{1}}"})
    callback_url: str = ""
    base: str = ""
    retry_after_s: float = 5.0
    shown: list[Shown] = field(default_factory=list)
    shown_at: list[float] = field(default_factory=list)
    reads: list[dict] = field(default_factory=list)
    statuses_posted: list[dict] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    send_calls: int = 0
    deliveries: list[tuple[str, int]] = field(default_factory=list)
    """Every webhook POST (the wamid or "statuses") and the status it got (0: no answer)."""
    last_wrote: dict[str, float] = field(default_factory=dict)
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    """Files on some web server, not Meta's: what a reply's attachment URL names (tests only)."""
    post_statuses: bool = False
    _faults: list[tuple[int, int, float]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    # ------------------------------------------------------------------ Graph

    def app(self) -> Starlette:
        v = "/{version}"
        return Starlette(routes=[
            Route(v + "/{number}/messages", self._messages, methods=["POST"]),
            Route(v + "/{number}/media", self._upload, methods=["POST"]),
            Route("/_download/{media}", self._download, methods=["GET"]),
            Route("/_test/files/{name}", self._file, methods=["GET"]),
            Route(v + "/{node}", self._node, methods=["GET"]),
        ])

    def error(self, status: int, code: int, message: str) -> JSONResponse:
        self.refused.append(code)
        return JSONResponse({"error": {"message": message, "type": "OAuthException", "code": code,
                                       "fbtrace_id": secrets.token_hex(8)}}, status_code=status)

    def _refusal(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return self.error(401, 190, "Error validating access token: the session is invalid")
        return None

    def fail_next(self, status: int, code: int, retry_after: float = 0.0) -> None:
        self._faults.append((status, code, retry_after))

    def wamid(self) -> str:
        return "wamid.HBgL" + secrets.token_hex(12).upper() + str(next(self._ids))

    async def _messages(self, request: Request) -> Response:
        self.send_calls += 1
        if (refused := self._refusal(request)) is not None:
            return refused
        if request.path_params["number"] != self.phone_number_id:
            return self.error(400, 100, "Unsupported post request: object does not exist")
        body = json.loads(await request.body())
        if self._faults:
            status, code, pause = self._faults.pop(0)
            answer = self.error(status, code, f"injected {code}")
            if pause:
                answer.headers["Retry-After"] = f"{pause:g}"
            return answer
        if body.get("messaging_product") != "whatsapp":
            return self.error(400, 100, "(#100) The parameter messaging_product is required.")
        if body.get("status") == "read":
            self.reads.append(body)
            return JSONResponse({"success": True})
        to, kind = str(body.get("to", "")), body.get("type", "text")
        if kind == "text":
            text = body["text"]["body"]
            if len(text) > TEXT_LIMIT:
                return self.error(400, 100, "(#100) Param text['body'] must be at most 4096 characters long.")
        elif kind == "template":
            template = body["template"]
            if template["name"] not in self.approved:
                return self.error(404, 132001, "(#132001) Template name does not exist in the translation")
            params = [p["text"] for c in template.get("components", []) for p in c.get("parameters", [])]
            if any("\n" in p or "\t" in p or "     " in p for p in params):
                return self.error(400, 132018, "(#132018) Param text cannot have new-line/tab characters "
                                               "or more than 4 consecutive spaces")
            text = self.approved[template["name"]].replace("{{1}}", params[0] if params else "")
        elif kind in ("image", "audio", "video", "document"):
            text = body[kind].get("caption", "")
        else:
            return self.error(400, 100, f"(#100) unknown type {kind}")
        wamid = self.wamid()
        answer = JSONResponse({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
                               "messages": [{"id": wamid}]})
        if kind != "template" and time.time() > self.last_wrote.get(to, 0.0) + WINDOW_S:
            asyncio.get_running_loop().create_task(self.post_status(wamid, to, "failed", errors=[
                {"code": 131047, "title": "Re-engagement message"}]))
            return answer
        data = self.media[body[kind]["id"]][0] if kind in ("image", "audio", "video", "document") else b""
        self.shown.append(Shown(wamid, to, kind, text, data))
        self.shown_at.append(time.time())
        if self.post_statuses:
            asyncio.get_running_loop().create_task(self._sent_and_delivered(wamid, to))
        return answer

    async def _sent_and_delivered(self, wamid: str, to: str) -> None:
        await self.post_status(wamid, to, "delivered")  # out of order, as Meta may post them
        await self.post_status(wamid, to, "sent")

    async def _upload(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        form = await request.form()
        upload = form["file"]
        if form.get("messaging_product") != "whatsapp" or isinstance(upload, str):
            return self.error(400, 100, "(#100) messaging_product and file are required")
        media_id = str(10**15 + next(self._ids))
        self.media[media_id] = (await upload.read(), str(form.get("type", "")))
        return JSONResponse({"id": media_id})

    async def _node(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        node = request.path_params["node"]
        if node == self.phone_number_id:
            return JSONResponse({"display_phone_number": "+1 555 0100", "verified_name": "School", "id": node})
        if node in self.media:
            data, kind = self.media[node]
            return JSONResponse({"url": f"{self.base}_download/{node}", "mime_type": kind,
                                 "sha256": hashlib.sha256(data).hexdigest(), "file_size": len(data), "id": node,
                                 "messaging_product": "whatsapp"})
        return self.error(400, 100, f"Unsupported get request. Object with ID '{node}' does not exist")

    async def _download(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        data, kind = self.media[request.path_params["media"]]
        return Response(data, media_type=kind)

    async def _file(self, request: Request) -> Response:
        return Response(self.files[request.path_params["name"]], media_type="image/png")

    def texts_to(self, to: str) -> list[str]:
        return [s.text for s in self.shown if s.to == to]

    # ------------------------------------------------------------------ webhook

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()

    def envelope(self, value: dict) -> bytes:
        value = {"messaging_product": "whatsapp",
                 "metadata": {"display_phone_number": "15550100", "phone_number_id": self.phone_number_id}, **value}
        return json.dumps({"object": "whatsapp_business_account", "entry": [
            {"id": "WABA" + self.phone_number_id[:6], "changes": [{"value": value, "field": "messages"}]}]}).encode()

    def message(self, wa_id: str, text: str = "", *, wamid: str | None = None, kind: str = "text",
                media: dict | None = None, at: float | None = None) -> tuple[str, bytes]:
        wamid = wamid or self.wamid()
        item: dict = {"from": wa_id, "id": wamid, "timestamp": str(int(at if at is not None else time.time())),
                      "type": kind}
        item[kind] = {"body": text} if kind == "text" else (media or {})
        body = self.envelope({"contacts": [{"profile": {"name": f"Learner {wa_id[-4:]}"}, "wa_id": wa_id}],
                              "messages": [item]})
        return wamid, body

    async def post(self, body: bytes, signature: str | None = None) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if signature != "":
            headers["X-Hub-Signature-256"] = signature or self.sign(body)
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False, verify=TLS) as http:
            return await http.post(self.callback_url, content=body, headers=headers)

    async def deliver(self, key: str, body: bytes, *, attempts: int = 1) -> None:
        """Posts ``body`` and again while not answered 200, as Meta does (``attempts`` > 1: once more after a 200)."""
        answered = 0
        for _ in range(1 + RETRIES):
            began = time.monotonic()
            try:
                async with httpx.AsyncClient(timeout=self.retry_after_s, trust_env=False, verify=TLS) as http:
                    status = (await http.post(self.callback_url, content=body, headers={
                        "Content-Type": "application/json", "X-Hub-Signature-256": self.sign(body)})).status_code
            except httpx.TransportError:
                status = 0
            self.deliveries.append((key, status))
            if status == 200:
                answered += 1
                if answered >= attempts:
                    return
                continue
            await asyncio.sleep(max(0.0, self.retry_after_s - (time.monotonic() - began)))

    async def say(self, wa_id: str, text: str, *, wamid: str | None = None, attempts: int = 1,
                  at: float | None = None, kind: str = "text", media: dict | None = None) -> str:
        """A learner writes; the wamid Meta gave the message."""
        wamid, body = self.message(wa_id, text, wamid=wamid, kind=kind, media=media, at=at)
        self.last_wrote[wa_id] = max(self.last_wrote.get(wa_id, 0.0), at if at is not None else time.time())
        await self.deliver(wamid, body, attempts=attempts)
        return wamid

    async def post_status(self, wamid: str, to: str, status: str, *, errors: list[dict] | None = None) -> None:
        item: dict = {"id": wamid, "status": status, "timestamp": str(int(time.time())), "recipient_id": to}
        if errors:
            item["errors"] = errors
        self.statuses_posted.append(item)
        await self.deliver("statuses", self.envelope({"statuses": [item]}))

    async def verify(self, verify_token: str, challenge: str = "1158201444") -> httpx.Response:
        """The GET Meta sends when the callback URL is saved."""
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False, verify=TLS) as http:
            return await http.get(self.callback_url, params={"hub.mode": "subscribe", "hub.verify_token": verify_token,
                                                             "hub.challenge": challenge})
