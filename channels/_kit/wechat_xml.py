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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping

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
