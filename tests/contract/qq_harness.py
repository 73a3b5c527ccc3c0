"""Contract harness for the ``qq`` channel: a QQ bot on the QQ emulator (tests/peers/qq_server.py).

Served as tests/contract/tencent_harness.py says: the emulator on its own
loopback port, posting signed events to the gateway's webhook once it runs.
Learners are direct (C2C) chats.

Features: ``credentials`` (a secret QQ refuses, 100016) and ``lost_response``
(QQ showed the message but its answer was lost: the retry carries the same
``msg_seq`` and QQ drops it as a duplicate).  Not ``groups``: QQ delivers only
group messages that @ the bot, so there is no unaddressed one to drop; not
``faults``: QQ takes no message that answers none, so a send "directly" is
refused before the wire (its own tests in tests/channels/qq/ cover 22009, 401
and the windows).

``qq_ws`` (:class:`QQWebsocketHarness`) runs the same suite with ``mode:
websocket``: events come over the emulator's websocket gateway, replies go
to the same OpenAPI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.contract.harness import Said
from tests.contract.tencent_harness import TencentHarness
from tests.peers.qq_server import QQPeer


class QQHarness(TencentHarness):
    channel = "qq"
    env_prefix = "QQ_C"
    chat_prefix = "LEARNER"
    features = frozenset({"credentials", "lost_response"})
    peer: QQPeer  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__(QQPeer())  # type: ignore[arg-type]

    def settings(self) -> dict[str, Any]:
        os.environ[self.env["secret"]] = self.peer.secret
        return {"app_id": self.peer.app_id, "app_secret": f"env:{self.env['secret']}", "api_base": self.api,
                "token_url": f"{self.api}app/getAppAccessToken", "access": {"dm": "open"}}

    async def say_again(self, said: Said) -> None:
        await self.peer.say(said.chat, said.text, msg_id=str(said.ref))

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        assert status == 504, "this harness loses answers only"
        self.peer.lose_next_answer()


class QQWebsocketHarness(QQHarness):
    """The same bot with ``mode: websocket``: the emulator's gateway dispatches what learners say (``say_again``
    dispatches the message a second time, with a new ``s``, as a resume after a lost sequence would)."""

    async def start(self, workdir: Path) -> None:
        await super().start(workdir)
        await self._stack.enter_async_context(self.peer.gateway())

    def settings(self) -> dict[str, Any]:
        return super().settings() | {"mode": "websocket"}
