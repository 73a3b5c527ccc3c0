"""``schedule_reminder``: a message the partner sends to this conversation later.

The reminder always goes to the turn's own address; the model chooses only
when and what.  ``when`` is an ISO 8601 datetime *with* a UTC offset, or a
relative ``in N minutes|hours|days|weeks``.  A datetime without an offset is
refused rather than guessed: the learner's time zone is unknown here, and a
reminder an hour off is worse than a model asked to restate the time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pydantic import Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult

MAX_AHEAD = timedelta(days=30)
_RELATIVE = re.compile(r"^in\s+(\d+|an?|one)\s+(minute|min|hour|hr|day|week)s?$", re.IGNORECASE)
_UNITS = {"minute": "minutes", "min": "minutes", "hour": "hours", "hr": "hours", "day": "days", "week": "weeks"}


def parse_when(when: str, now: datetime) -> datetime:
    """The moment ``when`` names, relative to ``now``; ValueError says what to send instead."""
    text = " ".join(when.split())
    relative = _RELATIVE.match(text)
    if relative:
        count, unit = relative.groups()
        amount = int(count) if count.isdigit() else 1
        at = now + timedelta(**{_UNITS[unit.lower()]: amount})
    else:
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{when!r} is not a time I can read; send an ISO 8601 datetime with an offset "
                "(2025-06-01T09:00:00+02:00) or 'in N minutes', 'in N hours' or 'in N days'"
            ) from None
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(
                f"{when!r} has no time zone; add the learner's UTC offset (e.g. +02:00) or use 'in N hours'"
            )
    if at <= now:
        raise ValueError(f"{at.isoformat()} is not in the future (it is now {now.isoformat(timespec='minutes')})")
    if at - now > MAX_AHEAD:
        raise ValueError(f"{at.isoformat()} is more than {MAX_AHEAD.days} days ahead; reminders reach at most that far")
    return at


class ScheduleReminderTool(Tool["ScheduleReminderTool.Arguments"]):
    name = "schedule_reminder"
    description = (
        "Send a reminder message to this conversation later, at most 30 days ahead. "
        "Use only when the learner asks to be reminded."
    )

    class Arguments(ToolArguments):
        when: str = Field(
            min_length=1,
            max_length=64,
            description="ISO 8601 datetime with UTC offset (2025-06-01T09:00:00+02:00), or 'in N minutes|hours|days'.",
        )
        text: str = Field(min_length=1, max_length=500, description="The reminder, as it should be sent.")

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self._clock = clock

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.scheduler is None:
            return ToolResult.error("Reminders are not available for this tutor; none was set.")
        try:
            at = parse_when(args.when, self._clock())
        except ValueError as error:
            return ToolResult.error(f"No reminder set: {error}.")
        result = await context.services.scheduler.schedule(context.turn.address, at, args.text)
        if not result.accepted:
            return ToolResult.error(f"No reminder set: {result.reason or 'the scheduler refused it'}.")
        return ToolResult(text=f"Reminder set for {at.isoformat(timespec='minutes')}.")
