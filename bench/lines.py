"""Hand-written source lines per channel, the kit and the rest: the size a new channel costs.

Three counts per package, tests and peers excluded (they live under ``tests/``):

- ``raw``: every line of its ``.py`` files;
- ``non-blank``: without empty lines;
- ``code``: without blank lines, comments and docstrings -- what ``cloc`` would call code,
  less the docstrings, which this project writes at length on purpose.

Usage: ``python bench/lines.py`` (from the repository root).  Prints a table; nothing is timed.
"""

from __future__ import annotations

import argparse
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Count:
    raw: int
    non_blank: int
    code: int

    def __add__(self, other: Count) -> Count:
        return Count(self.raw + other.raw, self.non_blank + other.non_blank, self.code + other.code)


def count_source(source: str) -> Count:
    """The three counts of one module's text."""
    lines = source.splitlines()
    prose: set[int] = set()
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].lstrip().startswith("#"):
            prose.add(token.start[0])  # a comment line; a trailing comment leaves its line code
        elif token.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT,
                                                            tokenize.DEDENT):
            prose.update(range(token.start[0], token.end[0] + 1))  # a string standing alone: a docstring
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    non_blank = [number for number, line in enumerate(lines, 1) if line.strip()]
    code = [number for number in non_blank if number not in prose]
    return Count(len(lines), len(non_blank), len(code))


def count_package(path: Path) -> Count:
    total = Count(0, 0, 0)
    for module in sorted(path.rglob("*.py")):
        total += count_source(module.read_text(encoding="utf-8"))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    rows = [(f"channels/{p.name}", count_package(p)) for p in sorted((ROOT / "channels").iterdir())
            if p.is_dir() and not p.name.startswith("__")]
    rows += [(name, count_package(ROOT / name)) for name in ("gateway", "brain", "personas")]
    width = max(len(name) for name, _ in rows)
    print(f"{'package':<{width}}  {'raw':>6}  {'non-blank':>9}  {'code':>6}")
    for name, count in rows:
        print(f"{name:<{width}}  {count.raw:>6}  {count.non_blank:>9}  {count.code:>6}")


if __name__ == "__main__":
    main()
