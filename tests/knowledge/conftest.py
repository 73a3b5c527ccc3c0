"""Fixtures for the knowledge tests: small real files of every kind, written by the formats' own libraries,
and the model stub (chat and embeddings) on loopback.

PDFs are written with pypdf: a page per list of lines in Helvetica, optional
outline entries (bookmarks), a title in the metadata, a password.  DOCX files
with python-docx.  Nothing here is product code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.peers.model_stub import ModelStub, Reply, default_reply

STUB_KEY_ENV = "KB_TEST_STUB_KEY"
DIMENSIONS = 384


class Files:
    """Writes test files into one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def text(self, name: str, content: str) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return path

    def raw(self, name: str, content: bytes) -> Path:
        path = self.folder / name
        path.write_bytes(content)
        return path

    def pdf(self, name: str, pages: Sequence[Sequence[str]], *, title: str | None = None,
            outline: Sequence[tuple[str, int]] = (), password: str | None = None) -> Path:
        from pypdf import PdfWriter
        from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

        writer = PdfWriter()
        font = writer._add_object(DictionaryObject({
            NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }))
        for lines in pages:
            page = writer.add_blank_page(612, 792)
            page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
            ops = ["BT /F1 11 Tf 14 TL 72 720 Td"]
            ops += ["({}) Tj T*".format(line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")) for line in lines]
            stream = DecodedStreamObject()
            stream.set_data("\n".join(ops + ["ET"]).encode("latin-1"))
            page[NameObject("/Contents")] = writer._add_object(stream)
        for heading, page_index in outline:
            writer.add_outline_item(title=heading, page_number=page_index)
        if title:
            writer.add_metadata({"/Title": title})
        if password:
            writer.encrypt(user_password=password, algorithm="AES-128")
        path = self.folder / name
        with path.open("wb") as fh:
            writer.write(fh)
        return path

    def docx(self, name: str, build: Callable[[Any], None]) -> Path:
        import docx

        document = docx.Document()
        build(document)
        path = self.folder / name
        document.save(str(path))
        return path


@pytest.fixture
def files(tmp_path: Path) -> Files:
    folder = tmp_path / "files"
    folder.mkdir()
    return Files(folder)


# --------------------------------------------------------------------------- the model stub

CHLOROPHYLL_ENTITY = (
    "entity<|#|>Chlorophyll<|#|>concept<|#|>Chlorophyll is the green pigment in leaves that absorbs light.\n"
    "<|COMPLETE|>"
)


def graph_responder(body: dict) -> Reply:
    """Answers LightRAG's prompts as a model would: an entity for text about chlorophyll, keywords for queries."""
    messages = body.get("messages") or []
    said = "\n".join(str(m.get("content") or "") for m in messages)
    if "Knowledge Graph Specialist" in said:
        last = str(messages[-1].get("content") or "")
        return Reply.text(CHLOROPHYLL_ENTITY if "chlorophyll" in last.casefold() else "<|COMPLETE|>")
    if "keyword extractor" in said:
        return Reply.text(json.dumps({"high_level_keywords": ["plant pigments"], "low_level_keywords": ["Chlorophyll"]}))
    return default_reply(body)


@pytest.fixture
async def stub(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-test")
    async with ModelStub(responder=graph_responder) as running:
        yield running


def lightrag_raw(stub: ModelStub, **overrides: Any) -> dict[str, Any]:
    """knowledge.yaml for the lightrag engine on the stub's /v1/embeddings, as `partners kb add` would write it."""
    return {
        "engine": "lightrag",
        "embedding": {"model": "openai/stub-embedding", "api_base": stub.api_base, "api_key": f"env:{STUB_KEY_ENV}",
                      "dimensions": DIMENSIONS},
        **overrides,
    }


def stub_model(stub: ModelStub) -> dict[str, Any]:
    return {"model": "openai/stub-model", "api_base": stub.api_base, "api_key": f"env:{STUB_KEY_ENV}"}


@pytest.fixture
def lightrag_settings(stub: ModelStub) -> Callable[..., dict[str, Any]]:
    return lambda **overrides: lightrag_raw(stub, **overrides)


@pytest.fixture
def model_settings(stub: ModelStub) -> dict[str, Any]:
    return stub_model(stub)
