"""Rendered parts -> Web API calls: messages, native streams, edits and files.

Parts arrive rendered to mrkdwn and split by the outbound path; this module
only decides which calls carry them.

- Text goes with chat.postMessage into the conversation's thread
  (``thread_ts``); link previews are off, so an answer citing a link stays
  short.
- An image given by URL becomes an image block (Slack fetches it); a file on
  disk is uploaded the documented way -- files.getUploadURLExternal, the bytes
  to the URL it returns, then files.completeUploadExternal into the thread.
- A stream is chat.startStream -> appendStream(delta) -> stopStream.  Slack's
  stream text is Markdown, not mrkdwn, so the finished message is set to the
  rendered mrkdwn once the stream stops (chat.update): what stays on screen is
  the same text every other reply shows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.transport import PLATFORM, call
from gateway.core.errors import BadRequest, PeerUnavailable
from gateway.core.messages import Attachment, RenderedPart


@dataclass(frozen=True)
class Where:
    """A channel, the thread to answer in, and who the answer is for (a channel stream names its recipient)."""

    channel: str
    thread: str | None
    team: str | None = None
    user: str | None = None


class Calls:
    """The Web API calls of one account, each translated at the boundary."""

    def __init__(self, client: AsyncWebClient, endpoint: str) -> None:
        self.client, self.endpoint = client, endpoint

    async def _call(self, method: str, operation: Any) -> Any:
        return await call(method, operation, self.endpoint)

    async def post(self, where: Where, text: str, blocks: list[dict] | None = None) -> str:
        answer = await self._call("chat.postMessage", self.client.chat_postMessage(
            channel=where.channel, text=text, thread_ts=where.thread, blocks=blocks, unfurl_links=False, mrkdwn=True))
        return str(answer["ts"])

    async def update(self, channel: str, ts: str, text: str) -> None:
        await self._call("chat.update", self.client.chat_update(channel=channel, ts=ts, text=text))

    async def start_stream(self, where: Where, text: str) -> str:
        assert where.thread is not None, "Slack streams only into a thread"
        answer = await self._call("chat.startStream", self.client.chat_startStream(
            channel=where.channel, thread_ts=where.thread, markdown_text=text,
            recipient_team_id=where.team or None, recipient_user_id=where.user or None))
        return str(answer["ts"])

    async def append_stream(self, channel: str, ts: str, delta: str) -> None:
        await self._call("chat.appendStream", self.client.chat_appendStream(channel=channel, ts=ts, markdown_text=delta))

    async def stop_stream(self, channel: str, ts: str) -> None:
        await self._call("chat.stopStream", self.client.chat_stopStream(channel=channel, ts=ts))

    async def status(self, channel: str, thread: str, status: str) -> None:
        await self._call("assistant.threads.setStatus", self.client.assistant_threads_setStatus(
            channel_id=channel, thread_ts=thread, status=status))

    async def prompts(self, channel: str, thread: str, prompts: tuple[str, ...]) -> None:
        await self._call("assistant.threads.setSuggestedPrompts", self.client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, thread_ts=thread, prompts=[{"title": p, "message": p} for p in prompts]))

    async def upload(self, where: Where, attachment: Attachment, limit: int) -> str:
        """One file on disk into the thread, in the three documented steps; returns the file id."""
        path = Path(attachment.path or "")
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as error:
            raise BadRequest(PLATFORM, f"attachment {path.name} cannot be read: {error.strerror}") from None
        if len(data) > limit:
            raise BadRequest(PLATFORM, f"attachment {path.name} is {len(data)} bytes; Slack takes at most {limit}")
        name = attachment.name or path.name
        ticket = await self._call("files.getUploadURLExternal",
                                  self.client.files_getUploadURLExternal(filename=name, length=len(data)))
        try:
            async with aiohttp.ClientSession(trust_env=False) as session, \
                    session.post(str(ticket["upload_url"]), data=data) as response:
                if response.status != 200:
                    raise PeerUnavailable(PLATFORM, f"file upload (HTTP {response.status})", code=response.status)
        except aiohttp.ClientError as error:
            raise PeerUnavailable(PLATFORM, f"file upload: {type(error).__name__}") from error
        await self._call("files.completeUploadExternal", self.client.files_completeUploadExternal(
            files=[{"id": str(ticket["file_id"]), "title": name}], channel_id=where.channel, thread_ts=where.thread))
        return str(ticket["file_id"])


def image_blocks(text: str, attachments: tuple[Attachment, ...]) -> list[dict] | None:
    """Blocks for the images given by URL (with the text as a section above them), or None when there are none."""
    images = [a for a in attachments if a.url and not a.path and a.kind == "image"]
    if not images:
        return None
    blocks: list[dict] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}] if text.strip() else []
    blocks += [{"type": "image", "image_url": a.url, "alt_text": a.name or "image"} for a in images]
    return blocks


def linked_files(text: str, attachments: tuple[Attachment, ...]) -> str:
    """Files given by URL that are not images go as links under the text."""
    links = [f"<{a.url}|{a.name or a.url}>" for a in attachments if a.url and not a.path and a.kind != "image"]
    return "\n".join([text, *links]) if links else text


def fallback_text(part: RenderedPart) -> str:
    """The top-level ``text`` of a message shown by blocks: what notifications and screen readers say,
    so the plain twin (never empty: an image alone is named by its alt text)."""
    said = linked_files(part.plain, part.attachments).strip()
    return said or ", ".join(a.name or "image" for a in part.attachments if a.url and a.kind == "image")
