"""First contact: a chat that opens gets the partner's greeting, the same way on every channel.

A platform that has a gesture for "start talking to this bot" sends it as the
``/start`` command: Telegram's Start button does, and the web chat page sends
it once, hidden, when it opens a new session.  A channel without such a
gesture (email: the first mail is already a question) sends none, and its
learners get no greeting -- their first message is answered instead.

The dispatcher answers ``/start`` itself, before access is past and the turn
would reach a responder: no model, no session log, the same reply whatever
the responder.  The greeting is a reply like any other -- in the outbox under
the deterministic key ``reply_key(address, event id, "greeting")``, written in
the same transaction that marks the ``/start`` answered -- so a restart
neither loses it nor sends it twice.
"""

from __future__ import annotations

from gateway.core.config import PartnerConfig
from gateway.core.messages import InboundMessage
from gateway.core.phrases import Phrase, say

START = "/start"


def opens_chat(message: InboundMessage) -> bool:
    """The message is the platform's "start" gesture: ``/start``, ``/start@this_bot`` or ``/start PAYLOAD``."""
    words = message.text.split(maxsplit=1)
    return bool(words) and words[0].split("@", 1)[0].casefold() == START


def greeting_of(partner: PartnerConfig, language: str) -> str:
    """The partner's greeting (the gateway fills an empty one from the persona), else a plain hello from the
    catalogue in the learner's ``language`` -- a partner's own greeting is the teacher's words, kept as written."""
    return partner.greeting.strip() or say(Phrase.GREETING, language, name=partner.name)
