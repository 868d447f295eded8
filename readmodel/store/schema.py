"""The index database schema (SQLAlchemy Core) and its identity constants.

The index is a projection of the logs, rebuilt from them at will.  Its tables:

``index_meta``
    One row: the random index identity (cursors bind to it), the random
    secret that signs search cursors (never shown), the global generation
    (bumped by every transaction that changes the corpus), the root it
    projects, when it was last reconciled, and the fingerprint of the secret
    redaction its documents were derived with.
``sessions``
    One row per transcript: the header (exact JSON plus typed columns for
    filters and ordering), where decoding stopped (byte offset, fingerprint and
    resumable walk states), the final surface order, the title event, the
    session's own generation, an error code for a log that cannot be read, and
    its last activity (the last event's time, maintained with the events).
``events``
    One row per event (but see ``event_runs``): type, time, surface, replacement and provenance links,
    the surface order key (an appended node's seq; a replacement inherits the
    key of the first node it removed) and, for tool results, the digest the
    rewrite rule compares.  Current nodes ordered by key are the surface.
    The raw event JSON lives in ``event_blocks`` (zstd-compressed runs of
    consecutive events, a rowid table since schema 0016 so that a block
    stays on its leaf page), so the index stays close to the size of the logs.
``event_runs``
    The bulk of a log in compact form: a run of consecutive *plain* events
    (log-only, without provenance, with an integer time — chunks, steps,
    request headers, tool calls, turn ends, ...) is one row with its first
    seq, count, and the members' types and times.  Each event is in exactly
    one of ``events`` and ``event_runs``; the read side merges them.
``event_links``
    Reverse provenance: which later events cite an event as a source.  A row
    covers the ``span`` consecutive sources ``source_seq`` …
    ``source_seq + span - 1`` cited by ``seq``, with ``span`` at most
    :data:`MAX_LINK_SPAN` so a lookup scans a bounded key range.
``documents`` + ``texts_fts``
    Semantic documents (the text each event contributes) and an external-content
    FTS5 index (``unicode61``) over their distinct texts (schema 0021: rowid
    ``texts.id``, content the view ``text_contents``); surface updates touch
    only the plain table.  In SQLite ``documents`` is a view over ``document_rows``
    and ``texts`` (schemas 0016 and 0018): ``texts`` stores each *distinct*
    text once (:mod:`readmodel.store.texts`), compressed with the block
    dictionary in ``text_z`` (:mod:`readmodel.store.doctext`), with its hash
    and length, and a document row names it by ``text_id``; the view's
    ``text`` decodes it with the SQL function ``sessionq_text`` that every
    sessionq connection registers.  The indexer writes SQLite's storage
    itself (:func:`indexer.projection.insert_documents`); ``INSTEAD OF``
    triggers take other writes of the view.  ``document_rows_text`` lists the
    documents holding a text: the sessions holding it (the search modes'
    boilerplate verdict) and whether any document still does.
``document_hashes``
    PostgreSQL only since schema 0018: each document's stable 64-bit text hash
    (:func:`readmodel.projection.texthash.text_hash`), written with the
    document; indexed by hash, it counts the sessions holding a text, which
    ranks the words and substring search modes without reading texts.
``document_grams``
    The substring candidate index (:mod:`readmodel.store.gramindex`): a
    contentless ``detail=none`` FTS5 table of each distinct text's character
    grams (rowid ``texts.id``), written when a text's first document arrives
    and removed with its last; ``index_meta.grams`` says which gram scheme
    built it.
``layout_problems``
    Artifacts the layout rules excluded, reported by ``status``, each with the
    source whose daemon found it.
``sources``
    One row per indexer source (:mod:`readmodel.store.sources`): its root,
    compression, last reconcile and generation counter.  ``sessions.source``
    says which source indexed a session.

FTS5 has no SQLAlchemy construct; its DDL is explicit in the migration and in
:data:`FTS_DDL`.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
)

# The row-key vocabulary lives in a module without SQLAlchemy (preparation
# workers import it); re-exported here, where the schema's readers look.
from readmodel.store.rowkeys import MAX_LINK_SPAN, SURFACE_CODES, SURFACE_NAMES, docid, id_sort_key  # noqa: F401

APPLICATION_ID: Final = 0x53515849  # "SQXI"
"""``PRAGMA application_id`` of a sessionq index; any other non-zero id is foreign."""

SCHEMA_REVISION: Final = "0021"
"""The Alembic head revision this code reads and writes."""


metadata = MetaData()

index_meta = Table(
    "index_meta",
    metadata,
    Column("singleton", Integer, primary_key=True),
    Column("identity", Text, nullable=False),
    Column("global_generation", Integer, nullable=False),
    Column("root", Text),
    Column("compression", Text),
    Column("created_at", Float, nullable=False),
    Column("last_reconcile_at", Float),
    Column("last_reconcile_seconds", Float),
    Column("cursor_secret", LargeBinary, nullable=False),  # migration 0006
    Column("redaction", Text),  # migration 0007: the documents' redaction fingerprint (NULL: never stored)
    Column("grams", Text),  # migration 0009: the gram scheme document_grams was built with (NULL: not built)
    Column("next_sid", Integer),  # migration 0012: the next session sid not yet handed to a writer (NULL: max(sid) + 1)
)

sessions = Table(
    "sessions",
    metadata,
    Column("sid", Integer, primary_key=True),
    Column("id", Text, nullable=False, unique=True),
    Column("path", Text, nullable=False),  # unique per source (migration 0015): see sessions_source
    Column("header_json", LargeBinary, nullable=False),
    Column("created_at", Float),
    Column("id_key", LargeBinary, nullable=False),
    Column("cwd", Text),
    Column("parent_session", Text),
    Column("revision", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("resume", LargeBinary),
    Column("event_count", Integer, nullable=False),
    Column("stored_count", Integer, nullable=False),
    Column("synthetic_from", Integer),
    Column("tail_state", Text, nullable=False),
    Column("surface_nodes", LargeBinary),
    Column("title_seq", Integer),
    Column("status", Text, nullable=False),
    Column("error_code", Text),
    Column("error_message", Text),
    Column("generation", Integer, nullable=False),
    Column("indexed_at", Float, nullable=False),
    # The time of the last event, written with the events (readmodel/store/activity.py).
    Column("last_activity", Integer),
    Column("source", Text),  # migration 0012: the indexer (host) that indexed it (readmodel.store.sources)
)
Index("sessions_listing", sessions.c.created_at.desc(), sessions.c.id_key, sessions.c.header_json)
Index("sessions_parent", sessions.c.parent_session)
# A daemon reads and deletes only its own source's rows (see migration 0012); a path is
# unique per source, two hosts may have the same one (migration 0015).
Index("sessions_source", sessions.c.source, sessions.c.path, unique=True)
# Search's session filters read only these columns (see migration 0005).
Index("sessions_filters", sessions.c.cwd, sessions.c.status, sessions.c.created_at, sessions.c.parent_session, sessions.c.id)
# listWorkspaces groups sessions by workspace with their newest last activity from this index alone (see migration 0010).
Index("sessions_activity", sessions.c.cwd, sessions.c.last_activity, sessions.c.id)

events = Table(
    "events",
    metadata,
    Column("sid", Integer, ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("time", Integer),
    Column("surface", Integer, nullable=False),
    Column("replaced_by", Integer),
    Column("sources", LargeBinary),
    Column("replaced", LargeBinary),
    Column("synthetic", Integer, nullable=False),
    Column("surface_key", Integer),
    Column("digest", LargeBinary),
    PrimaryKeyConstraint("sid", "seq"),
    sqlite_with_rowid=False,
)
Index("events_surface", events.c.sid, events.c.surface_key, sqlite_where=events.c.surface == 1, postgresql_where=events.c.surface == 1)

event_blocks = Table(
    "event_blocks",
    metadata,
    Column("sid", Integer, ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
    Column("first_seq", Integer, nullable=False),
    Column("count", Integer, nullable=False),
    Column("synthetic", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    # A rowid table (migration 0016): WITHOUT ROWID rows keep at most a quarter of a page.
    PrimaryKeyConstraint("sid", "first_seq"),
)

block_dictionaries = Table(
    "block_dictionaries",
    metadata,
    # zstd dictionaries that raw blocks are compressed with, by zstd dictionary id
    # (each block's frame header names its own); rows are only ever added.
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
)

event_runs = Table(
    "event_runs",
    metadata,
    Column("sid", Integer, ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
    Column("first_seq", Integer, nullable=False),
    Column("count", Integer, nullable=False),
    Column("types", LargeBinary, nullable=False),  # the members' types, run-length coded (readmodel.store.blocks)
    Column("times", LargeBinary, nullable=False),  # the members' integer times, delta coded (readmodel.store.blocks)
    Column("synthetic", Integer, nullable=False),
    PrimaryKeyConstraint("sid", "first_seq"),
    sqlite_with_rowid=False,
)

event_links = Table(
    "event_links",
    metadata,
    Column("sid", Integer, nullable=False),
    Column("source_seq", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("span", Integer, nullable=False, server_default="1"),
    PrimaryKeyConstraint("sid", "source_seq", "seq"),
    sqlite_with_rowid=False,
)

documents = Table(
    "documents",
    metadata,
    Column("docid", Integer, primary_key=True),
    Column("sid", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("time", Integer),
    Column("surface", Integer, nullable=False),
    Column("length", Integer, nullable=False),
    Column("text", Text, nullable=False),
)

sqlite_storage = MetaData()
"""SQLite's storage of what :data:`metadata` models differently: ``documents`` is a view over
``document_rows`` and ``texts`` there (:data:`DOCUMENTS_VIEW_DDL`, migrations 0016 and 0018)."""

texts = Table(
    "texts",
    sqlite_storage,
    # Each distinct document text once (migration 0018, readmodel.store.texts): equal texts share
    # one row, different texts never do (a hash collision gets a row of its own).
    Column("id", Integer, primary_key=True),
    Column("hash", Integer, nullable=False),  # readmodel.projection.texthash.text_hash of the text
    Column("length", Integer, nullable=False),  # code points
    Column("text_z", LargeBinary, nullable=False),  # readmodel.store.doctext.pack_text of the text
)
# The writer finds a text's row by its hash (then compares the texts).
Index("texts_hash", texts.c.hash)
# The search modes' Python ranking counts the sessions holding texts of a length.
Index("texts_length", texts.c.length)

document_rows = Table(
    "document_rows",
    sqlite_storage,
    Column("docid", Integer, primary_key=True),
    Column("sid", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("time", Integer),
    Column("surface", Integer, nullable=False),
    Column("text_id", Integer, nullable=False),  # texts.id (migration 0018)
)
# The documents holding a text, in docid order (the rowid ends every index entry): the sessions
# holding it (the boilerplate verdict), a class of texts' documents, whether a text is still held.
Index("document_rows_text", document_rows.c.text_id)

TEXT_EXPRESSION: Final = 'CASE typeof(t."text_z") WHEN \'blob\' THEN CAST(sessionq_text(t."text_z") AS TEXT) ELSE t."text_z" END'
"""A ``texts`` row's text (alias ``t``): a plain text as stored, a packed one decoded (readmodel.store.doctext)."""

DOCUMENTS_VIEW_DDL: Final = (
    'CREATE VIEW "documents" AS SELECT d."docid" AS "docid", d."sid" AS "sid", d."seq" AS "seq", d."type" AS "type", '
    'd."time" AS "time", d."surface" AS "surface", t."length" AS "length", '
    f'{TEXT_EXPRESSION} AS "text" FROM "document_rows" d LEFT JOIN "texts" t ON t."id" = d."text_id"'
)
"""SQLite's ``documents``: the columns of :data:`documents`, the text decoded.  A ``LEFT JOIN`` on
the key lets SQLite skip ``texts`` in a query that reads no text and no length."""

document_hashes = Table(
    "document_hashes",
    metadata,
    Column("docid", Integer, primary_key=True),
    Column("hash", Integer, nullable=False),
)
# PostgreSQL only since schema 0018 (SQLite keeps each text's hash in ``texts``): the boilerplate
# verdict of the words and substring search modes, the sessions holding a text being the docids
# under its hash (docid >> 32 is the session's sid).
Index("document_hashes_hash", document_hashes.c.hash)

SERVER_MODELS: Final = frozenset({"document_hashes"})
"""Tables of :data:`metadata` that only a server index holds (SQLite: ``texts`` instead)."""

layout_problems = Table(
    "layout_problems",
    metadata,
    Column("path", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("observed_at", Float, nullable=False),
    Column("source", Text, nullable=False),  # migration 0012: the source whose daemon found it
    PrimaryKeyConstraint("source", "path"),  # migration 0012: two hosts may see problems at one path
)

sources = Table(
    "sources",
    metadata,
    Column("source", Text, primary_key=True),
    Column("root", Text),
    Column("compression", Text),
    Column("first_seen_at", Float, nullable=False),
    Column("last_reconcile_at", Float),
    Column("last_reconcile_seconds", Float),
    Column("generation", Integer, nullable=False, server_default="0"),
)

TEXT_CONTENTS_VIEW_DDL: Final = f'CREATE VIEW "text_contents" AS SELECT t."id" AS "id", {TEXT_EXPRESSION} AS "text" FROM "texts" t'
"""Each distinct text once, decoded: the external content of :data:`FTS_DDL` (schema 0021)."""

FTS_DDL: Final = (
    "CREATE VIRTUAL TABLE texts_fts USING fts5("
    "text, content='text_contents', content_rowid='id', tokenize='unicode61', prefix='1 2')"
)
"""External-content FTS5 over each distinct text (rowid ``texts.id``, schema 0021): a text is
tokenised and indexed once however many documents hold it, and the index stores no second copy.
Its row is written with the ``texts`` row and removed with it (:mod:`readmodel.store.textsearch`);
a document's matches are its text's.  One- and two-character prefix indexes (migration 0017)
make the words mode's short prefix terms one doclist instead of a merge of every token they
expand to."""

KNOWN_TABLES: Final = frozenset(
    {
        "alembic_version",
        "index_meta",
        "sessions",
        "events",
        "event_blocks",
        "block_dictionaries",
        "event_runs",
        "event_links",
        "documents",
        "document_rows",
        "texts",
        "document_hashes",
        "layout_problems",
        "sources",
        *("documents_fts", "documents_fts_data", "documents_fts_idx", "documents_fts_docsize", "documents_fts_config"),
        "text_contents",
        "texts_fts",
        "texts_fts_data",
        "texts_fts_idx",
        "texts_fts_docsize",
        "texts_fts_config",
        "document_grams",
        "document_grams_data",
        "document_grams_idx",
        "document_grams_config",
        "terms",
        "postings",
        "document_gram_keys",
        "search_texts",
        "text_postings",
        "text_grams",
        "text_documents",
        "text_prefixes",
    }
)

RETIRED_TABLES: Final = frozenset({"documents_fts", "documents_fts_data", "documents_fts_idx", "documents_fts_docsize", "documents_fts_config"})
"""Tables of older schemas (known, so an index holding them may be upgraded; not expected at the head):
the per-document FTS5 table that migration 0021 replaced by :data:`FTS_DDL`'s per-text one."""

SERVER_TABLES: Final = ("terms", "postings", "document_gram_keys", "search_texts", "text_postings", "text_grams", "text_documents", "text_prefixes")
"""PostgreSQL-only tables (migrations 0014 and 0020, :mod:`readmodel.search.serverterms`): explicit DDL, not models."""

SERVER_INDEXES: Final = ("document_hashes_walk",)
"""PostgreSQL-only indexes on model tables (migration 0020): explicit DDL, not models."""

FTS_PREFIXES: Final = ("texts_fts", "document_grams")
"""Names of the FTS5 tables and their shadow tables start with one of these (explicit DDL, not models)."""
