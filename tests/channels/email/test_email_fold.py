"""Message-id headers fold under any policy, including one with no line limit (``max_line_length=None``)."""

from __future__ import annotations

import email
import email.policy

from channels.email.compose import Thread, compose
from gateway.core.messages import RenderedPart


def test_message_id_headers_go_out_whole_under_a_policy_without_a_line_limit():
    thread = Thread(message="<q1@school.test>", subject="Fractions", references=("<r0@x>", "<q1@school.test>"))
    reply = compose(RenderedPart(index=0, text="<p>3/4</p>"), thread, sender="tutor@school.test", sender_name="",
                    to="ann@school.test", bcc=None, idempotency_key="k1:0", fallback_subject="x")
    unlimited = email.policy.default.clone(max_line_length=None)  # e.g. email.policy.HTTP
    wire = email.message_from_bytes(reply.as_bytes(policy=unlimited), policy=email.policy.default)
    assert wire["References"] == "<r0@x> <q1@school.test>" and wire["In-Reply-To"] == "<q1@school.test>"
