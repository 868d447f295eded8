"""Search cursors are signed with the index's random secret, not with anything a cursor carries.

* a cursor re-signed with the old key (derived from the index identity, which
  every cursor's payload names) is ``SESSION_QUERY_INVALID_CURSOR``;
* a cursor handed out by one reader process is accepted by another reader of
  the same index (the secret lives in the index file);
* a cursor of another index is invalid, even one signed with that index's
  secret for this index's identity.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from readmodel.search.cursors import CursorCodec
from readmodel.search.sqlite import sqlite_search
from tests.search.test_search_engine import build, code_of, ids
from tests import indexdb

REPO = Path(__file__).resolve().parents[2]
SESSIONS = {**{f"s{n:02}": [f"needle {'hay ' * n}"] for n in range(7)}, "many": ["hay", "hay hay", "hay hay hay", "stack"]}
REQUEST: dict[str, Any] = {"query": "needle", "limit": 2}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, db, _ = build(tmp_path_factory.mktemp("cursors"), SESSIONS)
    return db


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _payload(cursor: str) -> dict[str, Any]:
    body = cursor.partition(".")[0]
    return msgspec.json.decode(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def identity_signed(payload: dict[str, Any]) -> str:
    """A cursor signed as sessionq did before the secret: with a key derived from ``instance``."""
    body = msgspec.json.encode(payload)
    key = hashlib.sha256(b"sessionq-cursor\x00" + payload["instance"].encode()).digest()
    return _b64(body) + "." + _b64(hmac.new(key, body, hashlib.sha256).digest()[:16])


def secret_of(db: str) -> tuple[str, bytes]:
    search = sqlite_search(db)
    try:
        return search.backend._connection().execute('SELECT "identity", "cursor_secret" FROM "index_meta"').fetchone()
    finally:
        search.close()


def test_a_cursor_forged_with_the_identity_derived_key_is_invalid(index: str) -> None:
    search = sqlite_search(index)
    first = search.search_sessions(REQUEST)
    payload = _payload(first.next_cursor)
    events = {"sessionId": "many", "query": "hay", "limit": 1}
    for offset in (payload["offset"], 2):  # the genuine payload re-signed, and a jump ahead
        forged = identity_signed({**payload, "offset": offset})
        assert code_of(lambda: search.search_sessions({**REQUEST, "cursor": forged})) == "SESSION_QUERY_INVALID_CURSOR"
        event_payload = _payload(search.search_events(events).next_cursor)
        forged_event = identity_signed({**event_payload, "offset": offset})
        assert code_of(lambda: search.search_events({**events, "cursor": forged_event})) == "SESSION_QUERY_INVALID_CURSOR"
    assert ids(search.search_sessions({**REQUEST, "cursor": first.next_cursor})) == ids(search.search_sessions({**REQUEST, "limit": 4}))[2:]


_OTHER_PROCESS = """
import sys
from readmodel.search.sqlite import sqlite_search
page = sqlite_search(sys.argv[1]).search_sessions({"query": "needle", "limit": 2})
print(page.next_cursor)
"""


def test_a_cursor_from_one_reader_process_pages_in_another(index: str) -> None:
    made = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, index], capture_output=True, text=True, cwd=REPO, timeout=60, check=True)
    cursor = made.stdout.strip()
    search = sqlite_search(index)
    second = search.search_sessions({**REQUEST, "cursor": cursor})
    everything = ids(search.search_sessions({**REQUEST, "limit": 7}))
    assert ids(second) == everything[2:4]
    third = sqlite_search(index).search_sessions({**REQUEST, "cursor": second.next_cursor})  # and back, another reader
    assert ids(third) == everything[4:6]


def test_a_cursor_of_another_index_is_invalid(index: str, tmp_path: Path) -> None:
    _, other, _ = build(tmp_path, SESSIONS)  # the same documents, so the same request and generation
    here, there = sqlite_search(index), sqlite_search(other)
    foreign = there.search_sessions(REQUEST).next_cursor
    assert _payload(foreign)["generation"] == _payload(here.search_sessions(REQUEST).next_cursor)["generation"]
    assert code_of(lambda: here.search_sessions({**REQUEST, "cursor": foreign})) == "SESSION_QUERY_INVALID_CURSOR"
    # Naming this index's identity does not help without this index's secret.
    identity, _ = secret_of(index)
    _, other_secret = secret_of(other)
    payload = _payload(foreign)
    relabelled = CursorCodec(identity, other_secret).encode("sessions", payload["fingerprint"], payload["generation"], payload["offset"])
    assert code_of(lambda: here.search_sessions({**REQUEST, "cursor": relabelled})) == "SESSION_QUERY_INVALID_CURSOR"
    genuine = CursorCodec(*secret_of(index)).encode("sessions", payload["fingerprint"], payload["generation"], payload["offset"])
    assert ids(here.search_sessions({**REQUEST, "cursor": genuine})) == ids(here.search_sessions({**REQUEST, "limit": 4}))[2:]


def test_a_codec_refuses_a_short_secret() -> None:
    with pytest.raises(ValueError):
        CursorCodec("identity", b"short")


def test_an_index_without_a_usable_secret_fails_to_open_for_search(tmp_path: Path) -> None:
    import sqlite3

    _, db, _ = build(tmp_path, {"s": ["needle"]})
    conn = indexdb.connect(db)
    conn.execute('UPDATE "index_meta" SET "cursor_secret" = x\'00\'')
    conn.commit()
    conn.close()
    assert code_of(lambda: sqlite_search(db).search_sessions(REQUEST)) == "SESSION_QUERY_INDEX_FAILED"


def test_live_sessions_without_an_index_page_with_cursors() -> None:
    from readmodel.live import InMemoryLiveSource
    from tests.logfactory import header, turn_end, turn_start, user

    live = InMemoryLiveSource()
    for n in range(3):
        live.create(header(f"l{n}", created_at=n + 1), [turn_start(0), user(1, "needle " * (n + 1)), turn_end(2)])
    search = sqlite_search(None, live=live)
    first = search.search_sessions(REQUEST)
    assert ids(first) == ["l2", "l1"]
    assert ids(search.search_sessions({**REQUEST, "cursor": first.next_cursor})) == ["l0"]
    assert code_of(lambda: sqlite_search(None, live=live).search_sessions({**REQUEST, "cursor": first.next_cursor})) == "SESSION_QUERY_INVALID_CURSOR"
