"""The gateway's one HTTP port: health, status, metrics, webhooks and channel pages.

``gateway.http.app.build_app`` builds the ASGI app; ``gateway.http.server.serve_http``
runs it with uvicorn.  This package imports nothing at import time -- Starlette and
uvicorn load only when a gateway actually serves HTTP, so ``partners --help`` stays fast.
"""
