"""The console's Knowledge area: a partner's course material -- upload, read back, search as it would, delete.

==========================================================  ===========  ===================================
route                                                       method       what
==========================================================  ===========  ===================================
``/console/partners/{partner}/knowledge``                   GET          documents, the upload form, search
``/console/partners/{partner}/knowledge``                   POST         upload one file (multipart ``file``)
``/console/partners/{partner}/knowledge/{doc}``             GET          one document and its passages
``/console/partners/{partner}/knowledge/{doc}/delete``      POST         remove it and its passages
``/console/api/partners/{partner}/knowledge``               GET / POST   documents as JSON / upload
``/console/api/partners/{partner}/knowledge/search?q=``     GET          passages with their citations
``/console/api/partners/{partner}/knowledge/{doc}``         GET / DELETE one document / remove it
==========================================================  ===========  ===================================

Everything goes through the gateway's own :class:`brain.knowledge.service.KnowledgeService`, the one
the partner's ``knowledge_search`` tool asks and ``partners kb`` drives: an upload is ingested by the
same code as ``partners kb add`` (same file kinds, same passages, an unchanged file is a no-op), and
the search is the tool's -- the partner's documents and its persona's notes, each passage with the
citation a reply shows.  An upload is one file of at most the app's body limit (4 MiB,
``gateway.http.app.MAX_BODY_BYTES``); it is written to a private temporary folder under its own
(cleaned) name, because a document is known by its file name, ingested, and the copy removed.

The upload's progress bar is the one committed script ``static/upload.js``: it sends the same form by XHR
and shows the bytes sent, then an indeterminate bar while the server indexes; this page's CSP alone adds
``script-src 'self'; connect-src 'self'``.  Without JavaScript the form posts as it is.
"""

from __future__ import annotations

import logging
import re
import tempfile
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.access import Viewer
from gateway.console.signin import read_form
from gateway.core.config import PartnerConfig
from gateway.http.admin import NO_BRAIN
from gateway.http.app import MAX_BODY_BYTES
from gateway.http.responses import error_response
from gateway.store.console import ConsoleSession

if TYPE_CHECKING:
    from brain.knowledge.engine import Chunk, Document
    from brain.knowledge.service import KnowledgeService
    from brain.tools.services import Passage
    from gateway.console.pages import Console

log = logging.getLogger(__name__)

SEARCH_LIMIT = 8
"""Passages a console search shows: a page of them, as many as a turn's tool call might read."""
MAX_QUERY_CHARS = 500
UPLOAD_CSP = "; script-src 'self'; connect-src 'self'"
"""Added to the console's policy on the knowledge page: its one committed script (``static/upload.js``) and its XHR."""
_UNSAFE_NAME = re.compile(r"[^\w.\- ]+")


class DocumentSummary(BaseModel):
    id: str
    title: str
    filename: str
    kind: str
    size: int
    passages: int
    added_at: float

    @classmethod
    def of(cls, document: Document) -> DocumentSummary:
        return cls(id=document.doc_id, title=document.title, filename=document.filename, kind=document.kind,
                   size=document.size, passages=document.passages, added_at=document.added_at)


class PassageView(BaseModel):
    """One passage of a document, with the citation a reply quoting it shows."""

    seq: int
    section: str
    pages: str
    citation: str
    text: str

    @classmethod
    def of(cls, document: Document, chunk: Chunk) -> PassageView:
        return cls(seq=chunk.seq, section=chunk.section, pages=chunk.pages, text=chunk.text,
                   citation=" ".join(part for part in (document.filename, chunk.pages) if part))


class Found(BaseModel):
    """A search result as the partner's ``knowledge_search`` gets it."""

    title: str
    source: str
    text: str

    @classmethod
    def of(cls, passage: Passage) -> Found:
        return cls(title=passage.title, source=passage.source, text=passage.text)


def clean_name(name: str) -> str | None:
    """The uploaded file's own name, without any folder and with no character a path could misuse; None if nothing is left."""
    base = _UNSAFE_NAME.sub("-", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .-")
    return base[:120] or None


class Knowledge:
    """The Knowledge routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def service(self) -> KnowledgeService | None:
        gateway = self.console.gateway
        return gateway.knowledge if gateway is not None else None

    def resolve(self, request: Request, viewer: Viewer, *, api: bool) -> tuple[KnowledgeService, PartnerConfig] | Response:
        partner = viewer.partner(self.console.config, request.path_params["partner"])
        if partner is None:  # not there, or not theirs: the same answer
            return self.console.refuse(request, 404, api=api, detail="no such partner", message="not_found")
        service = self.service
        if service is None:
            return self.console.refuse(request, 503, api=api, detail=NO_BRAIN, message="knowledge_unavailable")
        return service, partner

    async def upload(self, request: Request, service: KnowledgeService, partner: PartnerConfig, viewer: Viewer
                     ) -> tuple[str, DocumentSummary | None]:
        """Ingest the form's one file: (outcome, document) where outcome is the ingest status, or an error key."""
        from brain.knowledge.engine import KnowledgeError

        if await read_form(request) is None:
            return "upload_missing", None
        sent = (await request.form()).get("file")
        if not isinstance(sent, UploadFile) or not sent.filename:
            return "upload_missing", None
        name = clean_name(sent.filename)
        if name is None:
            return "upload_missing", None
        try:
            with tempfile.TemporaryDirectory(prefix="partners-upload-") as folder:
                path = Path(folder) / name
                path.write_bytes(await sent.read())
                [outcome] = await service.add(partner.id, [path])
        except KnowledgeError as error:
            log.warning("console upload failed partner=%s file=%s error=%s", partner.id, name, error)
            return str(error), None
        finally:
            await sent.close()
        log.info("console upload partner=%s file=%s status=%s by=%s", partner.id, name, outcome.status, viewer.username)
        if outcome.status == "failed":
            return outcome.error, None
        assert outcome.document is not None
        return outcome.status, DocumentSummary.of(outcome.document)

    async def search(self, service: KnowledgeService, partner: PartnerConfig, query: str) -> list[Found]:
        return [Found.of(p) for p in await service.search(partner.id, query[:MAX_QUERY_CHARS], SEARCH_LIMIT)] if query.strip() else []

    # ------------------------------------------------------------------ pages

    async def page(self, request: Request, viewer: Viewer, session: ConsoleSession, *, status: int = 200,
                   outcome: str | None = None) -> Response:
        found = self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        service, partner = found
        if request.method == "POST":
            outcome, document = await self.upload(request, service, partner, viewer)
            if document is not None:
                return RedirectResponse(f"/console/partners/{partner.id}/knowledge?{outcome}={document.id}", status_code=303)
            status = 400
        query = request.query_params.get("q", "")
        notice = next((f"{key}" for key in ("added", "replaced", "unchanged", "removed") if key in request.query_params), None)
        page = self.console.render(
            request, "knowledge.html", status, viewer=viewer, csrf=session.csrf, partner=partner,
            documents=[DocumentSummary.of(d) for d in await service.documents(partner.id)],
            query=query, results=await self.search(service, partner, query), searched=bool(query.strip()),
            notice=notice, notice_doc=request.query_params.get(notice or "", ""), error=outcome if status == 400 else None,
            max_mib=MAX_BODY_BYTES // (1024 * 1024))
        page.headers["Content-Security-Policy"] += UPLOAD_CSP  # this page alone runs a script: the upload's progress
        return page

    async def document_page(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        service, partner = found
        kept = await service.document(partner.id, request.path_params["doc"])
        if kept is None:
            return self.console.render(request, "message.html", 404, message="not_found")
        document, chunks = kept
        return self.console.render(request, "document.html", viewer=viewer, csrf=session.csrf, partner=partner,
                                   document=DocumentSummary.of(document), passages=[PassageView.of(document, c) for c in chunks])

    async def delete_form(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve(request, viewer, api=False)
        if isinstance(found, Response):
            return found
        service, partner = found
        doc_id = request.path_params["doc"]
        if not await service.remove(partner.id, doc_id):
            return self.console.render(request, "message.html", 404, message="not_found")
        log.info("console document removed partner=%s doc=%s by=%s", partner.id, doc_id, viewer.username)
        return RedirectResponse(f"/console/partners/{partner.id}/knowledge?removed={doc_id}", status_code=303)

    # ------------------------------------------------------------------ the JSON twins

    async def api_documents(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve(request, viewer, api=True)
        if isinstance(found, Response):
            return found
        service, partner = found
        if request.method == "POST":
            outcome, document = await self.upload(request, service, partner, viewer)
            if document is None:
                return error_response(400, "send one file as the multipart field `file`" if outcome == "upload_missing" else outcome)
            return JSONResponse({"status": outcome, "document": document.model_dump()}, status_code=201 if outcome == "added" else 200)
        return JSONResponse({"documents": [DocumentSummary.of(d).model_dump() for d in await service.documents(partner.id)]})

    async def api_search(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve(request, viewer, api=True)
        if isinstance(found, Response):
            return found
        service, partner = found
        query = request.query_params.get("q", "")
        if not query.strip():
            return error_response(400, "say what to search for: ?q=...")
        return JSONResponse({"query": query, "passages": [f.model_dump() for f in await self.search(service, partner, query)]})

    async def api_document(self, request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        found = self.resolve(request, viewer, api=True)
        if isinstance(found, Response):
            return found
        service, partner = found
        doc_id = request.path_params["doc"]
        if request.method == "DELETE":
            if not await service.remove(partner.id, doc_id):
                return error_response(404, "no such document")
            log.info("console document removed partner=%s doc=%s by=%s", partner.id, doc_id, viewer.username)
            return JSONResponse({"removed": doc_id})
        kept = await service.document(partner.id, doc_id)
        if kept is None:
            return error_response(404, "no such document")
        document, chunks = kept
        return JSONResponse({"document": DocumentSummary.of(document).model_dump(),
                             "passages": [PassageView.of(document, c).model_dump() for c in chunks]})


def routes(console: Console) -> list[BaseRoute]:
    area = Knowledge(console)

    page, api = partial(console.guarded, api=False), partial(console.guarded, api=True)
    base = "/partners/{partner}/knowledge"
    return [
        Route(base, page(area.page), methods=["GET", "POST"]),
        Route(base + "/{doc}", page(area.document_page)),
        Route(base + "/{doc}/delete", page(area.delete_form), methods=["POST"]),
        Route("/api" + base, api(area.api_documents), methods=["GET", "POST"]),
        Route("/api" + base + "/search", api(area.api_search)),
        Route("/api" + base + "/{doc}", api(area.api_document), methods=["GET", "DELETE"]),
    ]
