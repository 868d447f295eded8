"""Functions of the optional C accelerators, found once at import.

Each accelerator (``indexer/_linescan.c``, ``readmodel/core/_runpack.c``) has a
Python path giving the same answers; a caller uses the C function when
:func:`accelerated` finds it, else its Python path.  An environment switch
set to ``0`` turns an accelerator off (to compare, or to rule it out).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Final

LINESCAN: Final = ("indexer._linescan", "SESSIONQ_LINESCAN_C")
"""The log reader's byte-level scans (and a packed row's member lines)."""
RUNPACK: Final = ("readmodel.core._runpack", "SESSIONQ_RUNPACK_C")
"""Event runs' members packed, and runs of consecutive ints told."""


def accelerated(accelerator: tuple[str, str], name: str) -> Any:
    """The function ``name`` of ``accelerator``; ``None`` when it is not built or is switched off."""
    module, switch = accelerator
    if os.environ.get(switch, "1") == "0":
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None
