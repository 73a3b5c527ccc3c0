"""Reminders the brain schedules: proactive messages, within what the platform allows.

A reminder is accepted only if the platform will let it through when it is
due: some platforms cannot send proactively at all (QQ's official API since
2025), others only within a window after the learner's last message (WhatsApp
24 h, personal WeChat minutes).  A refusal comes back with the reason, so the
partner can tell the learner instead of promising something that will never
arrive.  A due reminder becomes an outbox reply in the same transaction that
marks it fired, and goes out through the normal delivery path (paced,
retried, exactly once), which asks the same question again at send time
(:mod:`gateway.pipeline.windows` answers both).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from gateway.core.capabilities import ChannelCapabilities
from gateway.core.messages import Address
from gateway.pipeline.windows import reply_window, why_closed
from gateway.store import InboxStore, Reminder, ReminderStore


class ReminderDeskStore(ReminderStore, InboxStore, Protocol):
    """What the reminder desk uses of the store: the reminders, and when a conversation last spoke."""


@dataclass(frozen=True)
class ReminderOutcome:
    accepted: bool
    reason: str = ""


class ReminderDesk:
    def __init__(self, store: ReminderDeskStore, capabilities_for: Callable[[str, str], ChannelCapabilities | None]) -> None:
        self.store = store
        self.capabilities_for = capabilities_for

    async def schedule(self, address: Address, at: datetime, text: str) -> ReminderOutcome:
        caps = self.capabilities_for(address.channel, address.account)
        if caps is None:
            return ReminderOutcome(False, f"the {address.channel} account is not running")
        opened = await self.store.last_inbound_at(address.conversation_key) if reply_window(caps, address) else None
        refused = why_closed(caps, address, at=at.timestamp(), opened=opened or time.time(), proactive=True)
        if refused:
            return ReminderOutcome(False, refused)
        await self.store.add_reminder(Reminder(id=uuid.uuid4().hex, target=address, text=text, due_at=at.timestamp()))
        return ReminderOutcome(True)
