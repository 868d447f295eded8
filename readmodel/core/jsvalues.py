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


def to_js_number(value: Any) -> int | float | None:
    """The JS number a JSON number denotes, or ``None`` when ``value`` is not one.

    ``bool`` is not a number.  Python ints beyond the safe range become the
    double JS would have parsed, so comparisons round exactly as in JS.
    """
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None


def js_string(value: Any) -> str:
    """JS ``String(value)`` for JSON values (used only to word messages exactly)."""
    if type(value) is str:
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int or type(value) is float:
        number = to_js_number(value)
        return str(number) if type(number) is int else js_float_string(number)
    if type(value) in (list, tuple):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_float_string(value: float) -> str:
    """``Number.prototype.toString()`` of a double (ECMA-262 Number::toString)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr is the shortest round-trip form, as JS requires; re-layout its digits.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        text = (digits if k == 1 else digits[0] + "." + digits[1:]) + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + text


def js_spread(value: Any) -> dict[str, Any]:
    """JS ``{...value}``: own enumerable properties as a fresh plain object.

    Objects are shallow-copied; arrays and strings spread their indices (a
    string by UTF-16 code unit, as JS indexes it); ``null`` and other
    primitives spread to ``{}``.
    """
    if type(value) is dict:
        return dict(value)
    if type(value) is list:
        return {str(index): item for index, item in enumerate(value)}
    if type(value) is str:
        return {str(index): chr(unit) for index, unit in enumerate(utf16_units(value))}
    return {}
