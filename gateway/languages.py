"""The learner's language from what a platform sends: ``Accept-Language`` and ``Content-Language`` values.

Browsers send ``Accept-Language`` (RFC 9110 section 12.5.4) on every request, a comma list of language
ranges with optional weights: ``zh-CN,zh;q=0.9,en;q=0.8``.  Mail may carry ``Content-Language``
(RFC 3282), a comma list of the tags the body is written in, no weights.  The gateway needs one tag
for ``Sender.locale``, so :func:`preferred_language` reads either into the tag the sender weighs
highest: the first among equals, ``*`` and ``q=0`` ranges never, anything that is not a language tag
skipped rather than guessed at.  The standard library has no reader for these headers; this one is
as small as the grammar.
"""

from __future__ import annotations

import re

_TAG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")
"""RFC 4647's language-range without the wildcard: alphanumeric subtags of up to eight characters."""
_WEIGHT = re.compile(r"q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)", re.IGNORECASE)
MAX_HEADER_CHARS = 1000
"""Longer than any browser's list; a longer value is cut before it is read (it costs nothing to refuse)."""


def preferred_language(header: str | None) -> str:
    """The language tag ``header`` weighs highest, or ``""`` when it names none."""
    best, best_weight = "", 0.0
    for item in (header or "")[:MAX_HEADER_CHARS].split(","):
        tag, _, params = item.partition(";")
        tag = tag.strip()
        if not _TAG.fullmatch(tag):
            continue
        weight = 1.0
        if params.strip():
            found = _WEIGHT.fullmatch(params.strip().replace(" ", ""))
            if found is None:
                continue  # a malformed weight: the range is not read rather than read at full weight
            weight = float(found.group(1))
        if weight > best_weight:
            best, best_weight = tag, weight
    return best
