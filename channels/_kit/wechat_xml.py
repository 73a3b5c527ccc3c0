"""The flat XML WeChat and WeCom callbacks are written in, read safely and written back.

A callback body is one ``<xml>`` element whose children are the fields
(``<ToUserName><![CDATA[gh_123]]></ToUserName>``, ``<MsgId>1234</MsgId>``);
safe mode wraps the same document, encrypted, in ``<Encrypt>`` (X1, X2, W2).
:func:`read_fields` turns a body into ``{field: text}``; :func:`write_fields`
writes an answer the same way, every value in CDATA.

The body comes from the internet before anything is known of it, so it is
parsed with the standard library's expat and refused outright when it holds
any declaration -- a DOCTYPE, an ENTITY -- which is how entity-expansion and
external-entity attacks arrive; no WeChat callback carries one.  (The
``defusedxml`` package does the same more generally; it is not a dependency
here.)  A body that is not such a document is :class:`~gateway.errors.InvalidEvent`
(HTTP 400), never a traceback.

:func:`sealed` encrypts and signs an answer for a safe-mode callback, and
:func:`opened` is the platform's side of it, for the peers that play WeChat.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from datetime import UTC, datetime

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import verify_wechat_msg, wechat_signature
from gateway.core.errors import InvalidEvent

_DECLARATION = re.compile(rb"<!(?!\[CDATA\[)", re.IGNORECASE)
"""``<!`` opening anything but CDATA: DOCTYPE, ENTITY, ELEMENT, and comments (which WeChat never sends)."""
MAX_FIELDS = 64
"""No callback has nearly this many fields; more is refused as not a callback."""


def read_fields(body: bytes) -> dict[str, str]:
    """The fields of one flat ``<xml>`` document; :class:`InvalidEvent` for anything else."""
    if _DECLARATION.search(body):
        raise InvalidEvent("the XML carries a declaration (DOCTYPE or ENTITY); callbacks never do")
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as error:
        raise InvalidEvent(f"the body is not XML: {error}") from None
    if root.tag != "xml":
        raise InvalidEvent(f"the XML's root is <{root.tag[:30]}>, not <xml>")
    if len(root) > MAX_FIELDS:
        raise InvalidEvent(f"the XML has {len(root)} fields, more than any callback")
    return {child.tag: (child.text or "").strip() for child in root}


def _cdata(value: str) -> str:
    """``value`` in CDATA; a ``]]>`` inside it is split across two sections, as XML requires."""
    return "<![CDATA[" + value.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def write_fields(fields: Mapping[str, str | int]) -> bytes:
    """One ``<xml>`` document: text values in CDATA, integers bare (``CreateTime``, ``TimeStamp``)."""
    parts = []
    for name, value in fields.items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ValueError(f"{name!r} is not a field name")
        parts.append(f"<{name}>{value if isinstance(value, int) else _cdata(value)}</{name}>")
    return ("<xml>" + "".join(parts) + "</xml>").encode()


def sealed(document: bytes, crypto: WechatCrypto, token: str, *, timestamp: str, nonce: str) -> bytes:
    """An answer for a safe-mode callback (X2, W2): ``document`` encrypted into ``<Encrypt>``, with the
    ``MsgSignature`` over the sorted token, timestamp, nonce and ciphertext the platform checks."""
    encrypted = crypto.encrypt(document)
    return write_fields({"Encrypt": encrypted, "MsgSignature": wechat_signature(token, timestamp, nonce, encrypted),
                         "TimeStamp": int(timestamp), "Nonce": nonce})


def opened(body: bytes, crypto: WechatCrypto, token: str) -> dict[str, str]:
    """The fields inside a sealed answer, once its ``MsgSignature`` verifies (the platform's side, for peers)."""
    outer = read_fields(body)
    query = {"msg_signature": outer.get("MsgSignature", ""), "timestamp": outer.get("TimeStamp", ""),
             "nonce": outer.get("Nonce", "")}
    verify_wechat_msg(query, token, outer.get("Encrypt", ""))
    return read_fields(crypto.decrypt(outer.get("Encrypt", "")))


def required(fields: Mapping[str, str], name: str, *, source: str) -> str:
    """``fields[name]``, or :class:`InvalidEvent` naming ``source`` ("weixin callback") and the field."""
    value = fields.get(name, "")
    if not value:
        raise InvalidEvent(f"{source} without {name}")
    return value


def created_at(stamp: str, *, platform: str) -> datetime:
    """A message's ``CreateTime`` (seconds since the epoch) as a UTC time; a value that is none is an InvalidEvent."""
    try:
        return datetime.fromtimestamp(int(stamp), UTC)
    except (ValueError, OverflowError, OSError):
        raise InvalidEvent(f"{platform} CreateTime {stamp[:20]!r} is not a timestamp") from None
