"""The raw log side: zstd frames, raw artifacts and the session-log export ZIP.

Owns: structural scanning and bounded decoding of zstd frames (shared with
the indexer, which reads logs with it), the export's raw-artifact reads
(readRaw semantics, attachments) and the streaming ZIP writer behind
``sessionq export`` and ``GET /api/session.export``, and the self-contained HTML
transcript behind ``sessionq export --html`` and ``GET /api/session.html``
(:mod:`readmodel.export.transcript`, with its markdown renderer and stylesheet).

Imports: :mod:`readmodel.core`, :mod:`readmodel.projection` and :mod:`readmodel.store`.
"""
