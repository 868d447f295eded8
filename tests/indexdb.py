"""Opening an index file directly in tests, as every sessionq connection does.

The ``documents`` view decodes its text with the SQL function
``sessionq_text`` (:mod:`readmodel.store.doctext`, schema 0016): a test that
reads documents through its own ``sqlite3`` connection registers it, as the
project's connections do.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from readmodel.store import doctext



def connect(database: Any, **kwargs: Any) -> sqlite3.Connection:
    """``sqlite3.connect`` with the index's SQL functions registered."""
    conn = sqlite3.connect(database, **kwargs)
    doctext.install(conn)
    return conn
