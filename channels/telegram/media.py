"""Inbound files: getFile, then a streamed download through the kit, after the update was acknowledged.

The decoder keeps only the ``file_id`` and what Telegram declared
(:class:`~gateway.messages.MediaRef`); the pipeline calls
``TelegramChannel.fetch_media`` once the update is durable and its offset
confirmed.  getFile answers with a path under ``{file_url}/<token>/``, so the
download URL holds the bot token: it is never logged, and an error names the
failure's kind only.  The cloud Bot API serves at most 20 MB this way
(``media_fetch_max_bytes`` in platforms.toml); a self-hosted server serves
more, and the account's ``max_download_bytes`` says how much to take.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from telegram import Bot

from channels._kit.media import download
from channels.base import MediaStream
from channels.telegram.transport import PLATFORM, call
from gateway.core.errors import NotFound, TooLarge
from gateway.core.messages import MediaRef


@asynccontextmanager
async def fetch(bot: Bot, http: httpx.AsyncClient, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
    file = await call("getFile", bot.get_file(ref.locator))
    if file.file_size is not None and file.file_size > limit:
        raise TooLarge(PLATFORM, limit, file.file_size)
    if not file.file_path:  # optional in getFile's answer: nothing to download from
        raise NotFound(PLATFORM, "Telegram gave no path to download it from")
    async with download(http, file.file_path, limit=limit, platform=PLATFORM, declared_type=ref.mime_type,
                        name=ref.name or file.file_path.rsplit("/", 1)[-1]) as stream:
        yield stream
