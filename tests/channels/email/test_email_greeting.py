"""First contact by email: the first mail is a question, so it is answered -- and no greeting is sent.

Real Dovecot and SMTP on loopback (``tests/peers/email_peer.py``); the partner
has a greeting (its persona's), which Telegram's ``/start`` or a new web chat
session would get.  Email has no such gesture.
"""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.timeout(120)

PERSONA_GREETING = "Hi! I'm Study Buddy. Tell me what you're working on and we'll figure it out together."


async def test_a_learners_first_mail_gets_its_answer_and_no_greeting(email_rig):
    await email_rig.start()
    learner = email_rig.learner()

    await email_rig.send(email_rig.mail(learner, "How do I add fractions?", subject="Fractions"))
    await email_rig.replies(learner, 1, timeout=60)
    await email_rig.quiet()
    await asyncio.sleep(0.5)  # a greeting sent after the answer would land now

    [reply] = email_rig.received(learner)
    body = reply.get_body(preferencelist=("plain",)).get_content()
    assert body.startswith("echo: How do I add fractions?")
    assert "Study Buddy" not in body and PERSONA_GREETING not in body
    assert [m.text for t in email_rig.responder.turns for m in t.messages] == ["How do I add fractions?"]
