"""Raise the process's soft open-files limit at start-up, once.

Every connection the HTTP server holds is a file descriptor, beside the
database, the channels' sockets and the model library's.  Many systems start
a process with a soft RLIMIT_NOFILE of 1024 (or less) under a hard limit a
thousand times higher; at the soft limit ``accept`` fails, asyncio logs an
error per attempt and every new connection -- ``/healthz`` and the platforms'
long polls included -- is refused.  Any process may raise its soft limit up to
the hard one, so ``serve`` does: to the hard limit, or to
:data:`UNLIMITED_CAP` where the hard limit is "unlimited" (which some kernels
refuse as a soft value).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

UNLIMITED_CAP = 65536
RESERVED_FILES = 256
"""Descriptors kept for everything but HTTP connections: the database, channels, the model library, logs."""


def raise_open_files_limit(max_connections: int) -> int | None:
    """Raise the soft RLIMIT_NOFILE as far as allowed; return it (None where the platform has none).

    Logs one line with the outcome, and a warning when ``max_connections`` cannot be reached
    before descriptors run out (the cap would then never answer its 503).
    """
    try:
        import resource
    except ImportError:  # Windows: no rlimits; the C runtime's limit is not ours to change
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            log.warning("open files limit not raised soft=%d hard=%s reason=%s", soft, _shown(hard), error)
        else:
            log.info("open files limit raised soft=%d->%d hard=%s", soft, target, _shown(hard))
            soft = target
    else:
        log.info("open files limit soft=%s hard=%s", _shown(soft), _shown(hard))
    if soft != resource.RLIM_INFINITY and soft < max_connections + RESERVED_FILES:
        log.warning("open files limit %d is below http.max_connections=%d plus %d for the rest: "
                    "raise the hard limit (systemd LimitNOFILE=, docker --ulimit nofile=) or lower max_connections",
                    soft, max_connections, RESERVED_FILES)
    return None if soft == resource.RLIM_INFINITY else soft


def _shown(limit: int) -> str:
    import resource

    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
