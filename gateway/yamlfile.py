"""The one way the project reads a YAML file: safe, alias-free, shallow, UTF-8, one clear line when it is not.

Every YAML file the gateway reads -- ``partners.yaml``, a persona's
``persona.yaml``, a knowledge base's ``knowledge.yaml`` -- comes through
:func:`read_yaml`, so every one is held to the same rules:

- **No aliases.**  ``*name`` makes YAML share a node, so a 746-byte file of
  nested aliases expands into millions of paths for whatever walks the result
  (the ``env:NAME`` scan walked them for minutes).  A config file gains nothing
  from them that writing the value out does not give, so the composer refuses
  the first one with its line.  Anchors (``&name``) alone are harmless and kept.
- **Shallow.**  The composer recurses once per level; past :data:`MAX_DEPTH`
  levels it stops with the line, before Python's own recursion limit would
  (a ``RecursionError`` is still caught, as a last resort, for the same line).
- **UTF-8.**  The bytes are decoded before YAML sees them, so a file saved in
  another encoding is named with the line of its first bad byte.

Each problem is a :class:`~gateway.core.errors.ConfigError` naming the file, the
line and the fix, the shape ``partners doctor`` and ``serve`` print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import Node

from gateway.core.errors import ConfigError

MAX_DEPTH = 64
"""Nesting levels a YAML file may hold.  The deepest real setting (a partner's model's backup) sits
about six levels down; 64 leaves room for any hand-written file and stays far below the recursion
limit of the composer and of every walk over the result."""
SYNTAX_FIX = "check indentation and quoting on that line; YAML indents with spaces, not tabs"
ALIAS_FIX = "write the value out in full where it is used (copy it instead of *referring to it)"
DEPTH_FIX = f"a settings file needs only a few levels; keep it under {MAX_DEPTH} levels of nesting"
ENCODING_FIX = "save the file as UTF-8 (any editor's 'Save with encoding' does it)"


class _Refused(ComposerError):
    """A node the project's files may not hold; ``problem`` says which and ``problem_mark`` where."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with aliases refused and nesting bounded while nodes are composed."""

    file_name = "this file"

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(None, None, f"YAML aliases (*{event.anchor}) are not allowed in {self.file_name}",
                           event.start_mark)
        if self._depth >= MAX_DEPTH:
            raise _Refused(None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _line(error: yaml.YAMLError) -> str | None:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return f"line {mark.line + 1}" if mark is not None else None


def decode_utf8(data: bytes, path: Path) -> str:
    """The text of a file the project reads, or a :class:`ConfigError` naming the line of its first non-UTF-8 byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[error.start]:02x} cannot be read as UTF-8", file=str(path),
            field=f"line {line}", fix=ENCODING_FIX,
        ) from None


def parse_yaml(text: str, path: Path, *, fix: str = SYNTAX_FIX) -> Any:
    """The settings in ``text`` (read from ``path``), or a :class:`ConfigError` naming its line.

    ``fix`` is the advice for a syntax error (a file written by a command may want its own)."""
    loader = _Loader(text)
    loader.file_name = path.name
    try:
        return loader.get_single_data()
    except _Refused as error:
        raise ConfigError(str(error.problem), file=str(path), field=_line(error),
                          fix=ALIAS_FIX if "alias" in str(error.problem) else DEPTH_FIX) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"not valid YAML: {getattr(error, 'problem', None) or error}", file=str(path),
                          field=_line(error), fix=fix) from None
    except RecursionError:
        raise ConfigError("nested too deeply to read", file=str(path), fix=DEPTH_FIX) from None
    finally:
        loader.dispose()


def read_yaml(path: Path, *, fix: str = SYNTAX_FIX) -> Any:
    """Read and parse one YAML file by the rules above; a missing file raises ``FileNotFoundError``."""
    return parse_yaml(decode_utf8(path.read_bytes(), path), path, fix=fix)
