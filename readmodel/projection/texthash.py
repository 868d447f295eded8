"""A stable 64-bit hash of a document's stored text (the boilerplate verdict's key).

The words and substring search modes demote a document whose exact text at
least three sessions hold (:mod:`readmodel.search.modes`).  The indexer stores
each document's :func:`text_hash` in ``document_hashes`` (migration 0013), in
the same transaction as the document, so a search counts the sessions holding
a text through an index instead of reading and comparing texts.

Contract: equal texts always have equal hashes, in every process and on every
machine (unlike Python's randomised ``hash``); different texts collide with
probability about 2⁻⁶⁴ per pair, which could only reorder a hit, never drop
one.  The text hashed is the stored one (after sanitising and redaction).
"""

from __future__ import annotations

import hashlib


def text_hash(text: str) -> int:
    """The signed 64-bit BLAKE2b hash of ``text``'s UTF-8 (an SQLite INTEGER)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
