"""Start the Telegram Bot API emulator as a process, and play its users through the test-control API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.peers import stop_process
from tests.peers.control import ControlClient

ROOT = Path(__file__).resolve().parents[2]


class TelegramPeer:
    """A running emulator process on a free loopback port, stopped by its pid."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process, self.url = process, url

    @classmethod
    def start(cls, log: Path, *, seed: int = 0) -> TelegramPeer:
        args = [sys.executable, "-m", "tests.peers.telegram_server", "--port", "0", "--seed", str(seed)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        with open(log, "ab") as errors:
            process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors)
        line = process.stdout.readline().decode()  # type: ignore[union-attr]
        if "listening on " not in line:
            process.kill()
            raise RuntimeError(f"the Telegram Bot API emulator did not start (see {log}): {line!r}")
        return cls(process, line.split("listening on ", 1)[1].strip())

    def stop(self) -> None:
        stop_process(self.process)


class TelegramUsers(ControlClient):
    """The emulator's test-control API for one bot token: users speak, tests look."""

    async def register(self, *, username: str | None = None, privacy: bool = True, knows_drafts: bool = True) -> dict:
        return await self._post("/test/bots", username=username, privacy=privacy, knows_drafts=knows_drafts)

    async def say(self, chat: int | dict, text: str, *, user: int | dict | None = None, **options: Any) -> dict:
        """A user says ``text`` in ``chat`` (an id: positive private, negative group; or a chat dict)."""
        chat = chat if isinstance(chat, dict) else {"id": chat}
        if user is None:
            user = {"id": chat["id"]}
        user = user if isinstance(user, dict) else {"id": user}
        return await self._post("/test/say", chat=chat, user=user, text=text, **options)

    async def migrate(self, chat: int, *, notify: bool = True) -> int:
        """An admin upgrades group ``chat`` to a supergroup; returns the supergroup's new chat id.

        ``notify=False`` keeps the upgrade's service messages from the bot's updates."""
        return (await self._post("/test/migrate", chat_id=chat, notify=notify))["chat_id"]

    async def open_chat(self, chat: dict) -> dict:
        """Make a chat exist at the platform without anyone saying anything (for hand-made updates)."""
        return await self._post("/test/chat", chat=chat)

    async def raw(self, update: dict) -> int:
        return (await self._post("/test/raw", update=update))["update_id"]

    async def seen(self) -> dict[str, list[dict]]:
        return (await self._get("/test/seen"))["chats"]
