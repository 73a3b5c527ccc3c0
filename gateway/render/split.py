"""Fit a reply into a platform's size limit, counted in the platform's unit.

Splitting happens on the tree, not on rendered text.  Blocks are packed into
parts whole, as many as fit; only a block too big for a part on its own is cut,
and it is cut into smaller *blocks* -- a list into runs of items, a quote into
runs of its children, a table into runs of rows (header repeated), a code block
into runs of lines (same language), a paragraph into runs of its text -- which
are rendered on their own.  So a split code block is closed at the end of one
part and reopened at the start of the next, every HTML part has balanced tags,
and no cut can land inside a tag, an entity, a fence or a link's markup.

A block that has to be cut anyway starts in the room left at the end of the
current part when that costs it no extra piece (fewer messages: WhatsApp allows
one per six seconds per user), and a heading always stays with the block
after it.  Inside one paragraph or code block :mod:`gateway.render.cut` picks
the cut: a line break, then a space, then a grapheme cluster boundary, all
outside links if possible.

When even that fails -- a URL longer than the limit, nesting so deep its
indentation alone is over the limit -- the block is flattened to plain text
(:func:`gateway.render.markdown.block_text`) and split again.  Below
``MIN_LIMIT`` there is no guarantee a single character fits, so it is refused.

Invariants (checked by the property tests): every part is within the limit,
none is empty or whitespace, and the visible text survives in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from gateway.core.capabilities import TextUnit
from gateway.render.cut import Budget, split_code, split_inlines
from gateway.render.layout import Renderer
from gateway.render.markdown import (
    Block,
    BlockQuote,
    Cell,
    CodeBlock,
    Heading,
    ListBlock,
    ListItem,
    Paragraph,
    Table,
    block_text,
    text_paragraph,
)

MIN_LIMIT = 16
"""Smallest limit accepted: one escaped character inside the widest block markup fits."""

_FILL_LEVELS = 2
"""Levels below the top that may start a split child in the room left before it (each doubles the work)."""
T = TypeVar("T")
Fits = Callable[[T], bool]
"""Does this candidate, rendered inside its wrappers, fit?"""
Split = Callable[[T, Fits[T], Fits[T]], "list[T] | None"]
"""Cut a child into pieces: the first must pass the first test, the rest the second."""


def measure(text: str, unit: TextUnit) -> int:
    """Length of ``text`` as the platform counts it."""
    if unit is TextUnit.BYTES:
        return len(text.encode("utf-8", "surrogatepass"))
    if unit is TextUnit.UTF16:
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text)  # CHARS and RUNES are both code points


def split_blocks(blocks: Sequence[Block], renderer: Renderer, limit: int, unit: TextUnit) -> list[str]:
    """Render ``blocks`` as parts, each within ``limit`` ``unit``s; no part is empty."""
    return [part for part in (renderer.render(group) for group in split_groups(blocks, renderer, limit, unit))
            if part.strip()]


def split_groups(blocks: Sequence[Block], renderer: Renderer, limit: int, unit: TextUnit) -> list[list[Block]]:
    """The blocks of each part, as :func:`split_blocks` renders them: another renderer (the plain twin)
    can render the same groups, so both texts of a part come from one parse and one split."""
    if limit < MIN_LIMIT:
        raise ValueError(f"text limit {limit} is below the minimum of {MIN_LIMIT}")

    def fits(group: Sequence[Block]) -> bool:
        return measure(renderer.render(group), unit) <= limit

    def split(block: Block, first: Fits[Block], rest: Fits[Block]) -> list[Block] | None:
        return _split_block(block, Budget(rest, limit, _FILL_LEVELS, first))

    visible = [block for block in blocks if renderer.render([block]).strip()]
    groups = _pack(visible, fits, split, _is_heading, fill=True)
    if groups is None:
        raise ValueError(f"text limit {limit} is too small for this reply")
    return groups


def _pack(
    children: Sequence[T],
    fits_group: Callable[[Sequence[T]], bool],
    split_child: Split[T],
    sticky: Fits[T] | None = None,
    fill: bool = False,
    fits_first_group: Callable[[Sequence[T]], bool] | None = None,
) -> list[list[T]] | None:
    """Greedy runs of whole children; a child too big for any run is split, its last piece packed on.

    Such a child may start in the room left by the run before it: always after
    a ``sticky`` child (a heading is not left alone at the end of a part), and
    with ``fill`` when that costs the child no extra piece -- finding out
    splits it twice, so only the top levels fill.
    """
    queue, groups, i, taken = list(children), list[list[T]](), 0, 1

    def fits_now(group: Sequence[T]) -> bool:
        return (fits_group if groups or fits_first_group is None else fits_first_group)(group)

    def fits_one(child: T) -> bool:
        return fits_group([child])

    while i < len(queue):
        taken = _longest_prefix(queue, i, fits_now, taken)
        while sticky and 1 < taken and i + taken < len(queue) and sticky(queue[i + taken - 1]):
            taken -= 1
        lead, after = queue[i : i + taken], i + taken
        if lead and (after == len(queue) or fits_one(queue[after])):
            groups.append(lead)
            i = after
            continue
        # queue[after] does not fit where it would go: split it, starting beside the lead or after it
        sticky_lead = bool(sticky and taken == 1 and sticky(lead[0]))
        beside = None
        if lead and (fill or sticky_lead):

            def fits_beside(child: T, lead: list[T] = lead) -> bool:  # called only by this split: bind this lead
                return fits_now([*lead, child])

            beside = split_child(queue[after], fits_beside, fits_one)
        alone = None
        if not (beside and sticky_lead):
            alone = split_child(queue[after], fits_one if lead else lambda child: fits_now([child]), fits_one)
        if beside and (sticky_lead or alone is None or len(beside) <= len(alone)):
            lead, rest = [*lead, beside[0]], beside[1:]
        elif alone is None or (not lead and alone == [queue[after]]):
            return None  # no way to cut it, or no progress
        else:
            rest = alone
        if lead:
            groups.append(lead)
        groups.extend([piece] for piece in rest[:-1])
        if rest:
            queue[after] = rest[-1]
            i = after
        else:
            i = after + 1
    return groups


def _longest_prefix(items: list[T], start: int, fits_group: Callable[[Sequence[T]], bool], guess: int) -> int:
    """Longest run from ``start`` that fits, searched outward from ``guess`` (longer runs render longer)."""
    n = len(items) - start

    def fits(k: int) -> bool:
        return fits_group(items[start : start + k])

    probe, step = min(max(guess, 1), n), 1
    if fits(probe):
        lo, hi = probe, n + 1
        while lo < n and hi > n:  # gallop up
            probe = min(lo + step, n)
            lo, hi = (probe, hi) if fits(probe) else (lo, probe)
            step *= 2
    else:
        lo, hi = 0, probe
        while lo == 0 and hi > 1:  # gallop down
            probe = max(hi - step, 1)
            lo, hi = (probe, hi) if fits(probe) else (0, probe)
            step *= 2
    while lo + 1 < hi:
        probe = (lo + hi) // 2
        lo, hi = (probe, hi) if fits(probe) else (lo, probe)
    return lo


def _split_block(block: Block, budget: Budget) -> list[Block] | None:
    """Cut ``block`` keeping its structure; flatten it when that fails or wastes most of each part.

    Waste happens when wrappers eat the budget -- a code fence or a deep nest of
    quotes around a tiny limit -- and the structure would come out as dozens of
    two-character parts; plain text then reads better and sends far fewer.
    """
    pieces = _split_structured(block, budget)
    if pieces is not None and not _wasteful(block, pieces, budget):
        return pieces
    flat = text_paragraph(block_text(block))
    if flat is None:
        return [] if pieces is None else pieces
    flat_pieces: list[Block] | None = [flat]
    if not budget.fits_piece(flat, 0):
        flat_pieces = split_inlines(flat.inlines, Paragraph, budget)
    if pieces is None or (flat_pieces is not None and 2 * len(flat_pieces) < len(pieces)):
        return flat_pieces
    return pieces


def _wasteful(block: Block, pieces: list[Block], budget: Budget) -> bool:
    """Markup leaves less than a sixth of each part for the text itself."""
    return len(pieces) >= 4 and 6 * len(block_text(block)) < budget.max_chars * len(pieces)


def _split_structured(block: Block, budget: Budget) -> list[Block] | None:
    """Cut a container between its children (recursing into one too big), or a text block inside its text."""
    fill = budget.fill_levels > 0

    def first(wrap: Callable[[Sequence[T]], Block]) -> Fits[Sequence[T]] | None:
        return None if budget.first is None else lambda group: budget.fits_piece(wrap(group), 0)

    def child(piece: Block, first_fits: Fits[Block], fits: Fits[Block]) -> list[Block] | None:
        return _split_block(piece, budget.within(fits, first_fits))

    if isinstance(block, Paragraph):
        return split_inlines(block.inlines, Paragraph, budget)
    if isinstance(block, Heading):
        return split_inlines(block.inlines, lambda inlines: Heading(block.level, inlines), budget)
    if isinstance(block, CodeBlock):
        return split_code(block, budget)
    if isinstance(block, BlockQuote):

        def as_quote(blocks: Sequence[Block]) -> BlockQuote:
            return BlockQuote(tuple(blocks))

        quoted = _pack(block.blocks, lambda g: budget.fits(as_quote(g)), child, _is_heading, fill, first(as_quote))
        return None if quoted is None else [as_quote(group) for group in quoted]
    if isinstance(block, ListBlock):

        def as_list(items: Sequence[ListItem]) -> ListBlock:
            return ListBlock(block.ordered, tuple(items), block.tight)

        def split_item(item: ListItem, first_fits: Fits[ListItem], fits: Fits[ListItem]) -> list[ListItem] | None:
            def as_item(blocks: Sequence[Block], continued: bool = item.continued) -> ListItem:
                return ListItem(item.number, tuple(blocks), continued)

            def item_child(piece: Block, first_piece: Fits[Block], rest: Fits[Block]) -> list[Block] | None:
                return _split_block(piece, budget.within(rest, first_piece, levels=2))

            groups = _pack(
                item.blocks, lambda g: fits(as_item(g)), item_child, _is_heading, fill, lambda g: first_fits(as_item(g))
            )
            if groups is None:
                return None
            return [as_item(group, item.continued or n > 0) for n, group in enumerate(groups)]

        lists = _pack(block.items, lambda g: budget.fits(as_list(g)), split_item, None, fill, first(as_list))
        return None if lists is None else [as_list(group) for group in lists]
    if isinstance(block, Table) and block.rows:

        def as_table(rows: Sequence[tuple[Cell, ...]]) -> Table:
            return replace(block, rows=tuple(rows))

        tables = _pack(block.rows, lambda g: budget.fits(as_table(g)), _unsplittable, fits_first_group=first(as_table))
        return None if tables is None else [as_table(group) for group in tables]
    return None


def _unsplittable(child: object, first: object, rest: object) -> None:
    """A table row is cut nowhere; a row too big makes the whole table fall back to text."""
    return None


def _is_heading(block: Block) -> bool:
    return isinstance(block, Heading)
