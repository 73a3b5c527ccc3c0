"""Reading a request body no larger than its endpoint allows.

The app's ``BodyLimit`` bounds every body at one size for all; an endpoint
with a smaller bound of its own (a learner's message, a teacher's notes) reads
through :func:`read_limited`, which stops as soon as the body is known to be
too large -- declared or streamed -- so an oversized body is never held whole.
"""

from __future__ import annotations

from starlette.requests import Request


async def read_limited(request: Request, limit: int) -> bytes | None:
    """The body, or None once it is known to be over ``limit`` bytes.

    A client that disconnects mid-body raises starlette's ``ClientDisconnect``, as ``request.body()`` does.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)
