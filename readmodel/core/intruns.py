"""Lists of consecutive exact ints told in one C call (``readmodel/core/_runpack.c``)."""

from __future__ import annotations

from typing import Final

from readmodel.core.accelerators import RUNPACK, accelerated

int_run: Final = accelerated(RUNPACK, "int_run")
"""``(first, count)`` when a list is the exact ints ``first .. first + count - 1`` (64-bit), else
``None``; itself ``None`` without the accelerator (callers then take their general path)."""
