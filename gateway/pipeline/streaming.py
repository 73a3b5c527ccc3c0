"""Streamed previews: show the answer while it is being written, without a second reply.

A preview is not a message of its own: it is the reply's first part, shown
early.  It is sent once (idempotency key ``{reply}:p``) and its platform id is
stored on the outbox row, so the final delivery *edits* it rather than sending
again -- also when the turn is re-run after a crash.  Edits are coalesced to
the channel's minimum edit interval; a failed preview edit is skipped (the
final delivery is what must arrive), a 429 also slows the chat's bucket.
Channels that cannot edit get no preview, only the typing indicator.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress

from gateway.core.capabilities import EditMode
from gateway.core.messages import MessageId, OutboundReply, RenderedPart, StreamState
from gateway.pipeline.delivery import Outlet, chat_key, is_group
from gateway.render import render_reply
from gateway.store import Store

log = logging.getLogger(__name__)


class PreviewStream:
    def __init__(self, outlet: Outlet, store: Store, reply: OutboundReply, preview: MessageId | None) -> None:
        self.outlet = outlet
        self.store = store
        self.reply = reply
        self.preview = preview
        self.enabled = outlet.capabilities.edit_mode is not EditMode.NONE
        self._text = ""
        self._shown = ""
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._typing: asyncio.Task[None] | None = None
        self._preview_begun = preview is not None

    def start(self) -> None:
        if self.outlet.capabilities.typing:
            self._typing = asyncio.create_task(self._keep_typing())

    def update(self, markdown: str) -> None:
        """The answer so far.  Cheap: the actual send happens in the background, coalesced."""
        if not self.enabled:
            return
        self._text = markdown
        self._changed.set()
        if self._task is None:
            self._task = asyncio.create_task(self._pump())

    async def close(self) -> None:
        """Stop previewing.  A preview send already on the wire is allowed to finish and be
        recorded: cancelling it could leave a message on screen that the final delivery does
        not know about -- an orphan that looks like a second reply."""
        self._closing.set()
        self._changed.set()
        if self._typing is not None:
            self._typing.cancel()
            with suppress(asyncio.CancelledError):
                await self._typing
        if self._task is not None:
            await self._task

    async def _keep_typing(self) -> None:
        channel, caps = self.outlet.channel, self.outlet.capabilities
        while self.preview is None:
            try:
                await channel.typing(self.reply.target)
            except Exception as error:  # typing is decoration: never fail a turn for it
                log.debug("typing failed platform=%s error=%s", caps.platform, error)
            await asyncio.sleep(caps.typing_interval)

    async def _pump(self) -> None:
        interval = self.outlet.capabilities.min_edit_interval
        last = 0.0
        while not self._closing.is_set():
            await self._changed.wait()
            self._changed.clear()
            wait = last + interval - time.monotonic()
            if wait > 0:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), wait)
            if self._closing.is_set():
                return  # the final delivery shows the whole text; no need for one more preview
            text = self._text
            if text.strip() and text != self._shown:
                await self._show(text)
                last = time.monotonic()

    async def _show(self, markdown: str) -> None:
        parts = render_reply(markdown, self.outlet.capabilities)
        if not parts:
            return
        part = RenderedPart(index=0, text=parts[0], final=False)
        target, key = self.reply.target, self.reply.idempotency_key
        try:
            async with self.outlet.pacer.slot(chat_key(target), is_group(target)):
                if self.preview is None:
                    if not self._preview_begun:
                        draft = self.reply.model_copy(update={"markdown": markdown, "state": StreamState.STREAMING})
                        await self.store.begin_preview(draft)
                        self._preview_begun = True
                    async with self.outlet.gate.unrecorded():  # a posted preview is a message too
                        sent = await self.outlet.channel.send(target, part, referrer=self.reply.referrer,
                                                              idempotency_key=f"{key}:p")
                        self.preview = sent.message
                        await self.store.record_preview(key, sent.message)
                else:
                    await self.outlet.channel.edit(target, self.preview, part, final=False)
            self._shown = markdown
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a 429 inside slot() has already slowed the chat's bucket
            log.info("preview skipped platform=%s reply=%s error=%s", self.outlet.capabilities.platform, key, error)
