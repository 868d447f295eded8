"""JavaScript value semantics that the reference's observable behaviour depends on.

The reference is TypeScript.  JSON numbers there are IEEE doubles, ``true`` is
not a number, "present" means "the key exists" (even with ``null``), and its
whitespace set differs from Python's.  These helpers restate those rules once so
every validator in the project applies the same ones.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

MAX_SAFE_INTEGER: Final = 2**53 - 1

#: ECMAScript WhiteSpace + LineTerminator code points (what ``String.prototype.trim`` removes).
JS_WHITESPACE: Final = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WHITESPACE_CLASS: Final = "[" + re.escape(JS_WHITESPACE) + "]"
_JS_WS_RUN: Final = re.compile(JS_WHITESPACE_CLASS + "+")


def is_number(value: Any) -> bool:
    """``typeof value === 'number'``: int or float, never bool."""
    return (type(value) is int) or (type(value) is float)


def is_integer(value: Any) -> bool:
    """``Number.isInteger``: a finite number with no fractional part."""
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value) and value.is_integer()


def is_safe_integer(value: Any) -> bool:
    """``Number.isSafeInteger``: an integer whose magnitude is at most 2**53 - 1."""
    if type(value) is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    return (
        type(value) is float
        and math.isfinite(value)
        and value.is_integer()
        and abs(value) <= MAX_SAFE_INTEGER
    )


def is_non_negative_safe_integer(value: Any) -> bool:
    """A safe integer ``>= 0`` (JS ``-0`` passes, as it does in the reference)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    return is_safe_integer(value) and value >= 0


def is_negative_zero(value: Any) -> bool:
    """True only for the float ``-0.0`` (JSON ``-0`` parses to it in JS)."""
    return type(value) is float and value == 0.0 and math.copysign(1.0, value) < 0


def is_finite_number(value: Any) -> bool:
    """``Number.isFinite`` (no coercion): a number that is neither NaN nor infinite."""
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value)


def is_record(value: Any) -> bool:
    """A JSON object (not an array, not null)."""
    return type(value) is dict


def js_trim(text: str) -> str:
    """``String.prototype.trim`` with the ECMAScript whitespace set."""
    return text.strip(JS_WHITESPACE)


def js_split_whitespace(text: str) -> list[str]:
    """Split already-trimmed text on runs of ECMAScript whitespace."""
    return _JS_WS_RUN.split(text)


def js_collapse_whitespace(text: str) -> str:
    """Replace every run of ECMAScript whitespace by one space."""
    return _JS_WS_RUN.sub(" ", text)


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (lone surrogates kept as their own unit)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]
