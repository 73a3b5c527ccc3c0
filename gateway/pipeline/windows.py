"""Reply windows: when a platform still takes a message into a conversation, computed once.

Some platforms take a message only within a while of the learner's own: QQ's
official API answers a direct message within 60 minutes and a group message
within 5, WhatsApp's free-form messages need a customer message in the last 24
hours, personal WeChat's context token goes stale in minutes.  Some take no
message the learner did not just ask for at all (``Proactive.NONE``).  And a
referrer may carry its own end (``Referrer.expires_at``: a Discord interaction
token, a DingTalk session webhook).

Two places ask, with one answer: the reminder desk when a reminder is
scheduled (refused then, with the reason, so the partner can say so instead
of promising) and delivery before each send (so a late send becomes a dead
letter with the reason, not a platform error).  The window opens at the
learner's message: the one being answered, else the conversation's latest.
"""

from __future__ import annotations

from datetime import datetime

from gateway.core.capabilities import ChannelCapabilities, Proactive
from gateway.core.messages import Address, ConversationKind, OutboundReply, Referrer


def reply_window(capabilities: ChannelCapabilities, target: Address) -> float | None:
    """Seconds after the learner's message that the platform takes one into ``target``; None: no window.

    A group conversation has the group window where one is declared (QQ: 5 min), else the general one."""
    if target.conversation.kind is ConversationKind.GROUP and capabilities.group_reply_window_s is not None:
        return capabilities.group_reply_window_s
    return capabilities.reply_window_s


def unasked(reply: OutboundReply) -> bool:
    """Whether ``reply`` answers no message of the learner's: it names none and carries nothing of one
    (a reminder, a teacher's report or word).  Greetings and notices carry the referrer they answer."""
    return not reply.in_reply_to and reply.referrer == Referrer()


def span(seconds: float) -> str:
    """A window's length as a person says it: "24 hours", "5 minutes"."""
    amount, unit = (seconds / 3600, "hour") if seconds >= 3600 else (seconds / 60, "minute")
    return f"{amount:g} {unit}" + ("" if amount == 1 else "s")


def why_closed(
    capabilities: ChannelCapabilities,
    target: Address,
    *,
    at: float,
    opened: float | None,
    proactive: bool = False,
    expires_at: datetime | None = None,
) -> str | None:
    """Why a message to ``target`` at ``at`` (epoch seconds) would be refused, or None when it may go.

    ``opened`` is when the learner's message that opens the window arrived (None: no message known);
    ``proactive`` marks a message the learner did not ask for (a reminder); ``expires_at`` is the
    referrer's own end, where it has one."""
    if proactive and capabilities.proactive is Proactive.NONE:
        return f"{capabilities.platform} does not allow messages the learner did not ask for just now"
    if expires_at is not None and at > expires_at.timestamp():
        return "the platform's reply token expired"
    if proactive and capabilities.proactive is Proactive.TEMPLATE:
        return None  # the channel sends it free-form inside the window, as an approved template outside
    window = reply_window(capabilities, target)
    if window is None:
        return None
    if opened is None:
        return f"{capabilities.platform} only takes messages within {span(window)} of the learner's, and none is known"
    if at > opened + window:
        return f"{capabilities.platform} only lets me write within {span(window)} of the learner's last message"
    return None
