"""Streamed previews: show the answer while it is being written, without a second reply.

A preview is not a message of its own: it is the reply's first part, shown
early, in the way the channel says for the conversation
(``Channel.stream_mode``).  In ``edit`` mode it is sent once (idempotency key
:func:`~gateway.pipeline.outbox.stream_key`) and edited; in ``native_stream``
mode a stream is started under that key and appended to.  Either way the
channel's opaque handle is stored on the outbox row, so the final delivery
*edits* the preview or *finishes* the stream rather than sending again -- also
when the turn is re-run after a crash.  Edits are coalesced to
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
from gateway.core.errors import Unsupported
from gateway.core.messages import OutboundReply, RenderedPart, StreamChunk, StreamHandle, StreamState
from gateway.pipeline.delivery import Outlet, chat_key, is_group
from gateway.pipeline.outbox import stream_key
from gateway.render import render_twins
from gateway.store import OutboxStore

log = logging.getLogger(__name__)


class PreviewStream:
    def __init__(self, outlet: Outlet, store: OutboxStore, reply: OutboundReply, preview: str | None) -> None:
        self.outlet = outlet
        self.store = store
        self.reply = reply
        self.preview = preview
        """The channel's handle of the preview message or stream on screen, once there is one."""
        self.mode = outlet.channel.stream_mode(reply.target)
        self.enabled = self.mode is not EditMode.NONE
        self._text = ""
        self._shown = ""
        self._appended: str | None = "" if preview is None else None
        """Markdown appended to the stream so far; None for a stream a previous run opened (unknown)."""
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
        parts = render_twins(markdown, self.outlet.capabilities)
        if not parts:
            return
        part = RenderedPart(index=0, text=parts[0].text, plain=parts[0].plain, final=False)
        target, key = self.reply.target, self.reply.idempotency_key
        try:
            async with self.outlet.pacer.slot(chat_key(target), is_group(target)):
                if self.preview is None:
                    if not self._preview_begun:
                        draft = self.reply.model_copy(update={"markdown": markdown, "state": StreamState.STREAMING})
                        await self.store.begin_preview(draft)
                        self._preview_begun = True
                    async with self.outlet.gate.unrecorded():  # a posted preview is a message too
                        self.preview = await self._open(part)
                        await self.store.record_preview(key, self.preview)
                    if self.mode is EditMode.NATIVE_STREAM:
                        await self._append(markdown, part)
                elif self.mode is EditMode.NATIVE_STREAM:
                    await self._append(markdown, part)
                else:
                    await self.outlet.channel.edit(target, self.preview, part, referrer=self.reply.referrer)
            self._shown = markdown
        except asyncio.CancelledError:
            raise
        except Unsupported as error:
            fallback = self.outlet.channel.stream_mode(target)
            if self.mode is not EditMode.NATIVE_STREAM or fallback is EditMode.NATIVE_STREAM:
                log.info("preview skipped platform=%s reply=%s error=%s", self.outlet.capabilities.platform, key, error)
                return
            # The platform turned out not to stream here (an older server): the channel says how it
            # shows previews instead, and the preview started that way replaces the stream's handle.
            log.info("native stream unavailable, preview falls back platform=%s reply=%s mode=%s",
                     self.outlet.capabilities.platform, key, fallback.value)
            self.mode, self.preview, self._appended = fallback, None, ""
            self.enabled = fallback is not EditMode.NONE
            if self.enabled:
                await self._show(markdown)
        except Exception as error:  # a 429 inside slot() has already slowed the chat's bucket
            log.info("preview skipped platform=%s reply=%s error=%s", self.outlet.capabilities.platform, key, error)

    async def _open(self, part: RenderedPart) -> str:
        """Put the preview on screen (edit mode: its first text) or start the stream; return the handle."""
        channel, reply, key = self.outlet.channel, self.reply, stream_key(self.reply.idempotency_key)
        if self.mode is EditMode.NATIVE_STREAM:
            return (await channel.start(reply.target, reply.referrer, key)).handle
        return (await channel.send(reply.target, part, referrer=reply.referrer, idempotency_key=key)).ref

    async def _append(self, markdown: str, part: RenderedPart) -> None:
        assert self.preview is not None
        stream = StreamHandle(target=self.reply.target, referrer=self.reply.referrer, handle=self.preview)
        known = self._appended
        delta = markdown[len(known):] if known is not None and markdown.startswith(known) else ""
        await self.outlet.channel.append(stream, StreamChunk(delta=delta, so_far=part))
        self._appended = markdown
