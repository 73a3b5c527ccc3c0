"""Inbound files: getFile + download into the account's data dir, within a size limit.

A downloaded file becomes a :class:`Media` element whose ``url`` is the local
``file://`` path (under ``context.data_dir / "media"``) and whose
``platform_ref`` keeps the ``file_id``.  A file over the limit -- the cloud
Bot API serves at most 20 MB through getFile, and the teacher may set less --
is not downloaded; the message still arrives, with a note that says which file
was left out and why, so the partner can tell the learner instead of
pretending it saw it.  A failed download is a note too: the words of a
message are never lost for the sake of its attachment.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

from telegram import Bot

from channels.telegram.transport import call
from gateway.core.errors import GatewayError
from gateway.core.messages import Element, InboundMessage, Media, Text

log = logging.getLogger(__name__)


SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


def _suffix(name: str) -> str:
    """The file's extension when it looks like one; the learner names the file, and a name's tail of 300
    characters, or one with a NUL in it, cannot be part of a file name on disk."""
    suffix = Path(name).suffix
    return suffix if SUFFIX.fullmatch(suffix) else ""


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _note(media: Media, reason: str) -> Text:
    label = f"{media.kind} {media.name}".strip()
    return Text(text=f"\n[{label} not downloaded: {reason}]")


async def _fetch(bot: Bot, media: Media, ref: str, folder: Path, limit: int) -> tuple[Media, Text | None]:
    if media.size is not None and media.size > limit:
        return media, _note(media, f"{_megabytes(media.size)} is over the {_megabytes(limit)} limit")
    try:
        file = await call("getFile", bot.get_file(ref))
        if file.file_size is not None and file.file_size > limit:
            return media, _note(media, f"{_megabytes(file.file_size)} is over the {_megabytes(limit)} limit")
        if not file.file_path:  # optional in getFile's answer; PTB would raise RuntimeError
            return media, _note(media, "Telegram gave no path to download it from")
        path = folder / f"{file.file_unique_id}{_suffix(file.file_path or '') or _suffix(media.name)}"
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        await call("downloadFile", file.download_to_drive(path))
    except GatewayError as error:
        log.warning("telegram media not downloaded ref=%s reason=%s", media.platform_ref, error)
        return media, _note(media, f"Telegram refused it ({getattr(error, 'detail', error)})")
    except (OSError, ValueError) as error:  # raised out of the poll loop it would stop the queue on this update
        log.warning("telegram media not saved ref=%s reason=%s", media.platform_ref, error)
        return media, _note(media, "it could not be saved")
    return media.model_copy(update={"url": path.as_uri(), "size": path.stat().st_size}), None


async def download_media(bot: Bot, message: InboundMessage, folder: Path, limit: int) -> InboundMessage:
    """The message with its files downloaded (or noted as left out); unchanged when it has none."""
    if not any(isinstance(e, Media) and e.platform_ref and not e.url for e in message.elements):
        return message
    elements: list[Element] = []
    notes: list[Text] = []
    for element in message.elements:
        if isinstance(element, Media) and element.platform_ref and not element.url:
            element, note = await _fetch(bot, element, element.platform_ref, folder, limit)
            if note is not None:
                log.info("telegram media left out event=%s reason=%s", message.event_id, note.text.strip())
                notes.append(note)
        elements.append(element)
    return message.model_copy(update={"elements": (*elements, *notes)})
