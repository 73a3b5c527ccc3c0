"""Cutting one oversized paragraph, heading or code block into pieces that fit.

A paragraph is flattened into *runs* -- text with the stack of wrappers
(bold, link, code...) around it -- so a cut is an offset into its visible
text.  Each piece is rebuilt into a proper inline tree, wrappers cut by the
piece closed at its end and reopened in the next, then rendered and measured
whole: the renderer, not this module, knows what the markup costs.

Where to cut, in order: outside links first, then (a link longer than a part)
inside them; a line break, else a space, if it keeps at least half of what a
cut anywhere could fit -- so one long token does not leave a nearly empty
part; else a grapheme cluster boundary; and only for a single cluster longer
than a part, any code point.  Whitespace at a cut is dropped, except inside
code, where a line's indentation stays with it.  Longer pieces render longer,
so the longest fitting piece is found by bisection.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, count

from gateway.render.graphemes import boundary_at_or_before
from gateway.render.markdown import (
    Block,
    Code,
    CodeBlock,
    Emphasis,
    Image,
    Inline,
    LineBreak,
    Link,
    Math,
    Strike,
    Strong,
    Text,
)

_BREAK_SPACE = re.compile(r"[^\S\u00a0\u2007\u202f]+")  # whitespace a line may wrap at (not no-break spaces)
_NEWLINE = re.compile("\n")
_ATOM = "\ufffc"  # stands for an image or an empty link in the text being cut: one indivisible character


@dataclass(frozen=True, slots=True)
class Budget:
    """Room for pieces: ``fits`` renders one inside its wrappers; no piece fitting has over ``max_chars``.

    ``first`` (when set) is the tighter test for the first piece, which shares
    a part with what came before it.  ``fill_levels`` is how many more levels
    of nesting may try that at all (see ``gateway.render.split``).
    """

    fits: Callable[[Block], bool]
    max_chars: int
    fill_levels: int = 0
    first: Callable[[Block], bool] | None = None

    def fits_piece(self, block: Block, index: int) -> bool:
        return (self.first or self.fits)(block) if index == 0 else self.fits(block)

    def within(
        self, fits: Callable[[Block], bool], first: Callable[[Block], bool] | None = None, levels: int = 1
    ) -> Budget:
        return Budget(fits, self.max_chars, max(self.fill_levels - levels, 0), first)


@dataclass(frozen=True, slots=True)
class _Mark:
    """A wrapper around a run of text; links carry their target and which link they are."""

    node: type
    url: str = ""
    span: int = 0


@dataclass(frozen=True, slots=True)
class _Run:
    """Visible text under its wrappers; an ``atom`` (break, image) is one character that is never divided."""

    text: str
    marks: tuple[_Mark, ...]
    atom: Inline | None = None


def _runs(nodes: tuple[Inline, ...], marks: tuple[_Mark, ...], spans: count[int]) -> list[_Run]:
    out: list[_Run] = []
    for node in nodes:
        if isinstance(node, Text) and node.text:
            out.append(_Run(node.text, marks))
        elif isinstance(node, Code) and node.text:
            out.append(_Run(node.text, marks + (_Mark(type(node)),)))
        elif isinstance(node, LineBreak):
            out.append(_Run("\n", marks, node))
        elif isinstance(node, Image) or (isinstance(node, Link) and not node.children):
            out.append(_Run(_ATOM, marks, node))
        elif isinstance(node, Link):
            out.extend(_runs(node.children, marks + (_Mark(Link, node.url, next(spans)),), spans))
        elif isinstance(node, (Strong, Emphasis, Strike)):
            out.extend(_runs(node.children, marks + (_Mark(type(node)),), spans))
    return out


def _build(runs: Sequence[_Run], depth: int = 0) -> tuple[Inline, ...]:
    """Inverse of :func:`_runs` for a slice: wrappers cut by the slice are closed and reopened."""
    out: list[Inline] = []
    i = 0
    while i < len(runs):
        run = runs[i]
        if len(run.marks) == depth:
            out.append(run.atom or Text(run.text))
            i += 1
            continue
        mark, j = run.marks[depth], i
        while j < len(runs) and len(runs[j].marks) > depth and runs[j].marks[depth] == mark:
            j += 1
        if mark.node is Code or mark.node is Math:
            out.append(mark.node("".join(r.text for r in runs[i:j])))
        elif mark.node is Link:
            out.append(Link(mark.url, _build(runs[i:j], depth + 1)))
        else:
            out.append(mark.node(_build(runs[i:j], depth + 1)))
        i = j
    return tuple(out)


class _Text:
    """A paragraph's runs with their joined visible text, sliceable by offset."""

    def __init__(self, inlines: tuple[Inline, ...]) -> None:
        self.runs = _runs(inlines, (), count())
        self.starts = list(accumulate((len(run.text) for run in self.runs), initial=0))[:-1]
        self.text = "".join(run.text for run in self.runs)
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for run, start in zip(self.runs, self.starts, strict=True):
            for mark in run.marks:
                if mark.node is Link:
                    first.setdefault(mark.span, start)
                    last[mark.span] = start + len(run.text)
        self.links = sorted((first[span], last[span]) for span in first)

    def slice(self, a: int, b: int) -> tuple[Inline, ...]:
        out: list[_Run] = []
        i = max(bisect_right(self.starts, a) - 1, 0)
        while i < len(self.runs) and self.starts[i] < b:
            run, start = self.runs[i], self.starts[i]
            lo, hi = max(a, start) - start, min(b, start + len(run.text)) - start
            if hi > lo:
                out.append(run if hi - lo == len(run.text) else _Run(run.text[lo:hi], run.marks, run.atom))
            i += 1
        return _build(out)

    def link_start(self, offset: int) -> int:
        """``offset``, or the start of the link it falls strictly inside."""
        i = bisect_right(self.links, (offset, len(self.text) + 1)) - 1
        if i >= 0 and self.links[i][0] < offset < self.links[i][1]:
            return self.links[i][0]
        return offset


def split_inlines(
    inlines: tuple[Inline, ...], make: Callable[[tuple[Inline, ...]], Block], budget: Budget
) -> list[Block] | None:
    source = _Text(inlines)
    text, pieces = source.text, list[Block]()
    pos = _skip_space(text, 0)
    while pos < len(text):
        end = _trim_space(text, pos, len(text))
        if end - pos <= budget.max_chars:
            whole = make(source.slice(pos, end))
            if budget.fits_piece(whole, len(pieces)):
                pieces.append(whole)
                break

        def fits(head_end: int, pos: int = pos) -> bool:  # called only while this piece is cut: bind its start now
            piece = make(source.slice(pos, _trim_space(text, pos, head_end)))
            return head_end > pos and budget.fits_piece(piece, len(pieces))

        cut = _choose_cut(text, pos, min(len(text), pos + budget.max_chars), fits, source.link_start, trim=True)
        if cut is None:
            return None
        pieces.append(make(source.slice(pos, _trim_space(text, pos, cut[0]))))
        pos = _skip_space(text, cut[1])
    return pieces


def split_code(block: CodeBlock, budget: Budget) -> list[Block] | None:
    code, pieces = block.code, list[Block]()
    pos, last = _skip_newlines(code, 0), len(code.rstrip())
    while pos < last:
        if len(code) - pos <= budget.max_chars and budget.fits_piece(replace(block, code=code[pos:]), len(pieces)):
            pieces.append(replace(block, code=code[pos:]))
            break

        def fits(head_end: int, pos: int = pos) -> bool:  # called only while this piece is cut: bind its start now
            return head_end > pos and budget.fits_piece(replace(block, code=code[pos:head_end]), len(pieces))

        cut = _choose_cut(code, pos, min(len(code), pos + budget.max_chars), fits, lambda offset: offset, trim=False)
        if cut is None:
            return None
        if code[pos : cut[0]].strip():
            pieces.append(replace(block, code=code[pos : cut[0]]))
        pos = _skip_newlines(code, cut[1])
    return pieces


def _choose_cut(
    text: str, pos: int, window_end: int, fits: Callable[[int], bool], link_start: Callable[[int], int], *, trim: bool
) -> tuple[int, int] | None:
    """Where the head ends (``[0]``) and the tail starts (``[1]``).

    ``reach`` is the longest head that fits if any code point were a fair cut.
    Outside links first, then (a link longer than a part) inside them: a line
    break, else a space, if it keeps at least half of ``reach``, else a grapheme
    boundary.  Only a single cluster longer than a part is cut at a code point.
    """
    reach = _largest(window_end - pos, lambda j: fits(pos + 1 + j))
    if reach is None:
        return None
    reach_end = pos + 1 + reach
    half = pos + (reach_end - pos + 1) // 2
    # The closures below are called only inside the pass (or pattern) that made them; the loop
    # variables they read are bound as defaults so that stays true if one is ever kept.
    for avoid_links in (True, False):

        def clear(offset: int, avoid_links: bool = avoid_links) -> bool:
            return not avoid_links or link_start(offset) == offset

        for pattern in (_NEWLINE, _BREAK_SPACE):
            keep_space = not trim and pattern is _BREAK_SPACE  # code keeps its spaces, in the head
            cuts = [
                (match.end(), match.end()) if keep_space else (match.start(), match.end())
                for match in pattern.finditer(text, pos + 1, reach_end + 1)
                if clear(match.start()) and clear(match.end())
            ]

            def cut_fits(j: int, cuts: list[tuple[int, int]] = cuts) -> bool:
                return fits(cuts[j][0])

            best = _largest(len(cuts), cut_fits)
            if best is not None and cuts[best][0] >= half:
                return cuts[best]

        def snap(offset: int, avoid_links: bool = avoid_links) -> int:
            return boundary_at_or_before(text, link_start(offset) if avoid_links else offset, pos)

        # ``snap`` is monotonic, but a probe inside the first cluster (or link) snaps back to ``pos``: an
        # empty head, which never fits.  So ``fits(snap(...))`` is false, then true, then false again, and
        # bisecting it whole can miss every boundary -- e.g. when a long ZWJ family opens the piece.  Find
        # the first probe that snaps past ``pos``, and bisect only from there, where it is true-then-false.
        n = reach_end - pos
        before = _largest(n, lambda j: snap(pos + 1 + j) <= pos)
        first = 0 if before is None else before + 1

        def snapped_fits(j: int, first: int = first) -> bool:
            return fits(snap(pos + 1 + first + j))

        best = _largest(n - first, snapped_fits)
        if best is not None:
            head_end = snap(pos + 1 + first + best)
            return head_end, head_end
    return reach_end, reach_end


def _largest(n: int, ok: Callable[[int], bool]) -> int | None:
    """Largest ``j < n`` with ``ok(j)``, assuming ``ok`` holds up to some point and then fails."""
    lo, hi = -1, n
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo if lo >= 0 else None


def _skip_space(text: str, pos: int) -> int:
    match = _BREAK_SPACE.match(text, pos)
    return match.end() if match else pos


def _trim_space(text: str, start: int, end: int) -> int:
    while end > start and _BREAK_SPACE.match(text[end - 1]):
        end -= 1
    return end


def _skip_newlines(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == "\n":
        pos += 1
    return pos
