"""Lists of consecutive exact ints told in one C call (``readmodel/core/_runpack.c``).

:data:`int_run` is ``None`` without the accelerator (or with ``SESSIONQ_RUNPACK_C=0``):
callers then take their general path, which gives the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final


def _accelerated() -> Callable[[Any], tuple[int, int] | None] | None:
    if os.environ.get("SESSIONQ_RUNPACK_C", "1") == "0":
        return None
    try:
        from readmodel.core._runpack import int_run as in_c
    except ImportError:
        return None
    return in_c  # type: ignore[no-any-return]


int_run: Final = _accelerated()
"""``(first, count)`` when a list is the exact ints ``first .. first + count - 1`` (64-bit), else ``None``."""
