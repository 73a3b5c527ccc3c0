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
from gateway.core.phrases import Phrase, language_for, say, template
from gateway.core.turns import Turn

log = logging.getLogger(__name__)

Said = tuple[Phrase, dict[str, object]]
"""An answer still to be said: its phrase and fields; :meth:`Commands.run` says it in the learner's language."""

NAMES = ("/link", "/unlink", "/forget", "/export")
LINK_WAIT_S = 30.0
"""How long ``/link CODE`` waits for a turn of the code's person (on another chat app) to finish."""

# The English answers (every language's are in ``gateway/core/phrases.toml``); tests and docs quote them.
GROUP_ONLY = template(Phrase.GROUP_ONLY)
LINK_CODE = template(Phrase.LINK_CODE)
LINKED = template(Phrase.LINKED)
ALREADY_LINKED = template(Phrase.ALREADY_LINKED)
BAD_CODE = template(Phrase.BAD_CODE)
BUSY = template(Phrase.LINK_BUSY)
UNLINKED = template(Phrase.UNLINKED)
NOT_LINKED = template(Phrase.NOT_LINKED)
FORGET_ASK = template(Phrase.FORGET_ASK)
FORGOTTEN = template(Phrase.FORGOTTEN)
FORGET_FIRST = template(Phrase.FORGET_FIRST)


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
        language = language_for(turn.partner.languages, turn.sender.locale)
        if turn.address.conversation.kind is ConversationKind.GROUP:
            return say(Phrase.GROUP_ONLY, language, command=name)
        await self.log.append(session.history_key, CommandRan(turn=uuid.uuid4().hex[:12], event_id=message.event_id, command=name))
        answer, outcome = await self._answer(name, argument, turn, session, locks)
        log.info("command ran command=%s person=%s outcome=%s", name, session.person, outcome)
        if isinstance(answer, str):
            return answer  # the learner's own export, in their own words
        phrase, fields = answer
        return say(phrase, language, **fields)

    async def _answer(self, name: str, argument: str, turn: Turn, session: Session, locks: KeyedLocks) -> tuple[Said | str, str]:
        if name == "/link":
            return await self._link(argument, session, locks)
        if name == "/unlink":
            moved = await self.controls.unlink(session.teacher, identity_of(turn))
            return ((Phrase.UNLINKED, {}), "unlinked") if moved else ((Phrase.NOT_LINKED, {}), "not linked")
        minutes = round(FORGET_TTL_S / 60)
        if name == "/forget" and argument.casefold() == "confirm":
            forgotten = await self.controls.confirm_forget(session)
            if forgotten is None:
                return (Phrase.FORGET_FIRST, {"minutes": minutes}), "not asked"
            return (Phrase.FORGOTTEN, {}), "forgotten"
        if name == "/forget":
            await self.controls.request_forget(session)
            return (Phrase.FORGET_ASK, {"minutes": minutes}), "asked"
        return await self.controls.markdown(session.writable), "exported"

    async def _link(self, code: str, session: Session, locks: KeyedLocks) -> tuple[Said, str]:
        if not code:
            issued = await self.controls.issue_code(session)
            return (Phrase.LINK_CODE, {"code": issued, "minutes": round(CODE_TTL_S / 60)}), "code issued"
        owner = await self.controls.code_owner(session.teacher, code)
        if owner is None:
            return (Phrase.BAD_CODE, {}), "bad code"
        # The code's person may be mid-turn on another chat app, and their log is about to be rewritten.
        other = locks.hold(person_lock_key(owner), timeout=LINK_WAIT_S) if owner != session.person else nullcontext()
        try:
            async with other:
                linked = await self.controls.redeem(session, code)
        except TimeoutError:
            return (Phrase.LINK_BUSY, {}), "busy"
        if linked is None:
            return (Phrase.BAD_CODE, {}), "bad code"
        return ((Phrase.LINKED, {}), "linked") if linked.merged else ((Phrase.ALREADY_LINKED, {}), "already linked")
