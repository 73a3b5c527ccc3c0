"""The test-control API an emulated platform offers for one bot token, as tests play its users.

The relay platform and the Telegram Bot API emulator share this side door:
``/test/...`` routes that say things as users, redeliver an update, set the
faults of the next sends, and report what was attempted.  Each emulator's
client adds what its platform's users can say.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.waits import HTTP_S


class ControlClient:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.http = httpx.AsyncClient(base_url=url, timeout=HTTP_S, trust_env=False)

    async def _post(self, path: str, **body: Any) -> Any:
        response = await self.http.post(path, json={"token": self.token, **body})
        if response.status_code != 200:
            raise AssertionError(f"emulator refused {path}: {response.status_code} {response.text}")
        return response.json()

    async def _get(self, path: str) -> Any:
        response = await self.http.get(path, params={"token": self.token})
        response.raise_for_status()
        return response.json()

    async def redeliver(self, update_id: int) -> None:
        await self._post("/test/redeliver", update_id=update_id)

    async def faults(self, **faults: Any) -> dict:
        return await self._post("/test/faults", **faults)

    async def attempts(self) -> dict:
        return await self._get("/test/attempts")

    async def info(self) -> dict:
        return await self._get("/test/bot")

    async def aclose(self) -> None:
        await self.http.aclose()
