"""What people type: times, event types, negative numbers and id prefixes.

Everything here turns a person's input into the reference's exact request
values before the engine sees them, so the engine's contract is unchanged:

* times: epoch milliseconds, ISO 8601 dates and datetimes (``2026-08-01``,
  ``2026-08-01T14:30``, ``2026-08-01T14:30:00Z``), or an age (``90s``,
  ``15m``, ``3h``, ``2d``, ``1w``: that long before now).  A date alone is
  local midnight; for an upper bound (``--created-to``) it is the end of
  that day.
* ``--type`` values are checked against the known event types.
* a negative number is a value, not an option (``sessionq event ID -1``).
* a session id may be a unique prefix (:func:`resolve_id`).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Sequence
from typing import Any, Final

import click

from readmodel.core.errors import SessionQueryError

_AGE: Final = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_AGE_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER: Final = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_DATE_ONLY: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")

TIME_HELP: Final = "epoch ms, an ISO date/datetime such as 2026-08-01 or 2026-08-01T14:30, or an age such as 3h or 2d"

PREFIX_CANDIDATES_SHOWN: Final = 10
"""How many candidates an ambiguous id prefix lists."""


def as_number(text: str) -> int | float:
    """A JSON number from its text: an integer when it reads as one."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_time(text: str, *, end_of_day: bool = False, now: float | None = None) -> int | float:
    """Epoch milliseconds from what a person typed (see the module docstring); ``ValueError`` otherwise."""
    text = text.strip()
    if _NUMBER.match(text):
        return as_number(text)
    age = _AGE.match(text.lower())
    if age:
        seconds = float(age.group(1)) * _AGE_SECONDS[age.group(2)]
        return int(((time.time() if now is None else now) - seconds) * 1000)
    if _DATE_ONLY.match(text):
        day = dt.datetime.combine(dt.date.fromisoformat(text), dt.time())
        if end_of_day:
            day += dt.timedelta(days=1)
        return int(day.timestamp() * 1000) - (1 if end_of_day else 0)
    moment = dt.datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


class TimeType(click.ParamType):
    """A time bound in any form :func:`parse_time` reads."""

    name = "time"

    def __init__(self, end_of_day: bool = False) -> None:
        self.end_of_day = end_of_day

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        if isinstance(value, (int, float)):
            return value
        try:
            return parse_time(str(value), end_of_day=self.end_of_day)
        except (ValueError, OverflowError):
            self.fail(f"{value!r} is not a time ({TIME_HELP})", param, ctx)


TIME_FROM: Final = TimeType()
TIME_TO: Final = TimeType(end_of_day=True)


class NumberType(click.ParamType):
    """A JSON number: an integer when it reads as one, else a float."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        if isinstance(value, (int, float)):
            return value
        try:
            return as_number(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)


NUMBER: Final = NumberType()


def check_event_types(types: Sequence[str]) -> None:
    """Refuse an unknown ``--type`` as an invalid filter (exit 2), listing the valid ones."""
    from readmodel.projection.eventmodel import KNOWN_EVENT_TYPES

    unknown = [value for value in types if value not in KNOWN_EVENT_TYPES]
    if unknown:
        raise SessionQueryError(
            "SESSION_QUERY_INVALID_FILTER",
            f"unknown event type {', '.join(map(repr, unknown))}; valid types: {', '.join(sorted(KNOWN_EVENT_TYPES))}",
        )


class PeopleCommand(click.Command):
    """A command that reads ``-1`` as a value (a negative seq) rather than an unknown option.

    Unknown options are still refused as click refuses them; only tokens that
    read as numbers pass through to the arguments.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = dict(kwargs.pop("context_settings", None) or {})
        settings["ignore_unknown_options"] = True
        super().__init__(*args, context_settings=settings, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = {name for param in self.params if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)}
        names.update(ctx.help_option_names)
        takes_value = {
            name for param in self.params if isinstance(param, click.Option) and not param.is_flag and not param.count for name in param.opts
        }
        expect_value = False
        for token in args:
            if token == "--":
                break
            if expect_value:
                expect_value = False
                continue
            name = token.split("=", 1)[0]
            if token.startswith("-") and len(token) > 1 and not _NUMBER.match(token) and name not in names:
                raise click.NoSuchOption(name, ctx=ctx)
            expect_value = name in takes_value and "=" not in token
        return super().parse_args(ctx, args)


def ambiguous_prefix(prefix: str, candidates: Sequence[str]) -> SessionQueryError:
    """The error of an id prefix several sessions share: ``SESSION_NOT_FOUND`` listing the candidates."""
    shown = ", ".join(candidates[:PREFIX_CANDIDATES_SHOWN])
    tail = " and more" if len(candidates) > PREFIX_CANDIDATES_SHOWN else ""
    return SessionQueryError(
        "SESSION_QUERY_SESSION_NOT_FOUND",
        f'session id prefix "{prefix}" is ambiguous: it matches {shown}{tail}; type more of the id',
    )


def resolve_id(query: Any, text: str) -> str:
    """The session id a person meant: ``text`` itself when it is an id, else the one
    session whose id starts with it.

    An unknown text is returned unchanged (the engine's read then answers
    ``SESSION_QUERY_SESSION_NOT_FOUND``); an ambiguous prefix raises that code
    with the candidates listed (exit 2).  Resolution happens here, in the CLI,
    so the reference's methods keep their exact-id semantics.
    """
    live = query.live
    if not text or (live is not None and live.get(text) is not None):
        return text
    candidates: list[str] = []
    if query.store is not None:
        with query.store.read() as reader:
            if reader.lookup(text) is not None:
                return text
            candidates = reader.ids_with_prefix(text, PREFIX_CANDIDATES_SHOWN + 1)
    if live is not None:
        candidates += [str(s.header.get("id")) for s in live.list() if str(s.header.get("id")).startswith(text)]
    candidates = sorted(set(candidates))
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        raise ambiguous_prefix(text, candidates)
    return text
