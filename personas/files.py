"""What a persona folder may hand the partner: its own files, of a sensible size.

A persona folder is often downloaded or shared, and everything in it goes
into prompts (``SOUL.md``) and search results (the notes).  So a path is
judged by where it really leads: a symbolic link whose target lies outside
the persona folder is refused -- with one line naming the link -- since it
would put any file the gateway can read (``/etc/passwd``, another partner's
secrets) in front of the model and the learner.  A link that stays inside the
folder is fine.

Sizes are capped for the same reason: the soul is sent with every model
request and stored again with every turn, and a note is indexed whole.  A
file over its cap is refused when the persona loads (``partners doctor``,
``serve``), never silently cut.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core.errors import ConfigError
from gateway.yamlfile import decode_utf8

MAX_SOUL_BYTES = 32 * 1024
"""``SOUL.md`` is the heart of the system prompt, sent with every request and stored with every turn:
32 KiB is about 8,000 tokens, ten times a shipped soul and already most of a small model's context."""
MAX_NOTE_BYTES = 1024 * 1024
"""One study note is read and indexed whole; a long chapter in Markdown is a few hundred KB.  Larger
material (books, PDFs) belongs in the partner's knowledge base (``partners kb add``), which cuts it up."""
NOTE_SUFFIXES = (".md", ".markdown", ".txt")
LINK_FIX = "copy the file into the persona folder instead of linking to it, or remove the link"


def _size(count: int) -> str:
    """``32 KiB`` for a round limit, ``18.6 MiB`` for a big file, else exact bytes (a file just over stays visibly over)."""
    for unit, step in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count % step == 0:
            return f"{count // step} {unit}"
    return f"{count / 2**20:.1f} MiB" if count >= 10 * 2**20 else f"{count:,} bytes"


def escape(folder: Path, path: Path) -> Path | None:
    """Where ``path`` really leads when that is outside ``folder``; None when it stays inside."""
    real = path.resolve()
    return None if real.is_relative_to(folder.resolve()) else real


def confined(folder: Path, path: Path) -> Path:
    """``path`` itself, or a :class:`ConfigError` naming it when it leads outside ``folder``."""
    target = escape(folder, path)
    if target is not None:
        raise ConfigError(f"is a link to {target}, outside the persona folder {folder}", file=str(path), fix=LINK_FIX)
    return path


def too_large(path: Path, size: int, limit: int, fix: str) -> ConfigError:
    return ConfigError(f"is {_size(size)}; the limit is {_size(limit)}", file=str(path), fix=fix)


def read_capped(folder: Path, path: Path, limit: int, fix: str) -> str:
    """The text of a file of the persona folder, refused (never cut) when it is larger than ``limit`` bytes."""
    with confined(folder, path).open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise too_large(path, path.stat().st_size, limit, fix)
    return decode_utf8(data, path)


@dataclass
class NoteFiles:
    """The note files of a persona's knowledge sources, and why any other candidate was refused."""

    files: list[tuple[str, Path]] = field(default_factory=list)
    """(path relative to the persona folder, path), sorted by the relative path."""
    refused: list[ConfigError] = field(default_factory=list)


def _walk(folder: Path, source: Path, refused: list[ConfigError]) -> Iterator[Path]:
    """Every file under ``source``, following links only while they stay inside ``folder`` (each real folder once)."""
    pending, seen = [source], set()
    while pending:
        current = pending.pop()
        real = current.resolve()
        if real in seen:
            continue
        seen.add(real)
        for entry in sorted(current.iterdir()):
            target = escape(folder, entry)
            if target is not None:
                if entry.is_dir() or entry.suffix.lower() in NOTE_SUFFIXES:
                    refused.append(ConfigError(f"is a link to {target}, outside the persona folder {folder}",
                                               file=str(entry), fix=LINK_FIX))
            elif entry.is_dir():
                pending.append(entry)
            else:
                yield entry


def note_files(folder: Path, sources: Sequence[Path]) -> NoteFiles:
    """The notes under ``sources`` (files or folders inside ``folder``), each confined and under its cap."""
    found = NoteFiles()
    paths: dict[str, Path] = {}
    for source in sources:
        target = escape(folder, source)
        if target is not None:
            found.refused.append(ConfigError(f"is a link to {target}, outside the persona folder {folder}",
                                             file=str(source), fix=LINK_FIX))
            continue
        for path in _walk(folder, source, found.refused) if source.is_dir() else [source]:
            if path.suffix.lower() not in NOTE_SUFFIXES or not path.is_file():
                continue
            size = path.stat().st_size
            if size > MAX_NOTE_BYTES:
                found.refused.append(too_large(path, size, MAX_NOTE_BYTES, "split it into several notes, or add it "
                                               "to the partner's knowledge base with `partners kb add`"))
                continue
            paths.setdefault(path.relative_to(folder).as_posix(), path)
    found.files = sorted(paths.items())
    return found
