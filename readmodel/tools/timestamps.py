"""Timestamp arguments of the tools: strict ISO 8601 in, exact numeric bounds out.

A bound is written ``YYYY-MM-DDTHH:MM[:SS[.F+]]`` followed by ``Z`` or a
``±HH:MM`` offset, ASCII digits only, uppercase ``T``/``Z``, no spaces.  Any
number of fraction digits is allowed; the instant is kept exactly as

* ``millisecond``: the epoch milliseconds of the instant truncated to the
  millisecond (the first three fraction digits, right-padded with zeros), and
* ``remainder``: the fraction digits beyond the third, trailing zeros removed,

so the instant is ``millisecond + 0.<remainder>`` ms (a floor-based split,
also before the epoch).  Two bounds compare by millisecond, then by their
remainders as decimal fractions.

Event times and creation times are whole milliseconds, so a sub-millisecond
bound becomes the adjacent IEEE-754 double: a lower bound just above its
millisecond (``math.nextafter(ms, +inf)``), an upper bound just below the next
one (``math.nextafter(ms + 1, -inf)``).  A lower bound of ``.12300001`` thus
excludes an event at ms 123 and includes one at 124.

Dates are proleptic Gregorian; computations are integer arithmetic, so every
four-digit year works (Python's ``datetime`` stops at year 1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from readmodel.core.jsvalues import is_safe_integer
from readmodel.tools.errors import invalid_filter

_TIMESTAMP: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)
_MS_PER_DAY: Final = 86_400_000
_MAX_TIME_MS: Final = 8.64e15


@dataclass(frozen=True, slots=True)
class ExactInstant:
    """An instant with sub-millisecond precision: ``millisecond + 0.<remainder>`` ms."""

    millisecond: int
    remainder: str

    def compare(self, other: ExactInstant) -> int:
        """-1, 0 or 1 as ``self`` is before, equal to or after ``other``."""
        if self.millisecond != other.millisecond:
            return -1 if self.millisecond < other.millisecond else 1
        width = max(len(self.remainder), len(other.remainder))
        mine, theirs = self.remainder.ljust(width, "0"), other.remainder.ljust(width, "0")
        return (mine > theirs) - (mine < theirs)

    def lower_bound(self) -> float | int:
        """The smallest number that is not before this instant (inclusive lower bound)."""
        if not self.remainder:
            return self.millisecond
        return math.nextafter(float(self.millisecond), math.inf)

    def upper_bound(self) -> float | int:
        """The largest number that is not after this instant (inclusive upper bound)."""
        if not self.remainder:
            return self.millisecond
        return math.nextafter(float(self.millisecond + 1), -math.inf)


# --------------------------------------------------------------------------- calendar


def is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if is_leap_year(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian ``(year, month, day)`` of a day count since the epoch."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + (3 if month_index < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def format_instant(value: object) -> str:
    """JS ``new Date(value).toISOString()``: UTC, three fraction digits, ``Z``.

    Years outside 0000–9999 use the six-digit signed form (``+010000``,
    ``-000001``).  Fractional milliseconds are truncated toward zero, as JS
    time values are.  A value JS could not format (not a finite number, or
    beyond ±8.64e15 ms) renders as ``invalid time`` instead of failing.
    """
    if type(value) not in (int, float) or not math.isfinite(value) or abs(value) > _MAX_TIME_MS:  # type: ignore[arg-type]
        return "invalid time"
    ms = int(value)  # type: ignore[call-overload]
    days, in_day = divmod(ms, _MS_PER_DAY)
    year, month, day = civil_from_days(days)
    hours, rest = divmod(in_day, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    if 0 <= year <= 9999:
        year_text = f"{year:04d}"
    else:
        year_text = ("+" if year > 0 else "-") + f"{abs(year):06d}"
    return f"{year_text}-{month:02d}-{day:02d}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


# --------------------------------------------------------------------------- parsing


def _epoch_ms(
    year: int, month: int, day: int, hour: int, minute: int, second: int, millis: int, offset_minutes: int
) -> float | int:
    """Epoch milliseconds of validated fields (a seam: tests make it fail like a NaN parse)."""
    days = days_from_civil(year, month, day)
    local = days * _MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis
    return local - offset_minutes * 60_000


def _format_error(label: str) -> Exception:
    return invalid_filter(f"{label} must be an ISO 8601 timestamp that ends in Z or a ±HH:MM offset")


def _value_error(label: str) -> Exception:
    return invalid_filter(f"{label} is not a real calendar date and time")


def parse_timestamp(text: str, label: str) -> ExactInstant:
    """Parse one bound; ``label`` (e.g. ``created_at_from``) names it in errors.

    Errors (``SESSION_QUERY_INVALID_FILTER``): the shape is wrong; a field is
    out of range (month 1–12, day within the month with the Gregorian leap
    rule, hour ≤ 23, minute ≤ 59, second ≤ 59, offset hour ≤ 23, offset
    minute ≤ 59); the instant is not a safe integer number of milliseconds.
    """
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise _format_error(label)
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    fraction = match.group(7) or ""
    if match.group(8):
        offset_hour = offset_minute = 0
        sign = 1
    else:
        sign = 1 if match.group(9) == "+" else -1
        offset_hour, offset_minute = int(match.group(10)), int(match.group(11))
    if not (
        1 <= month <= 12
        and 1 <= day <= days_in_month(year, month)
        and hour <= 23
        and minute <= 59
        and second <= 59
        and offset_hour <= 23
        and offset_minute <= 59
    ):
        raise _value_error(label)
    millis = int(fraction[:3].ljust(3, "0"))
    ms = _epoch_ms(year, month, day, hour, minute, second, millis, sign * (offset_hour * 60 + offset_minute))
    if not is_safe_integer(ms):
        raise _value_error(label)
    return ExactInstant(int(ms), fraction[3:].rstrip("0"))


def time_range_clause(kind: str, name: str, start: str | None, end: str | None) -> dict[str, object] | None:
    """A ``{kind, from?, to?}`` range clause from optional ISO bounds, or ``None``.

    ``name`` is the parameter family in messages (``created_at`` or ``time``).
    Checks, in order: the lower bound, the upper bound, then that the lower
    is not after the upper (compared exactly, below the millisecond too).
    """
    if start is None and end is None:
        return None
    lower = None if start is None else parse_timestamp(start, f"{name}_from")
    upper = None if end is None else parse_timestamp(end, f"{name}_to")
    if lower is not None and upper is not None and lower.compare(upper) > 0:
        raise invalid_filter(f"the {name} range starts after it ends ({name}_from is later than {name}_to)")
    clause: dict[str, object] = {"kind": kind}
    if lower is not None:
        clause["from"] = lower.lower_bound()
    if upper is not None:
        clause["to"] = upper.upper_bound()
    return clause
