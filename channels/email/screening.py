"""Which mail is never answered, and why: automatic mail, strangers, and senders in a loop.

Mail is screened before it is accepted.  A refused mail is recorded with its
rule and reason (``sink.refused``: the rule labels the drop metric) and still
counts as processed, so it is never read again.  The rules, in the order they are checked:

- automatic mail (RFC 3834 ``Auto-Submitted``; ``Precedence: bulk/list/junk``;
  ``List-Id``; bounces: empty ``Return-Path``, MAILER-DAEMON, ``multipart/report``;
  no-reply senders; ``X-Autoreply``; ``X-Auto-Response-Suppress``): answering
  it is how two robots start mailing each other forever;
- senders outside ``allowed_senders`` / ``allowed_domains`` (on top of the
  gateway's access policy, which runs later and sees only admitted mail);
- a sender past ``max_mails_per_sender_hour``: the last guard against a loop
  the header rules missed (a misconfigured forwarder, a rogue autoresponder).

Mail from the partner's own address is not screened here: it is accepted as
``from_self`` and the pipeline drops it as an own message.
"""

from __future__ import annotations

import re
import time
from collections import deque
from email.message import EmailMessage
from email.utils import getaddresses
from typing import NamedTuple

NO_REPLY = re.compile(r"^(no[-_.]?reply|do[-_.]?not[-_.]?reply|mailer[-_.]daemon|postmaster|bounces?)([+-].*)?$", re.I)
BULK_PRECEDENCE = frozenset({"bulk", "list", "junk"})


def automatic_reason(message: EmailMessage, sender: str) -> str | None:
    """Why this mail was written by a machine, or None for mail a person wrote."""
    auto = str(message.get("Auto-Submitted", "") or "").strip().lower()
    if auto and auto.split(";", 1)[0].strip() != "no":
        return f"automatic mail (Auto-Submitted: {auto})"
    precedence = str(message.get("Precedence", "") or "").strip().lower()
    if precedence in BULK_PRECEDENCE:
        return f"automatic mail (Precedence: {precedence})"
    if message.get("List-Id") is not None:
        return "mailing-list mail (List-Id)"
    return_path = message.get("Return-Path")
    if return_path is not None and not [a for _, a in getaddresses([str(return_path)]) if a]:
        return "bounce (empty Return-Path)"
    if message.get_content_type() == "multipart/report":
        return "delivery or read report (multipart/report)"
    local = sender.rsplit("@", 1)[0]
    if NO_REPLY.match(local):
        return f"automatic sender ({local})"
    for header in ("X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"):
        if message.get(header) is not None:
            return f"automatic mail ({header})"
    return None


AUTOMATIC = "automatic mail"


class Refusal(NamedTuple):
    """Why a sender's mail is not taken: ``rule`` labels the metric, ``detail`` goes to the log."""

    rule: str
    detail: str


class SenderScreen:
    """Sender allowlist, domain policy and the per-sender hourly cap of one account."""

    def __init__(self, allowed_senders: tuple[str, ...], allowed_domains: tuple[str, ...], per_hour: int,
                 *, clock=time.monotonic) -> None:
        self.senders = frozenset(s.strip().lower() for s in allowed_senders)
        self.domains = frozenset(d.strip().lower().lstrip("@") for d in allowed_domains)
        self.per_hour = per_hour
        self._clock = clock
        self._recent: dict[str, deque[tuple[float, str | None]]] = {}
        """Sender -> (when, mail id) of the mail taken from them in the last hour."""

    def refusal(self, sender: str, mail_id: str | None = None) -> Refusal | None:
        """Why mail from ``sender`` is not taken, or None; counts it towards the hourly cap when taken.

        A mail already taken (``mail_id`` seen within the hour) is taken again without counting: a run
        that fails mid-batch re-reads the batch, and counting each reading would push a learner's
        ordinary mail over the cap, where it is refused and never answered."""
        if (self.senders or self.domains) and sender not in self.senders and sender.rsplit("@", 1)[-1] not in self.domains:
            return Refusal("sender not allowed", f"sender {sender} is not in allowed_senders or allowed_domains")
        now = self._clock()
        recent = self._recent.setdefault(sender, deque())
        while recent and now - recent[0][0] > 3600:
            recent.popleft()
        if mail_id is not None and any(seen == mail_id for _, seen in recent):
            return None
        if len(recent) >= self.per_hour:
            return Refusal("loop protection", f"sender {sender} sent more than {self.per_hour} mails in an hour")
        recent.append((now, mail_id))
        if len(self._recent) > 10_000:
            self._recent = {k: v for k, v in self._recent.items() if v and now - v[-1][0] <= 3600}
        return None
