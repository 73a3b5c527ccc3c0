"""Knowledge per partner: teachers' files, ingested into passages with citations, searched by an engine.

Files become text with structure (:mod:`.extract`), then passages of a few
hundred words with their section and page (:mod:`.ingest`), stored per partner
by a :class:`~.engine.KnowledgeEngine`: ``fts`` (SQLite FTS5, the embedded
default, :mod:`.fts`) or ``lightrag`` (a knowledge graph plus vectors,
:mod:`.lightrag_engine`).  :class:`~.service.KnowledgeService` answers the
``knowledge_search`` tool from the partner's documents and its persona's notes.

Everything of a partner's knowledge base lives in one folder,
``<data_dir>/knowledge/<partner>/`` (:mod:`.settings`).
"""
