"""The one way the gateway decodes a JSON request body: bounded in depth, one clear error when it is not JSON.

``json.loads`` recurses once per level of nesting, so a body of 1,000 ``[``
raises ``RecursionError`` -- not a ``ValueError`` -- and became a 500 (which
Telegram retries forever).  And a body that does decode a few hundred levels
deep still reaches code that walks it recursively (PTB's ``de_json``, pydantic).
So the depth is counted first, in one pass over the bytes without recursion,
and a body nested past :data:`MAX_DEPTH` is refused before it is parsed;
``RecursionError`` is still caught, as a last resort.

Every failure is :class:`~gateway.core.errors.InvalidEvent`, which the HTTP app
answers with a 400 and a one-line ``{"error": ...}`` body; a handler that
answers on its own catches it and uses ``str(error)``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.core.errors import InvalidEvent

MAX_DEPTH = 64
"""Levels of objects and arrays a body may nest.  A Telegram update, the deepest body any platform sends
us, nests about ten (a reply's quoted message's entities); the admin and web chat bodies one."""
_TOKENS = re.compile(rb'[\[\]{}"\\]')
"""The only bytes that matter to nesting: brackets, and the quotes and backslashes that say what is text."""


def too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``body``'s objects and arrays nest past ``limit``, told without parsing (and so without recursion).

    Brackets inside strings do not count; the scan stops at the first level past the limit.  A body
    with no more opening brackets than ``limit`` cannot nest past it and is not scanned at all."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    level, in_string, escaped_at = 0, False, -1
    for match in _TOKENS.finditer(body):
        at, token = match.start(), match.group()
        if at == escaped_at:
            continue
        if token == b'"':
            in_string = not in_string
        elif in_string:
            if token == b"\\":
                escaped_at = at + 1
        elif token in (b"[", b"{"):
            level += 1
            if level > limit:
                return True
        elif token in (b"]", b"}"):
            level -= 1
    return False


def decode_json(body: bytes, *, what: str = "the request body") -> Any:
    """The JSON value in ``body`` (UTF-8, as RFC 8259 requires on the wire); :class:`InvalidEvent`
    naming ``what`` when it is not JSON, not UTF-8, or nested too deeply."""
    if too_deep(body):
        raise InvalidEvent(f"{what} nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InvalidEvent(f"{what} is not UTF-8 (byte 0x{body[error.start]:02x} at offset {error.start})") from None
    except RecursionError:
        raise InvalidEvent(f"{what} nests too deeply to decode") from None
    except ValueError:
        raise InvalidEvent(f"{what} is not JSON") from None
