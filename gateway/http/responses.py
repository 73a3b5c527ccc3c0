"""The one shape of every error body the gateway's HTTP port sends: ``{"error": "..."}``.

Its own module so the app's guards (hosts, stream shares) and the endpoints answer
alike without importing the app that mounts them.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A short JSON error: internal text never goes in ``message``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)
