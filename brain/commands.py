"""Learner commands the brain answers itself, before (and instead of) the model.

=====================  ===================================================
``/link``              a code to confirm from another chat app (10 min)
``/link CODE``         this chat account joins the person who issued CODE
``/unlink``            this chat account starts fresh; memory stays behind
``/forget``            asks for confirmation ...
``/forget confirm``    ... then erases the person and everything kept
``/export``            memory and history, as Markdown in the reply
=====================  ===================================================

They work in direct chats only: in a group everyone would read an export or
a link code, and a link code is the key to someone's memory.  A command
never reaches the model; the session log records that it ran
(``CommandRan``, logged *before* it runs, so ``/forget confirm`` erases its
own record), never its answer or a code.  ``telegram``-style suffixes
(``/link@my_bot``) are accepted.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import nullcontext

from brain.locks import KeyedLocks
from brain.memory.controls import MemoryControls
from brain.memory.people import CODE_TTL_S, FORGET_TTL_S
from brain.memory.scopes import Session, identity_of, person_lock_key
from brain.session_log import CommandRan, SessionLog
from gateway.core.messages import ConversationKind, InboundMessage
from gateway.core.turns import Turn

log = logging.getLogger(__name__)

NAMES = ("/link", "/unlink", "/forget", "/export")
LINK_WAIT_S = 30.0
"""How long ``/link CODE`` waits for a turn of the code's person (on another chat app) to finish."""

GROUP_ONLY = "Please send {command} to me in a direct chat: in a group everyone would see the answer."
LINK_CODE = (
    "Your link code is **{code}**. Within {minutes} minutes, send `/link {code}` to me from your other chat app "
    "(or ask your teacher to link your accounts). After that I'll remember you there too."
)
LINKED = "Linked! This chat account is now part of the same you as your other one: I remember you on both."
ALREADY_LINKED = "This chat account is already linked to that one."
BAD_CODE = "That code isn't valid here: it may have expired or been used. Send /link on your other chat app for a new one."
BUSY = "I'm still answering you on your other chat app. Send the same /link command again in a moment."
UNLINKED = "Unlinked: this chat account starts fresh. What I remembered so far stays with your other linked accounts."
NOT_LINKED = "This chat account isn't linked to any other, so there is nothing to unlink."
FORGET_ASK = (
    "This erases everything I remember about you and all our conversations, on every linked chat app, "
    "for every tutor of your teacher. It can't be undone. Send `/forget confirm` within {minutes} minutes to go ahead."
)
FORGOTTEN = "Done: I've erased what I remembered about you and our conversations."
FORGET_FIRST = "Send /forget first; then `/forget confirm` within {minutes} minutes."


def command_of(message: InboundMessage) -> tuple[str, str] | None:
    """``(name, argument)`` when the message is one of :data:`NAMES`, else None."""
    text = message.text.strip()
    if not text.startswith("/"):
        return None
    word, _, rest = text.partition(" ")
    name = word.split("@", 1)[0].casefold()
    return (name, rest.strip()) if name in NAMES else None


class Commands:
    def __init__(self, controls: MemoryControls, log_: SessionLog) -> None:
        self.controls = controls
        self.log = log_

    async def run(self, turn: Turn, message: InboundMessage, session: Session, locks: KeyedLocks) -> str:
        """Answer one command message; the caller holds ``session.lock_key``."""
        name, argument = command_of(message) or ("", "")
        if turn.address.conversation.kind is ConversationKind.GROUP:
            return GROUP_ONLY.format(command=name)
        await self.log.append(session.history_key, CommandRan(turn=uuid.uuid4().hex[:12], event_id=message.event_id, command=name))
        answer, outcome = await self._answer(name, argument, turn, session, locks)
        log.info("command ran command=%s person=%s outcome=%s", name, session.person, outcome)
        return answer

    async def _answer(self, name: str, argument: str, turn: Turn, session: Session, locks: KeyedLocks) -> tuple[str, str]:
        if name == "/link":
            return await self._link(argument, session, locks)
        if name == "/unlink":
            moved = await self.controls.unlink(session.teacher, identity_of(turn))
            return (UNLINKED, "unlinked") if moved else (NOT_LINKED, "not linked")
        minutes = round(FORGET_TTL_S / 60)
        if name == "/forget" and argument.casefold() == "confirm":
            forgotten = await self.controls.confirm_forget(session)
            return (FORGOTTEN, "forgotten") if forgotten is not None else (FORGET_FIRST.format(minutes=minutes), "not asked")
        if name == "/forget":
            await self.controls.request_forget(session)
            return FORGET_ASK.format(minutes=minutes), "asked"
        return await self.controls.markdown(session.writable), "exported"

    async def _link(self, code: str, session: Session, locks: KeyedLocks) -> tuple[str, str]:
        if not code:
            issued = await self.controls.issue_code(session)
            return LINK_CODE.format(code=issued, minutes=round(CODE_TTL_S / 60)), "code issued"
        owner = await self.controls.code_owner(session.teacher, code)
        if owner is None:
            return BAD_CODE, "bad code"
        # The code's person may be mid-turn on another chat app, and their log is about to be rewritten.
        other = locks.hold(person_lock_key(owner), timeout=LINK_WAIT_S) if owner != session.person else nullcontext()
        try:
            async with other:
                linked = await self.controls.redeem(session, code)
        except TimeoutError:
            return BUSY, "busy"
        if linked is None:
            return BAD_CODE, "bad code"
        return (LINKED, "linked") if linked.merged else (ALREADY_LINKED, "already linked")
