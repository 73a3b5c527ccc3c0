"""The wire to Mattermost's REST API v4 on httpx, and the one place its errors are translated.

Every call carries the bot's token as ``Authorization: Bearer``.  Mattermost
answers a refusal with an HTTP status and an ``AppError`` body (``{"id",
"message", "status_code"}``), so the kit's status table says it all
(``channels._kit.http_errors``)::

    401                         -> AuthFailed      (the token: a human must fix it)
    403                         -> Forbidden       (that channel only: the bot is not a member)
    404                         -> NotFound
    429                         -> RateLimited     (Retry-After, else X-Ratelimit-Reset: seconds to wait)
    5xx, a refused connection   -> PeerUnavailable / PeerUnreachable
    other 4xx                   -> BadRequest

``X-Ratelimit-Reset`` is read as a retry-after only on a 429: the server's rate
limiter is off by default and, when on, names in it the seconds until the
bucket refills.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from channels._kit.http_errors import raise_for
from gateway.core.errors import PeerUnavailable, PeerUnreachable, RateLimited
from gateway.endpoints import origin, why_unreachable

PLATFORM = "mattermost"
TIMEOUT = httpx.Timeout(15.0, connect=5.0)
UPLOAD_TIMEOUT = httpx.Timeout(120.0, connect=5.0)


@dataclass(frozen=True)
class Me:
    """The bot account, as ``GET /users/me`` says it."""

    id: str
    username: str


class MattermostApi:
    """The bot's REST calls, on an ``httpx.AsyncClient`` it makes and closes."""

    def __init__(self, api: str, token: str) -> None:
        self.api = api
        self.client = httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, headers={"Authorization": f"Bearer {token}"})

    async def call(self, method: str, route: str, *, action: str, body: Any = None, params: dict[str, Any] | None = None,
                   files: Any = None, data: dict[str, str] | None = None) -> Any:
        """One request under ``/api/v4``; the parsed body, or the translated error raised."""
        content = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            response = await self.client.request(method, f"{self.api}{route}", content=content, params=params,
                                                 headers=headers, files=files, data=data,
                                                 timeout=UPLOAD_TIMEOUT if files else TIMEOUT)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.api), why, check="the network or url", action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        if response.status_code == 429 and "retry-after" not in response.headers:
            reset = response.headers.get("X-Ratelimit-Reset", "")
            raise RateLimited(PLATFORM, float(reset) if reset.isdigit() else 1.0)
        return raise_for(PLATFORM, action, response)

    async def me(self) -> Me:
        said = await self.call("GET", "/users/me", action="users/me")
        return Me(id=str(said["id"]), username=str(said.get("username") or ""))

    async def create_post(self, channel: str, message: str, *, root_id: str | None, file_ids: list[str],
                          pending: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"channel_id": channel, "message": message, "pending_post_id": pending}
        if props:
            body["props"] = props
        if root_id:
            body["root_id"] = root_id
        if file_ids:
            body["file_ids"] = file_ids
        return dict(await self.call("POST", "/posts", action="posts", body=body))

    async def patch_post(self, post: str, message: str) -> None:
        await self.call("PUT", f"/posts/{post}/patch", action="posts/patch", body={"message": message})

    async def upload(self, channel: str, name: str, content: bytes, mime_type: str) -> str:
        said = await self.call("POST", "/files", action="files", data={"channel_id": channel},
                               files={"files": (name, content, mime_type or "application/octet-stream")})
        infos = said.get("file_infos") if isinstance(said, dict) else None
        if not infos:
            raise PeerUnavailable(PLATFORM, "files: the answer named no file")
        return str(infos[0]["id"])

    async def my_channels(self) -> list[dict[str, Any]]:
        """Every channel the bot is a member of, across its teams (``GET /users/me/channels``)."""
        said = await self.call("GET", "/users/me/channels", action="users/me/channels")
        return [c for c in said if isinstance(c, dict)] if isinstance(said, list) else []

    async def posts_since(self, channel: str, since_ms: int) -> list[dict[str, Any]]:
        """Posts of ``channel`` made or changed after ``since_ms``, oldest first (the server returns up to 1000)."""
        said = await self.call("GET", f"/channels/{channel}/posts", action="channels/posts", params={"since": since_ms})
        posts = said.get("posts") if isinstance(said, dict) else None
        found = [p for p in posts.values() if isinstance(p, dict)] if isinstance(posts, dict) else []
        return sorted(found, key=lambda p: (int(p.get("create_at") or 0), str(p.get("id"))))

    def file_url(self, file_id: str) -> str:
        return f"{self.api}/files/{file_id}"

    async def close(self) -> None:
        await self.client.aclose()
