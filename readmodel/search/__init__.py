"""Ranked full-text search: the reference's literal phrases, exact ranking, snippets, cursors.

Owns: search vocabulary and configuration, request normalisation, snippet
cutting, signed cursors (backend-neutral modules), the search engine that
pages and answers over a :class:`readmodel.search.backend.SearchBackend`,
the SQLite FTS5 backend with its optional C accelerator, and the
session-summary listing (:mod:`readmodel.search.summaries`, signed cursors too).  A second
backend adds a module implementing the protocol.

Imports: :mod:`readmodel.core`, :mod:`readmodel.projection`, :mod:`readmodel.store`.
"""
