"""A Matrix user at the homeserver, for tests: plain httpx against the client-server API.

This plays the learners (and, logged in on a second device, the bot's own
account posting by hand).  It is deliberately not nio: the channel under test
uses nio, and the other side of the conversation should not share its bugs.
"""

from __future__ import annotations

import itertools
import urllib.parse
from typing import Any

import httpx

from tests.peers.synapse import MatrixAccount
from tests.waits import HTTP_S

_txn = itertools.count(1)


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class MatrixUser:
    def __init__(self, base_url: str, account: MatrixAccount) -> None:
        self.account = account
        self.user_id = account.user_id
        self.http = httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=HTTP_S,
                                      headers={"Authorization": f"Bearer {account.access_token}"})

    async def aclose(self) -> None:
        await self.http.aclose()

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.http.request(method, f"/_matrix/client/v3{path}", **kwargs)
        if response.status_code != 200:
            raise AssertionError(f"{self.user_id} {method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    async def set_displayname(self, name: str) -> None:
        await self.call("PUT", f"/profile/{q(self.user_id)}/displayname", json={"displayname": name})

    async def create_room(self, *, invite: list[str], direct: bool = False, name: str | None = None) -> str:
        body: dict[str, Any] = {"invite": invite, "preset": "trusted_private_chat" if direct else "private_chat",
                                "is_direct": direct}
        if name:
            body["name"] = name
        return (await self.call("POST", "/createRoom", json=body))["room_id"]

    async def invite(self, room_id: str, user_id: str) -> None:
        await self.call("POST", f"/rooms/{q(room_id)}/invite", json={"user_id": user_id})

    async def join(self, room_id: str) -> None:
        await self.call("POST", f"/join/{q(room_id)}", json={})

    async def joined(self, room_id: str) -> set[str]:
        return set((await self.call("GET", f"/rooms/{q(room_id)}/joined_members"))["joined"])

    async def send(self, room_id: str, content: dict[str, Any], *, event_type: str = "m.room.message",
                   txn: str | None = None) -> str:
        txn = txn or f"t{next(_txn)}"
        return (await self.call("PUT", f"/rooms/{q(room_id)}/send/{event_type}/{q(txn)}", json=content))["event_id"]

    async def say(self, room_id: str, body: str, *, mentions: list[str] | None = None, html: str | None = None,
                  relates: dict[str, Any] | None = None) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if mentions is not None:
            content["m.mentions"] = {"user_ids": mentions}
        if html is not None:
            content.update({"format": "org.matrix.custom.html", "formatted_body": html})
        if relates is not None:
            content["m.relates_to"] = relates
        return await self.send(room_id, content)

    async def events(self, room_id: str) -> list[dict[str, Any]]:
        """Every event of the room's timeline, oldest first."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"dir": "b", "limit": 1000}
        while True:
            page = await self.call("GET", f"/rooms/{q(room_id)}/messages", params=params)
            found.extend(page.get("chunk", []))
            if not page.get("chunk") or not page.get("end"):
                break
            params["from"] = page["end"]
        return list(reversed(found))

    async def upload(self, data: bytes, *, content_type: str, filename: str) -> str:
        response = await self.http.post("/_matrix/media/v3/upload", params={"filename": filename}, content=data,
                                        headers={"Content-Type": content_type})
        assert response.status_code == 200, response.text
        return response.json()["content_uri"]

    async def download(self, mxc: str) -> bytes:
        server, media = mxc.removeprefix("mxc://").split("/", 1)
        response = await self.http.get(f"/_matrix/client/v1/media/download/{q(server)}/{q(media)}")
        assert response.status_code == 200, response.text
        return response.content

    async def sync(self, since: str | None = None, timeout_ms: int = 0) -> dict[str, Any]:
        params: dict[str, Any] = {"timeout": timeout_ms}
        if since:
            params["since"] = since
        return await self.call("GET", "/sync", params=params)


def shown_messages(events: list[dict[str, Any]], sender: str) -> list[dict[str, Any]]:
    """What a client shows of ``sender``'s messages: one entry per original event, edits applied.

    Each entry is the original event with ``content`` replaced by the latest ``m.new_content``."""
    originals: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("type") != "m.room.message" or event.get("sender") != sender:
            continue
        content = event.get("content") or {}
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            original = originals.get(relates.get("event_id"))
            if original is not None and "m.new_content" in content:
                original["content"] = {**content["m.new_content"], "m.relates_to": original["content"].get("m.relates_to")}
                original["edits"] += 1
            continue
        originals[event["event_id"]] = {**event, "edits": 0}
    return list(originals.values())
