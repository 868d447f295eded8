"""The optional C extensions (readmodel/search/_ftsaux.c: FTS5 auxiliary functions;
readmodel/projection/_grams.c: the substring index's gram words; indexer/_linescan.c:
the log reader's byte-level scans; indexer/_rawlines.c: raw lines from the log's own
bytes; readmodel/core/_runpack.c: event runs' members packed).

Everything else about the package is in pyproject.toml; the extension is
declared here because setuptools still calls ``[tool.setuptools.ext-modules]``
experimental and warns on every install.  ``optional=True``: without a C
compiler or SQLite's headers the install succeeds and search uses its
pure-SQL paths.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("readmodel.search._ftsaux", sources=["readmodel/search/_ftsaux.c"], libraries=["sqlite3"], optional=True),
        # Gram words of documents for the substring index (readmodel/projection/grams.py has the Python path).
        Extension("readmodel.projection._grams", sources=["readmodel/projection/_grams.c"], optional=True),
        # The line scanner's framing check (indexer/records.py has the Python path).
        Extension("indexer._linescan", sources=["indexer/_linescan.c"], optional=True),
        # Raw lines taken from the log's own bytes where they are proven canonical (indexer/projection.py encodes otherwise).
        Extension("indexer._rawlines", sources=["indexer/_rawlines.c"], optional=True),
        # Event runs' members packed, runs of ints told (readmodel/store/blocks.py has the Python paths).
        Extension("readmodel.core._runpack", sources=["readmodel/core/_runpack.c"], optional=True),
    ]
)
