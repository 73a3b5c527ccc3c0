"""One HTTP/1.1 request with the request target sent byte for byte.

httpx (like browsers) normalizes a URL before sending it -- ``/a/../b`` goes
out as ``/b`` -- which would hide exactly what a path-traversal probe sends.
An attacker's client does not normalize, so neither does this.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict

from tests.waits import HTTP_S


class RawResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: int
    body: bytes


async def raw_request(host: str, port: int, method: str, target: str, *, headers: dict[str, str] | None = None,
                      body: bytes = b"") -> RawResponse:
    """Send ``method target`` as given; a server that drops the connection unanswered reads as status 0."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), HTTP_S)
    try:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
                 f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        writer.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), HTTP_S)
    finally:
        writer.close()
    head, _, content = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split(b" ")
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
    return RawResponse(status=status, body=content)
