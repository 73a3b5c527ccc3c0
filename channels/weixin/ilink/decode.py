"""One ``getupdates`` message -> InboundMessage: the learner's text, its id, and the context token a reply needs.

A message in ``msgs`` names its sender (``from_user_id``), the platform's id
for it (``message_id``), when it was made (``create_time_ms``), the parts it
has (``item_list``: ``type`` 1 text, 2 image, 3 voice, 4 file, 5 video) and
the ``context_token`` every reply to it must carry.  That token rides in the
referrer with its end (``received + reply_window_s`` from platforms.toml), so
the outbound path refuses a late reply with a reason instead of a platform
error.  The bot's own messages (``message_type`` 2) come back too and are
marked ``from_self``.  Voice arrives with the platform's transcript
(``voice_item.text``) where it made one, which is read as the learner's words;
a voice message without one is the recording itself, an ``audio`` element
(its ``encode_type`` names the codec: WeChat records SILK, type 6).
Images, files and recordings are announced as :class:`MediaRef` values naming
their CDN place and key (:mod:`channels.weixin.ilink.media`), fetched after the ack.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from channels.weixin.ilink.media import locator
from gateway.core.errors import InvalidEvent
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Element,
    EventId,
    InboundMessage,
    Media,
    MediaRef,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("weixin")
TEXT, IMAGE, VOICE, FILE, VIDEO = 1, 2, 3, 4, 5
BOT = 2
VOICE_CODECS = {1: ("audio/L16", "pcm"), 2: ("audio/adpcm", "adpcm"), 4: ("audio/speex", "spx"), 5: ("audio/amr", "amr"),
                6: ("audio/silk", "silk"), 7: ("audio/mpeg", "mp3"), 8: ("audio/ogg", "ogg")}
"""``voice_item.encode_type`` -> (MIME type, file extension) of the recording; an unnamed codec is SILK, WeChat's own."""
UNSHOWN = {str(IMAGE): "an image", str(VOICE): "a voice message", str(FILE): "a file", str(VIDEO): "a video"}


class Skipped(Exception):
    """A message with nothing this release reads (media only): recorded as refused, and the cursor moves on."""


def _media(item: dict[str, Any], field: str) -> tuple[str, str] | None:
    """``(encrypt_query_param, key)`` of an item's CDN file, or None when it names none."""
    part = item.get(field) or {}
    media = part.get("media") or {} if isinstance(part, dict) else {}
    param, key = media.get("encrypt_query_param"), part.get("aeskey") or media.get("aes_key")
    if isinstance(param, str) and param and isinstance(key, str) and key:
        return param, key
    return None


def _elements(items: Any) -> tuple[Element, ...]:
    """The learner's words (a voice message's transcript among them) and the files (recordings too) the CDN holds."""
    if not isinstance(items, list):
        return ()
    found: list[Element] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == TEXT and isinstance(text := (item.get("text_item") or {}).get("text"), str) and text.strip():
            found.append(Text(text=text))
        elif kind == VOICE and isinstance(text := (item.get("voice_item") or {}).get("text"), str) and text.strip():
            found.append(Text(text=text))
        elif kind == VOICE and (cdn := _media(item, "voice_item")) is not None:
            codec = (item.get("voice_item") or {}).get("encode_type")
            mime, extension = VOICE_CODECS.get(codec if isinstance(codec, int) else 6, VOICE_CODECS[6])
            found.append(Media(kind="audio", ref=MediaRef(locator=locator(*cdn), mime_type=mime, name=f"voice.{extension}")))
        elif kind == IMAGE and (cdn := _media(item, "image_item")) is not None:
            found.append(Media(kind="image", ref=MediaRef(locator=locator(*cdn), mime_type="image/jpeg")))
        elif kind == FILE and (cdn := _media(item, "file_item")) is not None:
            file = item.get("file_item") or {}
            size = file.get("len")
            found.append(Media(kind="file", ref=MediaRef(
                locator=locator(*cdn), name=str(file.get("file_name") or ""),
                size=int(size) if isinstance(size, (int, str)) and str(size).isdigit() else None)))
    return tuple(found)


def decode(raw: Any, *, account: AccountId, window_s: float | None) -> InboundMessage:
    """The message in ``raw``; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    if not isinstance(raw, dict):
        raise InvalidEvent(f"weixin ilink message is not an object: {str(raw)[:100]}")
    ident, learner = raw.get("message_id"), raw.get("from_user_id")
    if not isinstance(ident, (int, str)) or str(ident) == "" or not isinstance(learner, str) or not learner:
        raise InvalidEvent("weixin ilink message without message_id or from_user_id")
    stamp = raw.get("create_time_ms")
    try:
        received = datetime.fromtimestamp(int(stamp) / 1000, UTC) if stamp is not None else datetime.now(UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        raise InvalidEvent(f"weixin ilink create_time_ms {str(stamp)[:20]!r} is not a time") from None
    elements = _elements(raw.get("item_list"))
    if not elements:
        kinds = {str(i.get("type")) for i in raw.get("item_list") or [] if isinstance(i, dict)}
        raise Skipped(", ".join(UNSHOWN.get(k, f"item type {k}") for k in sorted(kinds)) or "an empty message")
    token = raw.get("context_token")
    event = EventId(str(ident))
    return InboundMessage(
        event_id=event,
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(learner), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(learner)),
        elements=elements,
        referrer=Referrer(message=MessageId(str(ident)), token=token if isinstance(token, str) and token else None,
                          expires_at=received + timedelta(seconds=window_s) if window_s is not None else None),
        received_at=received,
        addressed=True,
        from_self=raw.get("message_type") == BOT,
    )
