"""A full turn by email: a learner mails a homework question, the real brain answers through the stub model.

The gateway builds its own brain (persona, house rules, session log, litellm)
with the partner's model on the OpenAI-compatible stub on 127.0.0.1; the
learner speaks only through the SMTP server and reads the answer from their
own Dovecot mailbox.  (Named ``test_email_full_turn`` because a test module's
basename must be unique across the tree's rootdir-relative dirs.)
"""

from __future__ import annotations

import asyncio
import uuid
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.email_harness import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "How do I find the area of a triangle with base 6 cm and height 4 cm?"
ANSWER = "Multiply base by height and halve it: what do you get for 6 cm and 4 cm?"


async def test_a_learner_mails_a_question_and_the_brains_answer_arrives_threaded_in_one_mail(email_peer, tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    password_env = f"EMAIL_E2E_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(password_env, email_peer.password)
    bot, learner = email_peer.new_address("buddy"), email_peer.new_address("learner")
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=5, pause=0.05))  # streamed: email has no edits, so it must be one mail
        settings = account_settings(email_peer, bot, f"env:{password_env}")
        settings.pop("access")
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="email", account="inbox",
                                         account_settings=settings))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("email", "inbox") is not None, gateway.unavailable
            question = EmailMessage()
            question["From"] = f"Ann Learner <{learner}>"
            question["To"] = bot
            question["Subject"] = "Maths homework"
            question["Date"] = formatdate(localtime=True)
            question["Message-ID"] = make_msgid(domain=email_peer.domain)
            question.set_content(QUESTION)
            await asyncio.to_thread(email_peer.send, question, login=learner)

            def answered():
                mails = [m for m in email_peer.received(learner) if bot in str(m["From"])]
                return mails if mails and settled(gateway) else None

            [reply] = await eventually(answered, what="the brain's answer in the learner's mailbox")
            await asyncio.sleep(0.5)
            assert len([m for m in email_peer.received(learner) if bot in str(m["From"])]) == 1
        finally:
            await gateway.stop()
    [request] = stub.requests
    assert request["stream"] is True
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][1:] == [{"role": "user", "content": QUESTION}]
    assert str(reply["Subject"]) == "Re: Maths homework"
    assert str(reply["In-Reply-To"]) == str(question["Message-ID"])
    assert str(reply["References"]) == str(question["Message-ID"])
    assert str(reply["To"]) == learner
    assert str(reply["Auto-Submitted"]) == "auto-replied"
    plain = reply.get_body(preferencelist=("plain",)).get_content()
    html = reply.get_body(preferencelist=("html",)).get_content()
    assert plain.startswith(ANSWER)
    assert f"Ann Learner wrote:\n> {QUESTION}" in plain
    assert f"<p>{ANSWER}</p>" in html
