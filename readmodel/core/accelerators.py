"""The optional C accelerators, found once at import.

Each accelerator (``indexer/_linescan.c``, ``indexer/_rawlines.c``, ``readmodel/core/_runpack.c``,
``readmodel/projection/_grams.c``, ``readmodel/search/_ftsaux.c``) has a
Python path giving the same answers; a caller uses the C module or function
when :func:`accelerator_module` / :func:`accelerated` finds it, else its
Python path.  An environment switch set to ``0`` turns an accelerator off (to
compare, or to rule it out).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Final

LINESCAN: Final = ("indexer._linescan", "SESSIONQ_LINESCAN_C")
"""The log reader's byte-level scans (and a packed row's member lines)."""
RAWLINES: Final = ("indexer._rawlines", "SESSIONQ_RAWLINES_C")
"""Raw lines taken from a log's own bytes where they are proven to be their events' encoding."""
RUNPACK: Final = ("readmodel.core._runpack", "SESSIONQ_RUNPACK_C")
"""Event runs' members packed, and runs of consecutive ints told."""
GRAMS: Final = ("readmodel.projection._grams", "SESSIONQ_GRAMS_C")
"""Documents' gram words (the substring index)."""
FTSAUX: Final = ("readmodel.search._ftsaux", "SESSIONQ_FTSAUX")
"""FTS5 auxiliary functions for ranking and snippets (:mod:`readmodel.search.accelerator` checks it further)."""


def accelerator_module(accelerator: tuple[str, str]) -> ModuleType | None:
    """The module of ``accelerator``; ``None`` when it is not built or is switched off."""
    module, switch = accelerator
    if os.environ.get(switch, "1") == "0":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def accelerated(accelerator: tuple[str, str], name: str) -> Any:
    """The function ``name`` of ``accelerator``; ``None`` when it is not built, is switched off, or
    predates the function (a build older than its source: the Python path until it is rebuilt)."""
    module = accelerator_module(accelerator)
    return None if module is None else getattr(module, name, None)
