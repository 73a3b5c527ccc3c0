"""One callback from WeCom to a self-built app: is it WeCom's, is it fresh, and what does it say.

WeCom posts every callback encrypted (W2): the XML holds ``<Encrypt>``, and
``msg_signature`` in the query is SHA-1 over the sorted Token, ``timestamp``,
``nonce`` and that ciphertext.  The message inside names the company's corpid
as its receive id, so a callback for another company's app does not open.
There is no plaintext mode to fall back to, so a body without ``<Encrypt>`` is
refused as forged, never read.

A signature that does not match, a missing one, or a ``timestamp`` further from
now than ``signature_window_s`` (platforms.toml) is the kit's
:class:`~gateway.errors.ForgedRequest`: 401, nothing stored.  Verification
comes first, so an unsigned body is never parsed beyond finding its
``<Encrypt>``.  The GET WeCom sends when the admin saves the API receive
settings carries an encrypted ``echostr``; :meth:`AppCallbacks.echo` answers
its plaintext (the kit's :func:`~channels._kit.challenges.wecom_echostr`).

The event id of a text message is its ``MsgId``, which WeCom repeats on each of
its three retries, so every copy lands on one dedup key and is answered once.
The conversation is the member's UserId (``FromUserName``), which is also the
``touser`` the answer goes to.

An image (``PicUrl`` and ``MediaId``), a voice message (``MediaId`` and its
``Format``, AMR) or a video (``MediaId``) is decoded as a :class:`Media` whose
locator is the ``MediaId``: nothing is downloaded before the ack (ADR 0026);
the pipeline fetches it afterwards through ``cgi-bin/media/get``, within the
three days WeCom keeps it.  ``PicUrl`` is not fetched: ``media/get`` serves the
same picture under the app's token with its type and name.  WeCom hands a
self-built app no other file messages.  Other message types (location, link)
and events are acknowledged and recorded as refused, so WeCom stops retrying
them.
"""

from __future__ import annotations

from collections.abc import Mapping

from channels._kit.challenges import wecom_echostr
from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import verify_wechat_msg
from channels._kit.wechat_xml import created_at, read_fields, required
from channels.wecom.config import AppMode
from gateway.core.errors import ForgedRequest, InvalidEvent
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
    MediaKind,
    MediaRef,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("wecom")
MEDIA: dict[str, MediaKind] = {"image": "image", "voice": "audio", "video": "video"}
"""The callback types that carry a learner's file, as the media kind each one is."""


class Skipped(Exception):
    """A callback that is nothing to answer (an image, a menu click): answered, recorded as refused."""


class AppCallbacks:
    """One app's Token and EncodingAESKey, applied to each request."""

    def __init__(self, mode: AppMode, window_s: float | None) -> None:
        self.window_s = window_s
        self.token = mode.token.get_secret_value()
        self.crypto = WechatCrypto(mode.encoding_aes_key.get_secret_value(), mode.corpid)

    def echo(self, query: Mapping[str, str]) -> str:
        """The plaintext of the GET check's encrypted ``echostr``, once ``msg_signature`` verifies."""
        return wecom_echostr(query, self.token, self.crypto)

    def read(self, query: Mapping[str, str], body: bytes) -> dict[str, str]:
        """The decrypted callback's fields; ``ForgedRequest`` unless it is WeCom's, fresh, and for this company."""
        encrypted = read_fields(body).get("Encrypt")
        if not encrypted:
            raise ForgedRequest("the callback is not encrypted", reason="malformed")
        verify_wechat_msg(query, self.token, encrypted, window_s=self.window_s)
        return read_fields(self.crypto.decrypt(encrypted))


def _field(fields: Mapping[str, str], name: str) -> str:
    return required(fields, name, source="wecom app callback")


def decode(fields: Mapping[str, str], *, account: AccountId) -> InboundMessage:
    """One text message or one file; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    kind = _field(fields, "MsgType")
    member, stamp = _field(fields, "FromUserName"), _field(fields, "CreateTime")
    received = created_at(stamp, platform="wecom")
    if kind != "text" and kind not in MEDIA:
        raise Skipped(f"{kind[:30]} {fields.get('Event', '')[:30]}".strip())
    event_id = _field(fields, "MsgId")
    elements = (_text(fields, event_id),) if kind == "text" else (_media(fields, kind),)
    return InboundMessage(
        event_id=EventId(event_id),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(member), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(member)),
        elements=elements,
        referrer=Referrer(message=MessageId(event_id)),
        received_at=received,
        addressed=True,
    )


def _text(fields: Mapping[str, str], event_id: str) -> Element:
    said = fields.get("Content", "")
    if not said.strip():
        raise InvalidEvent(f"wecom text message {event_id} has no Content")
    return Text(text=said)


def _media(fields: Mapping[str, str], kind: str) -> Element:
    """The file as a reference to fetch after the ack: its ``MediaId``, and the voice's declared format."""
    media_id = _field(fields, "MediaId")
    voice_format = fields.get("Format", "").strip().lower()[:10] if kind == "voice" else ""
    declared = f"audio/{voice_format}" if voice_format.isalnum() else ""
    name = f"voice.{voice_format}" if declared else ""
    return Media.inbound(MEDIA[kind], MediaRef(locator=media_id, mime_type=declared, name=name))
