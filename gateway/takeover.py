"""Teacher takeovers: a partner hands a conversation to its teacher, and gets it back.

When the brain's hand-off tool fires, the conversation is paused for the
partner and every owner is told, in their own direct chat with the bot, with a
short case code.  While paused, what the learner writes is relayed to the
teacher instead of being answered by the model; the teacher answers with
``/reply CODE text`` (sent to the learner through the same channel) and ends
it with ``/handback CODE``, which tells the learner too (:attr:`Phrase.HANDED_BACK`,
in their language: the partner's languages and the locale they had when it was
handed over).  ``/takeovers`` lists open cases.  The teacher console takes a
conversation over, answers and hands it back through the same three methods
(:meth:`TeacherDesk.take_over`, :meth:`~TeacherDesk.answer_as_teacher`,
:meth:`~TeacherDesk.hand_back`) that the chat commands use.

Every relay, every teacher reply, the hand-back notice and every confirmation is
an outbox reply with a deterministic key, so a crash in the middle repeats nothing.

What is said here is for the teacher (English, like the rest of the operator's
side) or for the model (which tells the learner in its own words); the one
sentence the learner reads from the gateway itself is the hand-back notice.
"""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

from gateway.core.config import OwnerRef, PartnerConfig
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    InboundMessage,
    OutboundReply,
    ReplyAuthor,
)
from gateway.core.phrases import Phrase, language_for, say
from gateway.core.turns import Role
from gateway.pipeline.outbox import Outbox, reply_key
from gateway.pipeline.routing import Router
from gateway.store import OutboxStore, Takeover, TakeoverStore


class TakeoverDeskStore(TakeoverStore, OutboxStore, Protocol):
    """What the teacher desk uses of the store: its takeovers, and the outbox to see whether a notice went out."""

log = logging.getLogger(__name__)

HANDED_OVER = (
    "{partner} handed a conversation to you: {where}, learner {learner}. Reason: {reason}\n\n"
    "Reply with `/reply {code} your message`; send `/handback {code}` to let {partner} answer again."
)
TOLD_MODEL = "Your teacher has been notified (case {code}) and will answer here. Tell the learner their teacher will reply soon."


def owner_address(owner: OwnerRef) -> Address:
    return Address(
        channel=ChannelName(owner.channel),
        account=AccountId(owner.account),
        conversation=Conversation(chat=ChatId(owner.chat or owner.user), kind=ConversationKind.DIRECT),
    )


class TeacherDesk:
    def __init__(self, store: TakeoverDeskStore, router: Router, outbox: Outbox) -> None:
        self.store = store
        self.router = router
        self.outbox = outbox
        self._paused: set[str] = set()

    async def load(self) -> None:
        self._paused = {t.target.conversation_key for t in await self.store.takeovers()}

    # ------------------------------------------------------------------ the brain's hand-off

    async def hand_to_teacher(self, address: Address, reason: str, locale: str = "") -> str:
        partner = self.router.route(address)
        if partner is None:
            return "There is no partner bound here, so there is no teacher to hand over to."
        if not partner.owners:
            return "No teacher is configured for this partner; tell the learner to contact their teacher directly."
        takeover = await self.store.start_takeover(partner.id, address, reason, locale)
        self._paused.add(address.conversation_key)
        where = address.conversation.title or f"{address.channel} chat {address.conversation.chat}"
        text = HANDED_OVER.format(partner=partner.name, where=where, learner=address.conversation.chat,
                                  reason=reason, code=takeover.code)
        await self._tell_owners(partner, text, purpose=f"takeover:{takeover.code}")
        log.info("conversation handed to the teacher conversation=%s code=%s", address.conversation_key, takeover.code)
        return TOLD_MODEL.format(code=takeover.code)

    async def report(self, address: Address, text: str) -> None:
        """Tell the teachers of the partner bound here something the partner could not do."""
        partner = self.router.route(address)
        if partner is None or not partner.owners:
            log.warning("nothing to report to: no teacher for conversation=%s", address.conversation_key)
            return
        where = address.conversation.title or f"{address.channel} chat {address.conversation.chat}"
        await self._tell_owners(partner, f"{where}: {text}", purpose=f"report:{uuid.uuid4().hex}")

    # ------------------------------------------------------------------ the pipeline's hook

    async def intercept(self, message: InboundMessage, partner: PartnerConfig, role: Role) -> bool:
        """Handle owner commands and messages in paused conversations; True when handled here."""
        text = message.text.strip()
        if role is Role.OWNER and message.address.conversation.kind is ConversationKind.DIRECT and text.startswith("/"):
            command, _, rest = text.partition(" ")
            if command in ("/reply", "/handback", "/takeovers"):
                await self._owner_command(message, command, rest.strip())
                return True
        if message.address.conversation_key in self._paused and role is not Role.OWNER:
            takeover = await self.store.takeover_of(message.address.conversation_key)
            if takeover is not None:
                relay = f"[{takeover.code}] {message.sender.display_name or message.sender.user}: {message.text}"
                await self._tell_owners(partner, relay, purpose=f"relay:{message.event_id}", answered=message)
                return True
            self._paused.discard(message.address.conversation_key)
        return False

    async def _owner_command(self, message: InboundMessage, command: str, rest: str) -> None:
        if command == "/takeovers":
            open_cases = await self.store.takeovers()
            lines = [f"- `{t.code}` {t.target.channel} chat {t.target.conversation.chat}: {t.reason}" for t in open_cases]
            await self._answer(message, "\n".join(lines) if lines else "No conversations are waiting for you.")
            return
        code, _, body = rest.partition(" ")
        takeover = await self.store.takeover_by_code(code) if code else None
        if takeover is None:
            await self._answer(message, f"No open case `{code or '?'}`. Send `/takeovers` to list them.")
            return
        if command == "/handback":
            await self.hand_back(takeover, message.event_id)
            await self._answer(message, f"Case {takeover.code} handed back: the partner answers there again.")
            return
        if not body.strip():
            await self._answer(message, f"Write the message after the code: `/reply {takeover.code} your message`.")
            return
        await self.answer_as_teacher(takeover, body.strip(), message.event_id)
        await self._answer(message, f"Sent to case {takeover.code}.")

    # ------------------------------------------------------------------ what the teacher does, from chat or the console

    async def take_over(self, partner: PartnerConfig, address: Address, reason: str, locale: str = "") -> Takeover:
        """The teacher takes a conversation over themselves (the console): the partner stays quiet there and
        what the learner writes is relayed, as after a hand-off; idempotent (the running case is returned)."""
        takeover = await self.store.start_takeover(partner.id, address, reason, locale)
        self._paused.add(address.conversation_key)
        log.info("conversation taken over by the teacher conversation=%s code=%s", address.conversation_key, takeover.code)
        return takeover

    async def answer_as_teacher(self, takeover: Takeover, text: str, request: str) -> None:
        """Send the teacher's ``text`` to the learner, once per ``request`` (a chat command's event id, a console form's).

        A row already there is left alone: writing it again would make a delivered answer ready once more."""
        key = reply_key(takeover.target, request, "teacher")
        if await self.store.get_reply(key) is not None:
            return
        reply = OutboundReply(idempotency_key=key, target=takeover.target, markdown=text,
                              language=self._learner_language(takeover), author=ReplyAuthor.TEACHER)
        await self.outbox.post(reply)

    async def hand_back(self, takeover: Takeover, request: str) -> None:
        """End the case: the learner is told (:attr:`Phrase.HANDED_BACK`) and the partner answers there again.

        The learner's notice is written first: a crash before the case is closed repeats the request,
        whose key makes the notice once; one after finds no case."""
        await self._tell_learner(takeover, request)
        await self.store.end_takeover(takeover.code)
        self._paused.discard(takeover.target.conversation_key)
        log.info("conversation handed back conversation=%s code=%s", takeover.target.conversation_key, takeover.code)

    # ------------------------------------------------------------------ outbox helpers

    def _learner_language(self, takeover: Takeover) -> str:
        """The language the learner in a taken-over conversation is spoken to (:func:`language_for`)."""
        partner = self.router.route(takeover.target)
        return language_for(partner.languages if partner is not None else (), takeover.locale)

    async def _tell_learner(self, takeover: Takeover, request: str) -> None:
        """Tell the learner their partner answers again (once per hand-back: its key is the request's).

        A row already there is left alone: writing it again would make a delivered notice ready once more."""
        key = reply_key(takeover.target, request, "handback")
        if await self.store.get_reply(key) is not None:
            return  # a repeated command (a crash before the case closed); resume wakes it if still undelivered
        partner = self.router.route(takeover.target)
        language = self._learner_language(takeover)
        text = say(Phrase.HANDED_BACK, language, partner=partner.name if partner is not None else takeover.partner)
        await self.outbox.post(OutboundReply(idempotency_key=key, target=takeover.target, markdown=text, language=language,
                                             author=ReplyAuthor.GATEWAY))

    async def _answer(self, message: InboundMessage, text: str) -> None:
        key = reply_key(message.address, message.event_id)
        reply = OutboundReply(idempotency_key=key, target=message.address, referrer=message.referrer, markdown=text,
                              in_reply_to=(message.event_id,), author=ReplyAuthor.GATEWAY)
        await self.outbox.post(reply, answered=[message.dedup_key])

    async def _tell_owners(self, partner: PartnerConfig, text: str, *, purpose: str, answered: InboundMessage | None = None) -> None:
        for index, owner in enumerate(partner.owners):
            target = owner_address(owner)
            key = reply_key(target, purpose, f"owner:{index}")
            marks = [answered.dedup_key] if answered is not None and index == 0 else []
            await self.outbox.post(OutboundReply(idempotency_key=key, target=target, markdown=text, author=ReplyAuthor.GATEWAY),
                                   answered=marks)
