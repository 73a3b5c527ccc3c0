"""Start the Slack emulator as a process, and play its users through the test-control API."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.peers import stop_process
from tests.peers.control import ControlClient

ROOT = Path(__file__).resolve().parents[2]


class SlackPeer:
    """A running emulator process on a free loopback port, stopped by its pid."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process, self.url = process, url

    @property
    def api_base(self) -> str:
        return f"{self.url}/api/"

    @classmethod
    def start(cls, log: Path, *, seed: int = 0) -> SlackPeer:
        args = [sys.executable, "-m", "tests.peers.slack_server", "--port", "0", "--seed", str(seed)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        with open(log, "ab") as errors:
            process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors)
        line = process.stdout.readline().decode()  # type: ignore[union-attr]
        if "listening on " not in line:
            process.kill()
            raise RuntimeError(f"the Slack emulator did not start (see {log}): {line!r}")
        return cls(process, line.split("listening on ", 1)[1].strip())

    def stop(self) -> None:
        stop_process(self.process)


class SlackUsers(ControlClient):
    """The emulator's test-control API for one app (by its bot token): users speak, tests look."""

    def __init__(self, url: str) -> None:
        super().__init__(url, f"xoxb-{uuid.uuid4().hex}")
        self.app_token = f"xapp-1-{uuid.uuid4().hex}"
        self.signing_secret = uuid.uuid4().hex
        self.ids: dict[str, str] = {}

    async def register(self, **options: Any) -> dict:
        response = await self.http.post("/test/apps", json={"bot_token": self.token, "app_token": self.app_token,
                                                            "signing_secret": self.signing_secret, **options})
        response.raise_for_status()
        self.ids = response.json()
        return self.ids

    async def say(self, channel: str, text: str, **options: Any) -> dict:
        """A user says ``text`` in ``channel`` (``D...`` a DM, ``C...`` a channel)."""
        return await self._post("/test/say", channel=channel, text=text, **options)

    async def event(self, event: dict) -> str:
        return (await self._post("/test/event", event=event))["event_id"]

    async def redeliver_event(self, event_id: str) -> None:
        await self._post("/test/redeliver", event_id=event_id)

    async def settings(self, **settings: Any) -> None:
        await self._post("/test/settings", **settings)

    async def drop(self, *, refresh: bool = False) -> None:
        await self._post("/test/drop", refresh=refresh)

    async def verify_url(self) -> dict:
        return await self._post("/test/verify_url")

    async def seen(self) -> dict[str, list[dict]]:
        return (await self._get("/test/seen"))["channels"]

    async def app(self) -> dict:
        return await self._get("/test/app")
