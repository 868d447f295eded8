"""The projection rules: pure functions from a session log to what is read about it.

Owns: the harness's event model and header restore rules, the surface fold
(and the tool-result rewrite fingerprint), semantic text extraction, titles,
lineage and event traces, result filters, the ICU-like collation of session
ids, frozen event snapshots, replay validation, and secret detection and
redaction (of documents, raw events, streamed chunks and log lines).  The indexer runs these
rules while it writes; the engine runs them on live sessions and on rows it
reads back.  Nothing here does I/O.

Imports: :mod:`readmodel.core` only.
"""
