"""Every supported file kind into a title and blocks with headings and pages; every unreadable one into a clear error."""

from __future__ import annotations

import zipfile

import pytest

from brain.knowledge.engine import IngestError
from brain.knowledge.extract import Block, extract


def test_markdown_reads_like_a_note_title_sections_front_matter_and_fences(files):
    path = files.text("photosynthesis.md", (
        "---\nauthor: Ms Lee\n---\n# Photosynthesis\n\nPlants make sugar\nfrom light.\n\n"
        "## Why it matters\n\n- food chains\n- oxygen\n\n```\n# not a heading\n```\n"
    ))
    extracted = extract(path)
    assert (extracted.title, extracted.kind) == ("Photosynthesis", "markdown")
    assert extracted.blocks[0] == Block("Plants make sugar from light.", "")
    assert [b.heading for b in extracted.blocks[1:]] == ["Why it matters"]  # short paragraphs of a section join
    assert extracted.blocks[1].text.startswith("- food chains\n- oxygen")
    assert "# not a heading" in extracted.blocks[1].text
    assert "author" not in " ".join(b.text for b in extracted.blocks)


def test_plain_text_paragraphs_are_unwrapped_and_the_title_comes_from_the_name(files):
    path = files.raw("unit_2-notes.txt", "\ufeffFirst para\nwraps here, hyphen-\nated.\n\n  \nSecond para.".encode())
    extracted = extract(path)
    assert extracted.title == "Unit 2 notes"
    assert [b.text for b in extracted.blocks] == ["First para wraps here, hyphenated.", "Second para."]


def test_pdf_pages_outline_sections_and_metadata_title(files):
    path = files.pdf("worksheet.pdf", [
        ["Forces make things move.", "A push or a pull is a force."],
        ["Friction slows a sliding block."],
        ["Gravity pulls everything down."],
    ], title="Unit 3 worksheet", outline=[("Forces", 0), ("Friction and gravity", 1)])
    extracted = extract(path)
    assert (extracted.title, extracted.kind) == ("Unit 3 worksheet", "pdf")
    assert [(b.page, b.heading) for b in extracted.blocks] == [(1, "Forces"), (2, "Friction and gravity"), (3, "Friction and gravity")]
    assert extracted.blocks[0].text == "Forces make things move. A push or a pull is a force."


def test_pdf_without_metadata_is_titled_by_its_name(files):
    assert extract(files.pdf("cell-biology.pdf", [["Cells divide."]])).title == "Cell biology"


def test_docx_title_headings_lists_and_tables(files):
    def build(document):
        document.add_heading("Cells", 0)  # the Title style
        document.add_paragraph("Every living thing is made of cells.")
        document.add_heading("Parts of a cell", 1)
        document.add_paragraph("The nucleus holds the DNA.")
        document.add_paragraph("Membrane", style="List Bullet")
        document.add_paragraph("Cytoplasm", style="List Bullet")
        table = document.add_table(rows=2, cols=2)
        for (row, col), text in {(0, 0): "Part", (0, 1): "Job", (1, 0): "Nucleus", (1, 1): "Control"}.items():
            table.cell(row, col).text = text

    extracted = extract(files.docx("cells.docx", build))
    assert (extracted.title, extracted.kind) == ("Cells", "docx")
    assert extracted.blocks == [
        Block("Every living thing is made of cells.", ""),
        Block("The nucleus holds the DNA.", "Parts of a cell"),
        Block("- Membrane\n- Cytoplasm", "Parts of a cell"),
        Block("Part | Job\nNucleus | Control", "Parts of a cell"),
    ]


def test_docx_first_heading_is_the_title_when_there_is_no_title(files):
    extracted = extract(files.docx("plain.docx", lambda d: (d.add_heading("Volcanoes", 1), d.add_paragraph("Hot."))))
    assert extracted.title == "Volcanoes" and extracted.blocks == [Block("Hot.", "")]


def test_html_title_sections_lists_and_pre_with_scripts_and_navigation_left_out(files):
    path = files.text("volcanoes.html", (
        "<!doctype html><html><head><title>Volcanoes</title><style>p{}</style></head><body>"
        "<nav><a href='/'>Home</a></nav><script>track()</script>"
        "<h1>Volcanoes</h1><p>Magma <b>rises</b>\n from the <a href='#'>mantle</a>.</p><!-- a comment -->"
        "<h2>Kinds</h2><ul><li>Shield</li><li>Cone</li></ul><pre>lava = hot\n  rock</pre>"
        "<div>Loose text<br>on two lines</div></body></html>"
    ))
    extracted = extract(path)
    assert (extracted.title, extracted.kind) == ("Volcanoes", "html")
    assert extracted.blocks == [
        Block("Magma rises from the mantle.", ""),
        Block("- Shield\n- Cone", "Kinds"),
        Block("lava = hot\n  rock", "Kinds"),
        Block("Loose text on two lines", "Kinds"),
    ]


def test_html_without_a_title_element_takes_its_first_h1(files):
    extracted = extract(files.text("page.htm", "<h1>Rivers</h1><p>Water flows.</p><h1>Seas</h1><p>Salt.</p>"))
    assert extracted.title == "Rivers"
    assert extracted.blocks == [Block("Water flows.", ""), Block("Salt.", "Seas")]


@pytest.mark.parametrize(("name", "expected"), [
    ("table.xlsx", "unsupported file type .xlsx (supported: .docx, .htm, .html, .markdown, .md, .pdf, .text, .txt)"),
    ("essay.doc", ".doc files are not supported (fix: save it as .docx and add that)"),
    ("README", "unsupported file type (no suffix)"),
])
def test_unsupported_kinds_say_which_are(files, name, expected):
    path = files.text(name, "some text")
    with pytest.raises(IngestError, match="^" + name.replace(".", r"\.")) as caught:
        extract(path)
    assert expected in str(caught.value)


def test_empty_and_blank_files(files):
    with pytest.raises(IngestError, match=r"empty\.md is empty"):
        extract(files.text("empty.md", ""))
    with pytest.raises(IngestError, match=r"blank\.txt has no text to search"):
        extract(files.text("blank.txt", " \n\n \n"))
    with pytest.raises(IngestError, match="scanned images"):
        extract(files.pdf("scan.pdf", [[]]))


def test_a_missing_file(files):
    with pytest.raises(IngestError, match="no such file"):
        extract(files.folder / "gone.pdf")


def test_password_protected_pdf(files):
    with pytest.raises(IngestError, match=r"locked\.pdf is password-protected \(fix: save a copy without a password"):
        extract(files.pdf("locked.pdf", [["secret"]], password="hunter2"))


def test_a_pdf_with_only_an_owner_password_opens(files):
    """Restrictions on printing or copying are not a lock: the empty user password opens it."""
    from pypdf import PdfReader, PdfWriter

    plain = files.pdf("plain.pdf", [["Open to read."]])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="", owner_password="teacher", algorithm="AES-128")
    with (files.folder / "restricted.pdf").open("wb") as fh:
        writer.write(fh)
    assert extract(files.folder / "restricted.pdf").blocks[0].text == "Open to read."


@pytest.mark.parametrize("content", [b"%PDF-1.4\nthis is not a pdf", b"not even a header"])
def test_corrupt_pdf(files, content):
    with pytest.raises(IngestError, match=r"broken\.pdf is not a readable PDF .*\(fix: open it in a PDF viewer"):
        extract(files.raw("broken.pdf", content))


def test_corrupt_docx(files):
    with pytest.raises(IngestError, match=r"broken\.docx is not a readable Word document"):
        extract(files.raw("broken.docx", b"PK\x03\x04 truncated"))
    archive = files.folder / "other.docx"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("hello.txt", "a zip, but not a Word document")
    with pytest.raises(IngestError, match=r"other\.docx is not a readable Word document"):
        extract(archive)
