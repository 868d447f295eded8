"""The raw log side: zstd frames, raw artifacts and the session-log export ZIP.

Owns: structural scanning and bounded decoding of zstd frames (shared with
the indexer, which reads logs with it), the export's raw-artifact reads
(readRaw semantics, attachments) and the streaming ZIP writer behind
``sessionq export`` and ``GET /api/session.export``.

Imports: :mod:`readmodel.core` and :mod:`readmodel.store`.
"""
