"""The index database: its schema, its rows, and the read interface over it.

Owns: the SQLAlchemy schema and row keys, raw event blocks, opening the
database (one writer, read-only readers), schema checks, the status report,
and the read interface the engine uses (:class:`readmodel.store.interface.IndexReader`,
a protocol) with the SQLite implementation beside it (:mod:`readmodel.store.sqlite`).
A second backend adds a module implementing the same protocol.

Imports: :mod:`readmodel.core` and :mod:`readmodel.projection`.
"""
