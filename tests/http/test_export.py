"""GET/HEAD /api/session.export against real indexes (export-spec §9, catalogue §10.6).

Not applicable here (one line each): catalogue 2 (coldBlankProbeMaxBytes is a
host setting of another feature); 8, 9, 22 (flush-before-read: sessionq reads
durable logs, there is no in-process live store to flush); 11 (the index
always exposes per-session raw artifacts, so no 501); 14 (session-query and
persistence are the index itself, opened by the app); 19 (readRaw requires a
header line, so a stored artifact is never empty); 23–27 (abort signals: the
export is a generator; a client disconnect closes it, covered by
``test_closing_the_body_releases_the_log``).
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from pathlib import Path

import pytest
import zstandard

from indexer.layout import Compression
from readmodel.export.artifacts import ArtifactError, AttachmentStore
from readmodel.export.archive import Exporter, ExportStreamError, safe_id
from readmodel.http.app import PREPARE_FAILED, create_app
from tests.http.conftest import Site, names, unzip
from tests.logfactory import header, line, simple_turn, tool_result, user, write_log

PNG = b"\x89PNG\r\n\x1a\n" + b"png-bytes" * 10


def log_text(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".zstd"):
        data = _all_frames(data)
    return data.decode("utf-8", "replace")


def _all_frames(data: bytes) -> bytes:
    out = []
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    while piece := reader.read(1 << 20):
        out.append(piece)
    return b"".join(out)


def store_image(site: Site, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    folder = site.attachments / "objects" / digest[:2]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / digest).write_bytes(data)
    return f"sha256:{digest}"


def image_block(ref: str, media: str = "image/png") -> dict:
    return {"type": "image", "attachment": {"attachmentId": ref, "mediaType": media, "bytes": 1}}


def image_user(seq: int, blocks: list) -> dict:
    event = user(seq, "look")
    event["data"]["content"] = blocks
    return event


# --------------------------------------------------------------------------- basics


def test_root_only_export(site: Site) -> None:
    path = write_log(site.root, header("session-root"), [simple_turn(0, "hello")])
    site.index()
    response = site.client().get("/api/session.export", params={"sessionId": "session-root"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == 'attachment; filename="dsh-session-session-root.zip"'
    entries = unzip(response.content)
    assert list(entries) == ["session.jsonl"]
    assert entries["session.jsonl"].decode() == log_text(path)


def test_raw_jsonl_root_export(tmp_path: Path) -> None:
    site = Site(tmp_path)
    path = write_log(site.root, header("plain"), [simple_turn(0, "hé 😀")], Compression.NONE)
    build_index_none(site)
    response = site.client().get("/api/session.export", params={"sessionId": "plain"})
    assert response.status_code == 200
    assert unzip(response.content)["session.jsonl"] == path.read_bytes()


def build_index_none(site: Site) -> None:
    from indexer.reconcile import Reconciler
    from readmodel.store.database import open_writer

    engine = open_writer(str(site.db))
    try:
        Reconciler(engine, site.root, Compression.NONE, settle_seconds=0).reconcile()
    finally:
        engine.dispose()


def test_head_matches_get_without_body(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(site.root, header("session-root"), [simple_turn()])
    site.index()
    client = site.client()
    calls: list[str] = []
    original = Exporter.read_raw

    def counting(self: Exporter, session_id: str) -> object:
        calls.append(session_id)
        return original(self, session_id)

    monkeypatch.setattr(Exporter, "read_raw", counting)
    head = client.head("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})
    assert calls == ["session-root"]  # one readRaw, no descendants walked
    get = client.get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"] == "application/zip"
    assert head.headers["content-disposition"] == get.headers["content-disposition"]


def test_head_missing_root_is_404_without_body(site: Site) -> None:
    write_log(site.root, header("other"), [simple_turn()])
    site.index()
    response = site.client().head("/api/session.export", params={"sessionId": "absent"})
    assert response.status_code == 404 and response.content == b""


def test_missing_root_is_404(site: Site) -> None:
    write_log(site.root, header("other"), [simple_turn()])
    site.index()
    response = site.client().get("/api/session.export", params={"sessionId": "absent"})
    assert response.status_code == 404 and response.text == "session not found"


def test_root_whose_log_vanished_is_404(site: Site) -> None:
    path = write_log(site.root, header("gone"), [simple_turn()])
    site.index()
    path.unlink()
    assert site.client().get("/api/session.export", params={"sessionId": "gone"}).status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        "",
        "sessionId=",
        "includeDescendants=true",
        "sessionId=s1&includeDescendants=1",
        "sessionId=s1&includeDescendants=TRUE",
        "sessionId=s1&includeDescendants=",
        "sessionId=s1&sessionId=",  # last value wins
    ],
)
def test_invalid_parameters_are_400(site: Site, query: str) -> None:
    write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    response = site.client().get(f"/api/session.export?{query}")
    assert response.status_code == 400
    assert response.text == "missing or invalid sessionId query parameter"
    assert response.headers["content-type"].startswith("text/plain")


def test_unknown_parameters_ignored_and_last_value_wins(site: Site) -> None:
    write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    response = site.client().get("/api/session.export?sessionId=zz&sessionId=s1&foo=bar&includeDescendants=x&includeDescendants=false")
    assert response.status_code == 200


def test_other_methods_are_not_routed(site: Site) -> None:
    write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    assert site.client().post("/api/session.export?sessionId=s1").status_code in (404, 405)


def test_compression_levels(tmp_path: Path) -> None:
    site = Site(tmp_path)
    write_log(site.root, header("s1"), [[*simple_turn(0, "compressible " * 5000)]])
    site.index()
    sizes = {}
    for level in (0, 9):
        client = site.client(compression_level=level)
        data = client.get("/api/session.export", params={"sessionId": "s1"}).content
        sizes[level] = len(data)
        assert "compressible " * 50 in unzip(data)["session.jsonl"].decode()
    assert sizes[9] < sizes[0]


@pytest.mark.parametrize("level", [-1, 10, 1.5])
def test_invalid_compression_level_rejected(site: Site, level: object) -> None:
    with pytest.raises(ValueError):
        create_app(str(site.db), compression_level=level)  # type: ignore[arg-type]


def test_safe_id() -> None:
    assert safe_id("session-root") == "session-root"
    assert safe_id("a b/c.d") == "a_b_c_d"
    assert safe_id("x😀é") == "x___"


def test_disposition_uses_safe_id(site: Site) -> None:
    sid = "odd id/😀"
    write_log(site.root, header(sid), [simple_turn()])
    site.index()
    response = site.client().get("/api/session.export", params={"sessionId": sid})
    assert response.status_code == 200
    assert response.headers["content-disposition"] == 'attachment; filename="dsh-session-odd_id___.zip"'


# --------------------------------------------------------------------------- descendants


def lineage(site: Site) -> dict[str, Path]:
    paths = {"session-root": write_log(site.root, header("session-root", 1), [simple_turn(0, "root")])}
    paths["child-a"] = write_log(site.root, header("child-a", 2, parentSession="session-root", origin="subagent", delegationDepth=1), [simple_turn(0, "child")])
    paths["grandchild-a"] = write_log(site.root, header("grandchild-a", 3, parentSession="child-a", origin="subagent", delegationDepth=2), [simple_turn(0, "grand")])
    paths["child-b"] = write_log(site.root, header("child-b", 4, parentSession="session-root", origin="subagent", delegationDepth=1), [simple_turn(0, "b")])
    site.index()
    return paths


def test_descendants_flat_preorder(site: Site) -> None:
    paths = lineage(site)
    response = site.client().get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})
    entries = unzip(response.content)
    assert list(entries) == [
        "session.jsonl",
        "subagents/child-a/session.jsonl",
        "subagents/grandchild-a/session.jsonl",
        "subagents/child-b/session.jsonl",
    ]
    assert entries["session.jsonl"].decode() == log_text(paths["session-root"])
    for sid in ("child-a", "grandchild-a", "child-b"):
        assert entries[f"subagents/{sid}/session.jsonl"].decode() == log_text(paths[sid])


def test_descendants_off_by_default_and_with_false(site: Site) -> None:
    lineage(site)
    client = site.client()
    for params in ({"sessionId": "session-root"}, {"sessionId": "session-root", "includeDescendants": "false"}):
        assert names(client.get("/api/session.export", params=params).content) == ["session.jsonl"]


def test_shared_node_exported_once() -> None:
    class Node:
        def __init__(self, sid: str, kids: list) -> None:
            self.session = type("R", (), {"header": {"id": sid}})()
            self.descendants = kids

    shared = Node("shared", [Node("leaf", [])])
    trace = type("T", (), {"descendants": [Node("a", [shared]), Node("b", [shared]), Node("root", [])]})()
    engine = type("E", (), {"trace_session": lambda self, sid: trace})()
    exporter = Exporter("unused.db", lambda: engine, None, None)
    assert exporter._descendants("root") == ["a", "shared", "leaf", "b"]


def test_missing_descendant_breaks_the_body(site: Site) -> None:
    paths = lineage(site)
    paths["grandchild-a"].unlink()
    client = site.client()
    with pytest.raises(Exception, match='subagent "grandchild-a" has no stored log artifact'):
        client.get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})


def test_missing_descendant_over_real_http_aborts_connection(site: Site) -> None:
    """Raising in the body generator aborts the response: the client never gets a valid archive."""
    paths = lineage(site)
    paths["child-b"].unlink()
    client = site.client()
    client_no_raise = type(client)(client.app, base_url=str(client.base_url), raise_server_exceptions=False)
    try:
        response = client_no_raise.get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})
    except ExportStreamError:
        return  # body read failed: fine
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(response.content)).testzip()


def test_corrupt_descendant_frame_breaks_the_body(site: Site) -> None:
    paths = lineage(site)
    data = bytearray(paths["child-a"].read_bytes())
    data[-2] ^= 0xFF  # content checksum of the last frame
    paths["child-a"].write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="checksum"):
        site.client().get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})


# --------------------------------------------------------------------------- failures before the body


def test_root_read_failure_is_private_500(site: Site) -> None:
    path = write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    header_frame = zstandard.ZstdCompressor(write_checksum=True).compress(line(header("s1")))
    data = bytearray(path.read_bytes())
    data[len(header_frame) - 2] ^= 0xFF  # the header frame's content checksum
    path.write_bytes(bytes(data))
    client = site.client()
    response = client.get("/api/session.export", params={"sessionId": "s1"})
    assert response.status_code == 500
    assert response.text == PREPARE_FAILED
    assert str(site.root) not in response.text
    assert client.head("/api/session.export", params={"sessionId": "s1"}).status_code == 500


def test_root_structural_damage_is_private_500(site: Site) -> None:
    path = write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    path.write_bytes(path.read_bytes() + b"garbage-not-a-frame")
    response = site.client().get("/api/session.export", params={"sessionId": "s1"})
    assert response.status_code == 500 and response.text == PREPARE_FAILED


def test_late_checksum_failure_breaks_the_body(site: Site) -> None:
    """A checksum failure past the first read chunk is found while streaming: the body breaks."""
    path = write_log(site.root, header("s1"), [[user(0, "q" * 200_000)], [user(1, "last")]])
    site.index()
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(Exception, match="checksum"):
        site.client().get("/api/session.export", params={"sessionId": "s1"})


def test_root_header_mismatch_is_500(site: Site) -> None:
    path = write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(line(header("other"))))
    response = site.client().get("/api/session.export", params={"sessionId": "s1"})
    assert response.status_code == 500 and response.text == PREPARE_FAILED


def test_torn_final_frame_omitted(site: Site) -> None:
    path = write_log(site.root, header("s1"), [simple_turn(0, "one")])
    site.index()
    good = log_text(path)
    torn = zstandard.ZstdCompressor(write_checksum=True).compress(line(user(50, "torn")))[:-6]
    path.write_bytes(path.read_bytes() + torn)
    response = site.client().get("/api/session.export", params={"sessionId": "s1"})
    assert unzip(response.content)["session.jsonl"].decode() == good


def test_no_attachment_store_is_500(site: Site) -> None:
    write_log(site.root, header("s1"), [simple_turn()])
    site.index()
    client = site.client(attachments=None)
    response = client.get("/api/session.export", params={"sessionId": "s1"})
    assert response.status_code == 500 and "attachments" in response.text


# --------------------------------------------------------------------------- slices


@pytest.mark.parametrize("offset", [-2, -1, 0, 1])
def test_astral_character_across_slice_boundary(site: Site, offset: int) -> None:
    # Place "😀" so that it straddles the 65,536-unit boundary of the text.
    prefix = line(header("s1")).decode()
    probe = json.dumps(user(0, "X"), ensure_ascii=False, separators=(",", ":"))
    before = probe.index("X")
    pad = 65_536 - len(prefix) - before + offset
    text = "a" * pad + "😀" + "b" * 70_000 + "é漢😀"
    path = write_log(site.root, header("s1"), [[user(0, text)]])
    site.index()
    response = site.client().get("/api/session.export", params={"sessionId": "s1"})
    exported = unzip(response.content)["session.jsonl"]
    assert exported == log_text(path).encode()
    assert text in exported.decode()


def test_small_slices_are_byte_exact(site: Site) -> None:
    text = "".join(chr(c) for c in (0x61, 0xE9, 0x6F22, 0x1F600, 0x10FFFF)) * 5000
    path = write_log(site.root, header("s1"), [[user(0, text)], [user(1, text[::-1])]])
    site.index()
    app = site.client()
    app.app.state.exporter.slice_units = 7
    exported = unzip(app.get("/api/session.export", params={"sessionId": "s1"}).content)["session.jsonl"]
    assert exported == log_text(path).encode()


def test_long_bmp_content_round_trips(site: Site) -> None:
    text = "漢字" * 100_000
    path = write_log(site.root, header("s1"), [[user(0, text)]])
    site.index()
    exported = unzip(site.client().get("/api/session.export", params={"sessionId": "s1"}).content)["session.jsonl"]
    assert exported == log_text(path).encode()


# --------------------------------------------------------------------------- media


def test_root_image_exported(site: Site) -> None:
    ref = store_image(site, PNG)
    write_log(site.root, header("s1"), [[image_user(0, [image_block(ref)])]])
    site.index()
    entries = unzip(site.client().get("/api/session.export", params={"sessionId": "s1"}).content)
    assert list(entries) == ["session.jsonl", f"media/{ref}.png"]
    assert entries[f"media/{ref}.png"] == PNG


def test_nested_wrapped_inserted_and_chunk_images(site: Site) -> None:
    refs = {name: store_image(site, name.encode() * 3) for name in ("nested", "wrapped", "inserted", "chunk", "first", "second")}
    nested = tool_result(1, "c1", "out")
    nested["data"]["message"]["content"][0]["content"].append(image_block(refs["nested"], "image/webp"))
    wrapped = user(2, "x")
    wrapped["data"] = {"message": {"content": ["not an object", image_block(refs["wrapped"], "image/jpeg")]}}
    inserted = user(3, "x")
    inserted["data"] = {"inserted": [{"content": [image_block(refs["inserted"], "image/gif")]}]}
    chunk = user(4, "x")
    chunk["data"] = {"chunk": {"type": "block-end", "block": image_block(refs["chunk"])}}
    order = image_user(5, [image_block(refs["first"]), image_block(refs["second"])])
    path = write_log(site.root, header("s1"), [[user(0, "hi"), nested, wrapped, inserted, chunk, order]])
    site.index()
    entries = unzip(site.client().get("/api/session.export", params={"sessionId": "s1"}).content)
    assert list(entries) == [
        "session.jsonl",
        f"media/{refs['nested']}.webp",
        f"media/{refs['wrapped']}.jpg",
        f"media/{refs['inserted']}.gif",
        f"media/{refs['chunk']}.png",
        f"media/{refs['second']}.png",  # LIFO scan: last item first
        f"media/{refs['first']}.png",
    ]
    assert entries[f"media/{refs['nested']}.webp"] == b"nested" * 3
    assert entries["session.jsonl"].decode() == log_text(path)


def test_shared_and_child_only_images(site: Site) -> None:
    shared = store_image(site, b"shared")
    child_only = store_image(site, b"child")
    write_log(site.root, header("root", 1), [[image_user(0, [image_block(shared)])]])
    write_log(site.root, header("kid", 2, parentSession="root", origin="subagent", delegationDepth=1), [[image_user(0, [image_block(shared)]), image_user(1, [image_block(child_only)])]])
    site.index()
    client = site.client()
    with_kids = names(client.get("/api/session.export", params={"sessionId": "root", "includeDescendants": "true"}).content)
    assert with_kids == ["session.jsonl", "subagents/kid/session.jsonl", f"media/{shared}.png", f"media/{child_only}.png"]
    alone = names(client.get("/api/session.export", params={"sessionId": "root"}).content)
    assert alone == ["session.jsonl", f"media/{shared}.png"]


def test_image_read_failure_breaks_the_body(site: Site) -> None:
    missing = "sha256:" + "ab" * 32
    write_log(site.root, header("s1"), [[image_user(0, [image_block(missing)])]])
    site.index()
    with pytest.raises(Exception, match="not in the attachment store"):
        site.client().get("/api/session.export", params={"sessionId": "s1"})


def test_backpressure_no_image_read_before_root_is_consumed(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = store_image(site, PNG)
    big = "x" * (512 * 1024)
    write_log(site.root, header("s1"), [[image_user(0, [image_block(ref)]), user(1, big)]])
    site.index()
    reads: list[str] = []
    original = AttachmentStore.read_image

    def counting(self: AttachmentStore, r: dict, *args: object) -> object:
        reads.append(r["attachmentId"])
        return original(self, r, *args)

    monkeypatch.setattr(AttachmentStore, "read_image", counting)
    client = site.client(compression_level=0)
    exporter: Exporter = client.app.state.exporter
    prepared = exporter.prepare("s1")
    assert prepared is not None
    body = exporter.stream("s1", prepared[1], False, prepared[0].path)
    first = next(body)
    assert reads == [] and len(first) < 200_000
    rest = b"".join(body)
    assert reads == [ref]
    assert unzip(first + rest)[f"media/{ref}.png"] == PNG


def test_closing_the_body_releases_the_log(site: Site) -> None:
    write_log(site.root, header("s1"), [[user(0, "y" * 300_000)]])
    site.index()
    client = site.client(compression_level=0)
    exporter: Exporter = client.app.state.exporter
    artifact, slices = exporter.prepare("s1")  # type: ignore[misc]
    body = exporter.stream("s1", slices, False)
    next(body)
    next(body)  # the read-ahead thread is running
    body.close()
    assert artifact._fh is None
    assert not any(thread.name == "sessionq-readahead" for thread in threading.enumerate())  # stopped, not left behind


def test_zip64_entries_for_large_artifacts(site: Site) -> None:
    """Artifacts at or above the size threshold are written as ZIP64 entries (no 2 GiB cap)."""
    paths = lineage(site)
    client = site.client()
    client.app.state.exporter.zip64_threshold = 0
    data = client.get("/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"}).content
    entries = unzip(data)
    assert entries["session.jsonl"].decode() == log_text(paths["session-root"])
    assert entries["subagents/child-b/session.jsonl"].decode() == log_text(paths["child-b"])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert all(info.extract_version >= 45 for info in archive.infolist())  # ZIP64
    small = client.app.state.exporter
    small.zip64_threshold = 1 << 40
    with zipfile.ZipFile(io.BytesIO(client.get("/api/session.export?sessionId=session-root").content)) as archive:
        assert all(info.extract_version < 45 for info in archive.infolist())


def _media_case(site: Site) -> dict[str, str]:
    refs = {name: store_image(site, name.encode() * 3) for name in ("early", "late", "kid", "again")}
    late = tool_result(2, "c1", "z" * 5000)
    late["data"]["message"]["content"][0]["content"].append(image_block(refs["late"], "image/webp"))
    write_log(site.root, header("root", 1), [[image_user(0, [image_block(refs["early"])]), user(1, "w" * 4000), late, image_user(3, [image_block(refs["again"]), image_block(refs["early"])])]])
    write_log(site.root, header("kid", 2, parentSession="root", origin="subagent", delegationDepth=1), [[user(0, "k" * 3000), image_user(1, [image_block(refs["kid"], "image/gif"), image_block(refs["late"], "image/webp")])]])
    site.index()
    return refs


@pytest.mark.parametrize("cap", [1, 20, 100, 1000, 10_000_000])
def test_image_scan_line_cap_does_not_change_the_archive(site: Site, cap: int) -> None:
    refs = _media_case(site)
    client = site.client()
    exporter: Exporter = client.app.state.exporter
    exporter.line_cap = cap
    exporter.slice_units = 37
    entries = unzip(client.get("/api/session.export", params={"sessionId": "root", "includeDescendants": "true"}).content)
    assert list(entries) == [
        "session.jsonl",
        "subagents/kid/session.jsonl",
        f"media/{refs['early']}.png",
        f"media/{refs['late']}.webp",
        f"media/{refs['again']}.png",
        f"media/{refs['kid']}.gif",
    ]
    assert entries[f"media/{refs['late']}.webp"] == b"late" * 3


def test_image_scanner_rescan_is_flagged_only_when_needed() -> None:
    from readmodel.export.artifacts import ImageScanner

    event = json.dumps({"data": {"content": [{"type": "text", "text": "x" * 500}, {"type": "image", "attachment": {"attachmentId": "sha256:1"}}]}})
    scanner = ImageScanner(line_cap=100)
    for start in range(0, len(event), 9):
        scanner.feed(event[start : start + 9])
    scanner.feed("\n" + "y" * 1000 + "\n")
    scanner.end_artifact()
    assert scanner.needs_rescan and scanner.refs == {}
    scanner.rescan(iter([event + "\n" + "y" * 1000 + "\n"]))
    assert list(scanner.refs) == ["sha256:1"] and not scanner.needs_rescan
    plain = ImageScanner(line_cap=100)
    plain.feed("q" * 1000 + "\n" + "r" * 1000)
    plain.end_artifact()
    assert not plain.needs_rescan and plain.refs == {}
