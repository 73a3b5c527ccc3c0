"""How a forgotten learner is taken out of conversations they shared with others (groups).

Their direct conversations are deleted whole.  A group's log cannot be: it is
the other members' history too.  So, in every conversation where the learner
spoke, in place:

- their messages become :data:`ERASED`, without their name or id;
- in turns *they* started, the tutor's words, reasoning, tool arguments and
  tool results become :data:`ERASED` too (they answered, quoted or noted the
  learner) -- the shape stays, so every tool call still has its result;
- every logged system prompt loses the memory that was erased with them
  (facts noted while they spoke, and group notes built on those): each such
  text is replaced by :data:`ERASED`;
- summaries of the conversation are dropped, since they may retell the
  learner's words; the next turn summarizes the redacted history again.
"""

from __future__ import annotations

from collections.abc import Iterable

from brain.session_log import (
    AssistantSaid,
    Entry,
    LogEvent,
    Summarized,
    ToolReturned,
    TurnStarted,
    UserSaid,
)

ERASED = "(erased at the learner's request)"


def erase_learner(entries: list[Entry], user: str, texts: Iterable[str]) -> dict[int, LogEvent | None]:
    """The changes to one conversation's entries: ``{seq: new event, or None to drop}``."""
    texts = sorted({t for t in texts if t.strip()}, key=len, reverse=True)  # longest first: a fact inside notes
    theirs = {e.event.turn for e in entries if isinstance(e.event, TurnStarted) and e.event.learner == user}
    changes: dict[int, LogEvent | None] = {}
    for entry in entries:
        event, new = entry.event, entry.event
        if isinstance(event, UserSaid) and event.user == user:
            new = event.model_copy(update={"text": ERASED, "sender": "", "user": ""})
        elif isinstance(event, AssistantSaid) and event.turn in theirs:
            calls = tuple(call.model_copy(update={"arguments": "{}"}) for call in event.tool_calls)
            new = event.model_copy(update={"text": ERASED if event.text else "", "reasoning": "", "tool_calls": calls})
        elif isinstance(event, ToolReturned) and event.turn in theirs:
            new = event.model_copy(update={"text": ERASED})
        elif isinstance(event, TurnStarted):
            system = event.system
            for text in texts:
                system = system.replace(text, ERASED)
            new = event.model_copy(update={"system": system, "learner": "" if event.learner == user else event.learner})
        if new != event:
            changes[entry.seq] = new
    if changes:
        changes |= {e.seq: None for e in entries if isinstance(e.event, Summarized)}
    return changes
