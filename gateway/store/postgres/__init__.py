"""The PostgreSQL engine of the gateway store: what a fleet of gateway nodes shares (issue 16).

SQLite (:mod:`gateway.store.sqlite`) stays the embedded default; ``store: postgresql://...`` in the
config selects this engine.  The same :class:`gateway.store.Store` protocol, the same store tests
(``tests/store``, every engine), but nothing here leans on a single writer: every read-modify-write is
one statement (``UPDATE ... RETURNING``, ``INSERT ... ON CONFLICT ... WHERE``) so N nodes may run it at
once.  psycopg 3 with its async pool (the ``postgresql`` extra), imported only when this engine is used.

Layout: :mod:`.rows` is the seam every part runs its statements through (:class:`OnPool`);
:mod:`.engine` holds the pool, the migrations and the core (inbox, outbox, cursors, access, reminders,
takeovers); the console's rows, transcripts, activity, accounts and API tokens each have a module.
"""
