"""Reminders the brain schedules: proactive messages, within what the platform allows.

A reminder is accepted only if the platform will let it through when it is
due: some platforms cannot send proactively at all (QQ's official API since
2025), others only within a window after the learner's last message (WhatsApp
24 h, personal WeChat minutes).  A refusal comes back with the reason, so the
partner can tell the learner instead of promising something that will never
arrive.  A due reminder becomes an outbox reply in the same transaction that
marks it fired, and goes out through the normal delivery path (paced,
retried, exactly once).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from gateway.core.capabilities import ChannelCapabilities
from gateway.core.messages import Address, ConversationKind
from gateway.store import Reminder, Store


@dataclass(frozen=True)
class ReminderOutcome:
    accepted: bool
    reason: str = ""


class ReminderDesk:
    def __init__(self, store: Store, capabilities_for: Callable[[str, str], ChannelCapabilities | None]) -> None:
        self.store = store
        self.capabilities_for = capabilities_for

    async def schedule(self, address: Address, at: datetime, text: str) -> ReminderOutcome:
        caps = self.capabilities_for(address.channel, address.account)
        if caps is None:
            return ReminderOutcome(False, f"the {address.channel} account is not running")
        if caps.proactive_quota and caps.proactive_quota.startswith("none"):
            return ReminderOutcome(False, f"{caps.platform} does not allow messages the learner did not ask for just now")
        group = address.conversation.kind is ConversationKind.GROUP
        window = (caps.group_reply_window_s if group else None) or caps.reply_window_s
        if window is not None:
            last = await self.store.last_inbound_at(address.conversation_key) or time.time()
            if at.timestamp() > last + window:
                hours = window / 3600
                span = f"{hours:g} hours" if hours >= 1 else f"{window / 60:g} minutes"
                return ReminderOutcome(
                    False, f"{caps.platform} only lets me write within {span} of the learner's last message"
                )
        await self.store.add_reminder(Reminder(id=uuid.uuid4().hex, target=address, text=text, due_at=at.timestamp()))
        return ReminderOutcome(True)
