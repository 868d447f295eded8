"""Index URLs: recognising a PostgreSQL ``--db``, and showing it without its password.

Kept apart from :mod:`readmodel.store.postgres` (connections, schema) so that
:mod:`readmodel.store.database` can refuse a PostgreSQL URL without importing
what imports it.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qs

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

SCHEMES: Final = ("postgresql", "postgresql+psycopg", "postgres")


class MalformedUrl(ValueError):
    """A ``postgresql://`` URL SQLAlchemy cannot parse (the message masks the password)."""


def is_postgres(db: str) -> bool:
    """Whether ``db`` is a PostgreSQL URL (``postgresql://``, ``postgresql+psycopg://``, ``postgres://``)."""
    scheme, sep, _ = db.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def parse(db: str) -> URL:
    """The SQLAlchemy URL of ``db``, with the psycopg 3 driver; :class:`MalformedUrl` if malformed."""
    try:
        url = make_url(db)
    except (ArgumentError, ValueError):
        raise MalformedUrl(f"{mask_url(db)} is not a valid PostgreSQL URL") from None
    return url.set(drivername="postgresql+psycopg")


def mask_url(db: str) -> str:
    """``db`` with any password replaced by ``***`` (a URL's userinfo or a ``password=`` query parameter)."""
    if "://" not in db:
        return db
    scheme, _, rest = db.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, hostport = authority.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        authority = f"{userinfo}@{hostport}"
    masked = f"{scheme}://{authority}{slash}{tail}"
    base, question, query = masked.partition("?")
    if question:
        parts = [("password=***" if part.lower().startswith("password=") else part) for part in query.split("&")]
        masked = base + "?" + "&".join(parts)
    return masked


def target(db: str) -> str:
    """``host H, database D`` for messages (the host from the URL, its ``host=`` parameter, or libpq's default)."""
    try:
        url = make_url(db)
    except (ArgumentError, ValueError):
        return mask_url(db)
    host = url.host or (parse_qs(db.partition("?")[2]).get("host") or ["the default host"])[0]
    port = f":{url.port}" if url.port else ""
    return f"host {host}{port}, database {url.database or '(the default)'}"


def not_supported_message(db: str, what: str) -> str:
    """The one-line refusal of a command or API whose PostgreSQL support is not built yet."""
    return (
        f"{mask_url(db)}: {what} does not support PostgreSQL yet (docs/postgres.md says what does)"
    )


def connect_message(db: str, exc: BaseException) -> str:
    """One line for a server that cannot be reached or refuses us: host, database, the cause."""
    cause = getattr(exc, "orig", None) or exc
    reason = " ".join(str(cause).split()) or type(cause).__name__
    return f"cannot connect to PostgreSQL ({target(db)}): {_masked_reason(db, reason)}"


def mask_password(text: str, db: str | None) -> str:
    """``text`` with ``db`` masked wherever it appears, and its password wherever else it does."""
    if not db or not is_postgres(db):
        return text
    return _masked_reason(db, text.replace(db, mask_url(db)))


def _masked_reason(db: str, reason: str) -> str:
    try:
        password = make_url(db).password
    except (ArgumentError, ValueError):
        password = None
    return reason.replace(str(password), "***") if password else reason
