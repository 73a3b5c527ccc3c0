"""Writing a persona's ``persona.yaml`` and ``SOUL.md`` from the console, checked as the loader checks them.

A persona folder is found by name, the user's folder (``personas/`` beside the config file) before
the shipped ones (:func:`personas.loader.find_persona`).  An edit is always written to the user's
folder: a shipped persona is first copied there whole (its notes too), so the packaged files stay
as released and the copy wins from then on -- the loader's own override rule.  Before anything is
written the two texts go through :func:`personas.loader.check_persona`, the loader's own steps, so
the console shows the exact error the files would get and never writes a persona that does not
load.  Each file is replaced atomically; the version (a hash of both files) carried in the form
refuses an edit made on a stale page.  The loader's cache notices the new files by their size and
time, so the next turn speaks with the edit, no restart.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from gateway.atomicfile import version, write_atomic
from gateway.configedit import NoConfigFile, StaleFile, unwritable
from gateway.core.config import Config
from gateway.core.errors import ConfigError


@dataclass(frozen=True)
class PersonaFiles:
    name: str
    folder: Path
    """Where the files are read from now (a shipped folder until the first edit)."""
    target: Path
    """Where an edit is written: the user's folder."""
    spec: str
    soul: str
    version: str


class PersonaEditor:
    """Reads and writes the personas of one config's search path; edits are serialised by one lock."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = asyncio.Lock()

    def files(self, name: str) -> PersonaFiles:
        """The persona's two files; ConfigError for a name that is no persona."""
        from personas.loader import NAME_PATTERN, SOUL_FILE, SPEC_FILE, find_persona, persona_dirs

        if not NAME_PATTERN.match(name):  # find_persona would take `.x` or `~` as a path: the console edits names only
            raise ConfigError(f"{name!r} is not a persona name", field="persona")
        folder = find_persona(name, persona_dirs(self.config))
        spec, soul = _read(folder / SPEC_FILE), _read(folder / SOUL_FILE)
        target = persona_dirs(self.config)[0] / name
        return PersonaFiles(name, folder, target, spec.decode("utf-8", "replace"), soul.decode("utf-8", "replace"),
                            version(spec + b"\0" + soul))

    async def save(self, name: str, spec: str, soul: str, expected_version: str) -> PersonaFiles:
        """Check and write both files; StaleFile, NoConfigFile or the loader's ConfigError otherwise."""
        from personas.loader import SOUL_FILE, SPEC_FILE, check_persona

        if self.config.source is None:
            raise NoConfigFile("this gateway runs on its embedded default config; start it with --config FILE to edit personas")
        async with self._lock:
            current = self.files(name)
            if current.version != expected_version:
                raise StaleFile("the persona's files changed since this page was loaded; reload it and make the change again")
            copied = current.folder != current.target
            try:
                if copied:  # a shipped persona: its copy in the user's folder is what gets edited
                    shutil.copytree(current.folder, current.target, ignore=shutil.ignore_patterns("__pycache__"))
                check_persona(current.target, spec, soul, secrets=self.config.secrets)
                write_atomic(current.target / SPEC_FILE, spec.encode("utf-8"))
                write_atomic(current.target / SOUL_FILE, soul.encode("utf-8"))
            except (ConfigError, OSError) as error:
                if copied:
                    shutil.rmtree(current.target, ignore_errors=True)
                if isinstance(error, OSError):
                    raise unwritable(current.target, error) from None
                raise
            return self.files(name)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
