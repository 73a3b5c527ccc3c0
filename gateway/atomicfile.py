"""Replacing a settings file the gateway reads, all or nothing, and telling whether it changed under an editor.

The console writes ``partners.yaml`` and a persona's ``persona.yaml`` and ``SOUL.md``.  A reader --
the gateway restarting, ``partners doctor``, an editor the teacher has open -- must see the old file
or the new one, never half of each, and a crash between the two must leave one of them.  So a write
goes to a temporary file in the same folder, is flushed to disk, and is renamed over the old file
(``os.replace`` is atomic on one filesystem); the folder is flushed after, so the rename itself survives
a power cut.  The new file keeps the old one's permission bits.

A page shows a file's :func:`version` (a hash of its bytes) and sends it back with the edit; an edit
whose version is no longer the file's is refused (the caller answers 409), so a change made by hand
or in another tab is never silently overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path


def version(data: bytes) -> str:
    """The version of a file's bytes: a hash, so any change -- even one that keeps its size and time -- shows."""
    return hashlib.sha256(data).hexdigest()[:32]


def version_of(path: Path) -> str:
    """The version of the file at ``path``; ``""`` for a file that is not there (yet)."""
    try:
        return version(path.read_bytes())
    except FileNotFoundError:
        return ""


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temp file, fsync, rename, fsync of the folder)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
