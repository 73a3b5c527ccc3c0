"""EmailChannel: a partner's mailbox, read over IMAP and answered over SMTP.

Inbound, per mailbox, the cursor is ``"<uidvalidity>:<last uid>"``, written
only after ``sink.accept`` returned for every mail up to that UID -- including
mail screened out, which is recorded with its reason and never read again.
After a crash the same UIDs are fetched again and the gateway's dedup (keyed
by Message-ID) answers each once.

- No cursor yet (first start): unread mail is taken, read mail is left alone.
- UIDVALIDITY changed (the mailbox was rebuilt, UIDs mean nothing now): mail of
  the redelivery horizon is fetched again; dedup by Message-ID keeps anything
  already answered from being answered twice.

The reader keeps its own loop (wait for mail, drain, repeat) rather than the
kit's long poll: its reading needs a live session (connection, SELECT and the
UIDVALIDITY the cursor is read against) that a transient error ends, so a
failure ends ``run`` and the supervisor's restart opens a new one (ADR 0011).

Attachments are the one exception to "files after the ack" (ADR 0026): IMAP
has already handed their bytes over with the mail, so they go into the blob
store here instead of being fetched again later, by a UID the learner's own
mail client may have moved or expunged by then.

Outbound, each part is one mail (see ``compose``), submitted over SMTP, and
recorded in the sent ledger so a retried key is never submitted twice by us.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import logging
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import PurePath
from typing import ClassVar

from channels.base import Channel, ChannelContext
from channels.email.compose import Thread, compose
from channels.email.config import EmailConfig
from channels.email.decode import Received, decode, event_id_of, sender_of
from channels.email.imap import ImapSession, MailboxState
from channels.email.ledger import LEDGER_FILE, SentLedger
from channels.email.probe import check_settings, probe_mailbox
from channels.email.screening import AUTOMATIC, Refusal, SenderScreen, automatic_reason
from channels.email.smtp import SmtpSubmitter
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import BadRequest, InvalidEvent
from gateway.core.messages import Address, Element, InboundMessage, Media, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem

log = logging.getLogger(__name__)
BATCH = 25


async def _once(payload: bytes) -> AsyncIterator[bytes]:
    yield payload


class EmailChannel(Channel[EmailConfig]):
    name: ClassVar[str] = "email"
    config_model = EmailConfig

    def __init__(self, context: ChannelContext[EmailConfig]) -> None:
        super().__init__(context)
        self.me = self.settings.address.lower()
        self.screen = SenderScreen(self.settings.allowed_senders, self.settings.allowed_domains,
                                   self.settings.max_mails_per_sender_hour)
        self.tls_context = self.settings.tls_context()
        self.smtp = SmtpSubmitter(self.settings, self.tls_context)
        self._ledger: SentLedger | None = None
        self._ledger_lock = threading.Lock()

    @property
    def cursor_name(self) -> str:
        return f"imap:{self.settings.mailbox}"

    @property
    def ledger(self) -> SentLedger:
        """Opened on first use, from a worker thread: every ledger call commits with a full sync,
        which must not stall the event loop all channels share."""
        with self._ledger_lock:
            if self._ledger is None:
                self._ledger = SentLedger(self.context.data_dir / LEDGER_FILE, self.capabilities().redelivery_horizon_s)
            return self._ledger

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: EmailConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        problems = self.check(self.settings)
        if problems:
            return ProbeResult(checked=f"mailbox {self.settings.address}", problems=tuple(problems))
        return await probe_mailbox(self.settings, self.tls_context)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        imap = ImapSession(self.settings, self.tls_context)
        try:
            state = await imap.open()
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("email reading account=%s mailbox=%s uidvalidity=%d idle=%s", self.account,
                     self.settings.mailbox, state.uidvalidity, self.settings.idle and imap.can_idle)
            while True:
                # Drain until a search finds nothing and no new-mail notice came meanwhile: the
                # server announces a mail once, and not again once IDLE starts.
                notices = imap.exists_notices
                found = await self._drain(imap, state, heartbeat)
                heartbeat.beat()
                if found or imap.exists_notices != notices:
                    continue
                await imap.wait_for_mail(self.settings.idle)
                heartbeat.beat()
        finally:
            await imap.close()

    async def _pending_uids(self, imap: ImapSession, state: MailboxState) -> list[int]:
        """UIDs to read now, in order."""
        saved = await self.context.cursors.get(self.cursor_name)
        if saved is None:
            return await imap.search("UNSEEN")
        validity, _, last = saved.partition(":")
        if int(validity) != state.uidvalidity:
            horizon = datetime.now(UTC) - timedelta(seconds=self.capabilities().redelivery_horizon_s)
            log.warning("email UIDVALIDITY changed account=%s mailbox=%s was=%s now=%d: re-reading mail since %s",
                        self.account, self.settings.mailbox, validity, state.uidvalidity, horizon.date())
            return await imap.search("SINCE", horizon.strftime("%d-%b-%Y"))
        last_uid = int(last)
        return [u for u in await imap.search("UID", f"{last_uid + 1}:*") if u > last_uid]

    async def _drain(self, imap: ImapSession, state: MailboxState, heartbeat: Heartbeat) -> bool:
        """Read, screen and accept every pending mail, advancing the cursor after each accepted batch;
        say whether there was any.

        Mail below the UIDNEXT seen at SELECT that was not pending (read mail on a first start,
        mail past the horizon after a UIDVALIDITY change) is passed over on purpose.  Each mail read is
        a sign of life: a batch of large mails can outlast the supervisor's stall watch, and a run
        cancelled as stalled reads the same batch again -- forever."""
        uids = await self._pending_uids(imap, state)
        for start in range(0, len(uids), BATCH):
            chunk = uids[start : start + BATCH]
            sizes = await imap.sizes(chunk)
            accepted: list[InboundMessage] = []
            for uid in chunk:
                message = await self._read(imap, state.uidvalidity, uid, sizes.get(uid))
                heartbeat.beat()
                if message is not None:
                    accepted.append(message)
            if accepted:
                await self.context.sink.accept(accepted)
            await self._advance(state.uidvalidity, chunk[-1])
            await imap.mark_seen(chunk)
        saved = await self.context.cursors.get(self.cursor_name)
        if saved is None or saved.partition(":")[0] != str(state.uidvalidity) or int(saved.partition(":")[2]) < state.uidnext - 1:
            await self._advance(state.uidvalidity, max(state.uidnext - 1, uids[-1] if uids else 0))
        return bool(uids)

    async def _advance(self, uidvalidity: int, uid: int) -> None:
        await self.context.cursors.put(self.cursor_name, f"{uidvalidity}:{uid}")

    async def _attempt(self, uidvalidity: int, uid: int) -> int:
        """Count, durably and before it starts, one more run that came as far as fetching ``uid``.

        A mail the server cannot serve (a damaged or unreadable file behind it) breaks the session
        on every FETCH; without this count the reader would restart on it forever and never answer
        the mail after it.  A network outage does not count: it fails before the fetch."""
        name = f"{self.cursor_name}:fetching"
        was_validity, was_uid, count = (await self.context.cursors.get(name) or "0:0:0").split(":")
        attempts = int(count) + 1 if (int(was_validity), int(was_uid)) == (uidvalidity, uid) else 1
        await self.context.cursors.put(name, f"{uidvalidity}:{uid}:{attempts}")
        return attempts

    async def _read(self, imap: ImapSession, uidvalidity: int, uid: int, size: int | None) -> InboundMessage | None:
        """Fetch, decode and screen one mail; None (with the reason recorded) when it is not to be answered."""
        limit = self.settings.max_message_bytes
        if size is not None and size > limit:
            self._refuse(uid, "too large", f"mail of {size} bytes is over max_message_bytes ({limit})")
            return None
        attempts = await self._attempt(uidvalidity, uid)
        if attempts > self.settings.max_fetch_attempts:
            log.error("email passed over a mail the server cannot serve account=%s mailbox=%s uid=%d runs=%d",
                      self.account, self.settings.mailbox, uid, attempts - 1)
            self._invalid(uid, f"the server broke off {attempts - 1} times while sending this mail; passed "
                               "over so later mail is answered (it is still in the mailbox)")
            return None
        raw = await imap.fetch(uid)
        if raw is None:
            self._invalid(uid, "mail could not be fetched (expunged meanwhile, or empty)")
            return None
        try:
            # Parsing and saving a mail of up to max_message_bytes takes about a second: off the event loop
            mail = await asyncio.to_thread(email.message_from_bytes, raw, policy=email.policy.default)
            # Screened before decoding, because decoding writes the attachments to disk: mail that is
            # never answered (a stranger's, a robot's) must not be able to fill the partner's disk.
            _, sender = sender_of(mail)
            if sender != self.me:  # own mail is not screened: the pipeline drops it as an own message
                automatic = automatic_reason(mail, sender)
                mail_id = event_id_of(mail, raw)
                refusal = Refusal(AUTOMATIC, automatic) if automatic else self.screen.refusal(sender, mail_id)
                if refusal:
                    self._refuse(uid, refusal.rule, f"{refusal.detail}; Message-ID {mail_id}")
                    return None
            received = await asyncio.to_thread(decode, mail, raw, account=self.account, me=self.me,
                                               media_max_bytes=self.media_limit())
            return await self._keep_parts(received)
        except InvalidEvent as error:
            self._invalid(uid, str(error))
            return None
        except Exception as error:  # the stdlib parser is lenient; anything it still chokes on is the mail's fault
            self._invalid(uid, f"unreadable mail ({type(error).__name__}: {error})")
            return None

    async def _keep_parts(self, received: Received) -> InboundMessage:
        """The message with each attachment in the blob store; a part that cannot be stored is a note."""
        if not received.parts:
            return received.message
        blobs = self.context.blobs
        elements: list[Element] = []
        for element in received.message.elements:
            payload = received.parts.get(element.ref.locator) if isinstance(element, Media) and element.ref else None
            if isinstance(element, Media) and payload is not None and blobs is None:  # a context for probes only
                element = element.model_copy(update={"missing": "the gateway has no blob store to keep it in"})
            elif isinstance(element, Media) and payload is not None and blobs is not None:
                try:
                    blob = await blobs.put(_once(payload), limit=self.media_limit(),
                                           suffix=PurePath(element.name).suffix)
                    element = element.model_copy(update={"blob": blob.key, "size": blob.size})
                except OSError as error:  # a full disk: the words of the mail still go through
                    log.warning("email attachment not stored account=%s name=%s reason=%s", self.account, element.name, error)
                    element = element.model_copy(update={"missing": "it could not be stored"})
            elements.append(element)
        return received.message.model_copy(update={"elements": tuple(elements)})

    def _invalid(self, uid: int, reason: str) -> None:
        self.context.sink.invalid(f"email uid {uid}: {reason}")

    def _refuse(self, uid: int, rule: str, detail: str) -> None:
        self.context.sink.refused(rule, f"email uid {uid}: {detail}")

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        known = await asyncio.to_thread(lambda: self.ledger.sent(idempotency_key))
        if known is not None:
            log.info("email already sent account=%s key=%s message=%s", self.account, idempotency_key, known)
            return SentMessage(message=MessageId(known))
        thread = Thread.from_referrer(referrer.message, referrer.token)
        to = thread.reply_to or target.conversation.chat
        try:
            mail = await asyncio.to_thread(  # composing reads the reply's files from disk: off the event loop
                compose, part, thread, sender=self.settings.address, sender_name=self.settings.display_name, to=to,
                bcc=self.settings.address if self.settings.copy_to_self else None,
                idempotency_key=idempotency_key, fallback_subject=self.settings.new_subject)
        except (ValueError, TypeError, OSError) as error:  # an address or header the email package refuses, a file gone
            raise BadRequest("email", f"cannot compose the reply to {to}: {error}") from error
        recipients = [to] + ([self.settings.address] if self.settings.copy_to_self else [])
        message_id = str(mail["Message-ID"])

        async def record_sent() -> None:  # the moment the server takes it, before QUIT (channels/email/smtp.py)
            await asyncio.to_thread(lambda: self.ledger.record(idempotency_key, message_id))

        await self.smtp.submit(mail, recipients, accepted=record_sent)
        log.info("email sent account=%s to=%s message=%s part=%d", self.account, to, message_id, part.index)
        return SentMessage(message=MessageId(message_id))

    async def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
