"""What the channel tests' rigs share: one partner bound to one account, and waiting for its answers.

Each channel's conftest names its emulator and what the learner sees there (``seen``); the
config every rig starts from and the waits are the same for all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Generic, TypeVar

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import eventually, settled

Shown = TypeVar("Shown")


def one_account(data_dir: Path, channel: str, account: str, settings: dict[str, Any], **top: Any) -> Any:
    """A config with partner ``tutor`` bound to one account, answering at once (no coalescing window)."""
    return parse_config({
        "data_dir": str(data_dir),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": channel, "account": account}],
        "channels": {channel: {account: settings}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        **top,
    })


class Answers(Generic[Shown]):
    """Waits on a rig whose ``gateway`` answers into an emulator; the rig says what a chat shows."""

    gateway: Gateway

    def seen(self, chat: str) -> list[Shown]:
        """The answers the learner sees in ``chat`` so far, oldest first."""
        raise NotImplementedError

    async def answers(self, chat: str, count: int) -> list[Shown]:
        """At least ``count`` answers in ``chat``, once the gateway has nothing more in hand."""

        async def enough() -> list[Shown] | None:
            shown = self.seen(chat)
            return shown if len(shown) >= count and settled(self.gateway) else None

        return await eventually(enough, what=f"{count} answers in {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")
