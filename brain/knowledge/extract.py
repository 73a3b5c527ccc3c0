"""Files into text with structure: a title and blocks (paragraphs) with their section and page.

Each format goes through a well-kept reader -- the notes reader for Markdown,
pypdf, python-docx, BeautifulSoup over the standard library's HTML parser --
imported only when a file of its kind arrives.  What comes out is the same for
all: :class:`Extracted`, whose blocks keep the heading they sit under and, for
a PDF, their page (and the section the PDF's outline gives that page), so a
passage can be cited as ``worksheet.pdf p. 3``.

Every failure is an :class:`~brain.knowledge.engine.IngestError` naming the
file and what to do: an unsupported type, an encrypted or corrupt PDF or
DOCX, a file with no text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.knowledge.engine import IngestError

KINDS = {
    ".md": "markdown", ".markdown": "markdown",
    ".txt": "text", ".text": "text",
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html", ".htm": "html",
}
SUPPORTED = ", ".join(sorted(KINDS))
_CONVERT_FIRST = {".doc": ".docx", ".rtf": ".docx", ".odt": ".docx", ".pages": ".docx"}
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Block:
    text: str
    heading: str = ""
    """The section the block sits under ("" before the first heading)."""
    page: int | None = None


@dataclass(frozen=True)
class Extracted:
    title: str
    kind: str
    blocks: list[Block]


def kind_of(path: Path) -> str:
    """The file's kind by its suffix, or an IngestError saying which kinds there are."""
    suffix = path.suffix.lower()
    if suffix in KINDS:
        return KINDS[suffix]
    if suffix in _CONVERT_FIRST:
        raise IngestError(f"{path.name}: {suffix} files are not supported",
                          fix=f"save it as {_CONVERT_FIRST[suffix]} and add that")
    raise IngestError(f"{path.name}: unsupported file type {suffix or '(no suffix)'} (supported: {SUPPORTED})")


def title_from_name(path: Path) -> str:
    return path.stem.replace("-", " ").replace("_", " ").strip().capitalize() or path.name


def extract(path: Path) -> Extracted:
    """Read one file into its title and blocks; IngestError if it cannot be read or holds no text."""
    kind = kind_of(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise IngestError(f"{path.name} is empty")
    title, blocks = _READERS[kind](path)
    blocks = [b for b in blocks if b.text.strip()]
    if not blocks:
        hint = "it may be scanned images; add a version with a text layer" if kind == "pdf" else None
        raise IngestError(f"{path.name} has no text to search", fix=hint)
    return Extracted(title=title or title_from_name(path), kind=kind, blocks=blocks)


def _unwrap(text: str) -> str:
    """A paragraph's lines joined by spaces, words broken by a hyphen at a line end joined again."""
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text.strip())
    return " ".join(text.split())


# --------------------------------------------------------------------------- Markdown and text


def _markdown(path: Path) -> tuple[str, list[Block]]:
    """Through the notes reader, so a file reads the same as a persona's note (front matter, fences, lists)."""
    from brain.notes import read_note

    title, passages = read_note(path, path.name)
    return title, [Block(text=p.text, heading=p.heading) for p in passages]


def _text(path: Path) -> tuple[str, list[Block]]:
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    return "", [Block(text=_unwrap(part)) for part in _PARAGRAPH_BREAK.split(text)]


# --------------------------------------------------------------------------- PDF


def _pdf(path: Path) -> tuple[str, list[Block]]:
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError, PdfReadError, PyPdfError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # many "protected" PDFs only restrict printing or copying
            except (DependencyError, NotImplementedError, PyPdfError):
                opened = PasswordType.NOT_DECRYPTED
            if not opened:
                raise IngestError(f"{path.name} is password-protected",
                                  fix="save a copy without a password (print to PDF) and add that")
        sections = _outline_sections(reader)
        blocks: list[Block] = []
        heading = ""
        for number, page in enumerate(reader.pages, start=1):
            heading = sections.get(number, heading)
            text = page.extract_text() or ""
            blocks.extend(Block(text=_unwrap(part), heading=heading, page=number) for part in _PARAGRAPH_BREAK.split(text))
        title = str(reader.metadata.title or "").strip() if reader.metadata else ""
    except IngestError:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, IndexError, OSError) as error:
        raise IngestError(f"{path.name} is not a readable PDF ({error})",
                          fix="open it in a PDF viewer; if it opens, print it to a new PDF and add that") from None
    return title, blocks


def _outline_sections(reader: Any) -> dict[int, str]:
    """The page each top-level outline (bookmark) entry starts on -> its title; {} when there is none."""
    try:
        outline = reader.outline
    except Exception:  # a broken outline must not cost the text
        return {}
    starts: dict[int, str] = {}
    for entry in outline:
        if isinstance(entry, list):  # children of the entry before
            continue
        try:
            number = reader.get_destination_page_number(entry) + 1
        except Exception:
            continue
        if number > 0:
            starts.setdefault(number, str(entry.title).strip())
    return starts


# --------------------------------------------------------------------------- DOCX


def _docx(path: Path) -> tuple[str, list[Block]]:
    import zipfile

    import docx
    from docx.opc.exceptions import OpcError

    try:
        document = docx.Document(str(path))
    except (OpcError, zipfile.BadZipFile, KeyError, ValueError) as error:
        raise IngestError(f"{path.name} is not a readable Word document ({error})",
                          fix="open it in Word or LibreOffice and save it again as .docx") from None
    title = (document.core_properties.title or "").strip()
    blocks: list[Block] = []
    heading = ""
    for item in document.iter_inner_content():
        if hasattr(item, "rows"):  # a table: one block, a line per row
            rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in item.rows]
            blocks.append(Block(text="\n".join(r for r in rows if r.strip(" |")), heading=heading))
            continue
        text = item.text.strip()
        style = (item.style.name if item.style is not None else "") or ""
        if not text:
            continue
        if style == "Title":
            title = title or text
        elif style.startswith("Heading"):
            if style == "Heading 1" and not title:
                title = text
            else:
                heading = text
        elif style.startswith("List"):
            blocks.append(Block(text=f"- {text}", heading=heading))
        else:
            blocks.append(Block(text=text, heading=heading))
    return title, _joined_lists(blocks)


def _joined_lists(blocks: list[Block]) -> list[Block]:
    """Consecutive list items of one section as one block, a line each."""
    joined: list[Block] = []
    for block in blocks:
        last = joined[-1] if joined else None
        if last and last.heading == block.heading and last.text.startswith("- ") and block.text.startswith("- "):
            joined[-1] = Block(text=f"{last.text}\n{block.text}", heading=block.heading)
        else:
            joined.append(block)
    return joined


# --------------------------------------------------------------------------- HTML

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "dd", "details", "dialog", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "ol", "p", "pre", "section",
    "summary", "table", "td", "th", "tr", "ul", "caption",
}
_SKIPPED = {"script", "style", "noscript", "template", "svg", "nav", "head", "iframe", "object", "canvas"}


def _html(path: Path) -> tuple[str, list[Block]]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    reader = _HtmlBlocks(title)
    reader.walk(soup)
    reader.flush()
    return reader.title, _joined_lists(reader.blocks)


class _HtmlBlocks:
    """Walks a parsed HTML tree: headings open sections, block elements end paragraphs, inline text flows."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.blocks: list[Block] = []
        self.heading = ""
        self.seen_h1 = False
        self.words: list[str] = []
        self.prefix = ""

    def flush(self) -> None:
        raw = "".join(self.words)
        text = raw.strip("\n") if self.prefix == "pre" else " ".join(raw.split())
        if text:
            bullet = "- " if self.prefix == "li" else ""
            self.blocks.append(Block(text=bullet + text, heading=self.heading))
        self.words, self.prefix = [], ""

    def walk(self, node: Any) -> None:
        from bs4 import Comment, NavigableString, Tag
        from bs4.element import Declaration, Doctype, ProcessingInstruction

        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                    self.words.append(str(child))
            elif isinstance(child, Tag):
                self._tag(child)

    def _tag(self, tag: Any) -> None:
        name = tag.name.lower()
        if name in _SKIPPED:
            return
        if name in _HEADINGS:
            self.flush()
            text = " ".join(tag.get_text(" ").split())
            first_h1, self.seen_h1 = name == "h1" and not self.seen_h1, self.seen_h1 or name == "h1"
            if first_h1 and (not self.title or text == self.title):
                self.title = text  # the page's own title, like a note's first "# " line: not a section
            else:
                self.heading = text
        elif name == "br":
            self.words.append("\n" if self.prefix == "pre" else " ")
        elif name in _BLOCKS:
            self.flush()
            self.prefix = name if name in ("li", "pre") else ""
            if name == "pre":
                self.words.append(tag.get_text())
            else:
                self.walk(tag)
            self.flush()
        else:
            self.walk(tag)


_READERS: dict[str, Callable[[Path], tuple[str, list[Block]]]] = {
    "markdown": _markdown, "text": _text, "pdf": _pdf, "docx": _docx, "html": _html,
}

