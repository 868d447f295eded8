"""The ZIP container of the export, written forward only (data-descriptor mode).

A streamed archive cannot seek back, so each entry is a local header with
zero sizes and the "data descriptor" flag, the entry's deflated bytes, then a
data descriptor holding its CRC-32 and sizes; the central directory and the
end records follow the last entry (APPNOTE 4.3).  The records are laid out as
Python's :mod:`zipfile` lays them out for a non-seekable file (versions,
flags, ZIP64 extra fields and end records), so ``unzip``, :mod:`zipfile` and
every reader of the previous exports read these archives the same way; only
the compressed bytes come from elsewhere (:mod:`readmodel.export.pipeline`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Final

ZIP64_LIMIT: Final = (1 << 31) - 1
"""Sizes and offsets above this need ZIP64 records (as :mod:`zipfile` decides)."""
_COUNT_LIMIT: Final = 0xFFFF
_DEFLATED: Final = 8
_DEFAULT_VERSION: Final = 20
_ZIP64_VERSION: Final = 45
_UNIX: Final = 3
_DATA_DESCRIPTOR: Final = 0x08
_UTF8_NAME: Final = 0x800
_EXTERNAL_ATTR: Final = 0o600 << 16  # ?rw-------, as zipfile gives entries opened for writing

_LOCAL: Final = struct.Struct("<4s2B4HL2L2H")
_DESCRIPTOR: Final = struct.Struct("<4sLLL")
_DESCRIPTOR64: Final = struct.Struct("<4sLQQ")
_CENTRAL: Final = struct.Struct("<4s4B4HL2L5H2L")
_END: Final = struct.Struct("<4s4H2LH")
_END64: Final = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64: Final = struct.Struct("<4sLQL")


class ZipLimitError(Exception):
    """An entry declared without ZIP64 outgrew the 32-bit fields (its bytes are already out)."""


@dataclass
class _Entry:
    name: bytes
    flags: int
    dostime: int
    dosdate: int
    offset: int
    version: int
    crc: int = 0
    compressed: int = 0
    size: int = 0


class ZipStream:
    """Builds the archive's records; the caller emits them in order between entry bodies.

    ``begin`` gives an entry's local header, ``end`` its data descriptor (after
    the caller emitted ``compressed`` bytes of deflate data), ``close`` the
    central directory and end records.  The stream offset is counted here, so
    every byte emitted must pass through :meth:`body`, ``begin`` or ``end``.
    """

    def __init__(self) -> None:
        self.offset = 0
        self._entries: list[_Entry] = []
        self._open: _Entry | None = None
        self._zip64 = False
        # Every entry is stamped with the time the archive was started (local time, as zipfile does).
        year, month, day, hour, minute, second = time.localtime(time.time())[:6]
        self._stamp = (hour << 11 | minute << 5 | (second // 2), (year - 1980) << 9 | month << 5 | day)

    def begin(self, name: str, zip64: bool) -> bytes:
        """The local header of a deflated entry; ``zip64`` declares 64-bit sizes up front
        (an entry of unknown size must, to be allowed past 2 GiB)."""
        if self._open is not None:
            raise RuntimeError("the previous entry was not ended")
        try:
            encoded, flags = name.encode("ascii"), _DATA_DESCRIPTOR
        except UnicodeEncodeError:
            encoded, flags = name.encode("utf-8"), _DATA_DESCRIPTOR | _UTF8_NAME
        dostime, dosdate = self._stamp
        version = _ZIP64_VERSION if zip64 else _DEFAULT_VERSION
        entry = _Entry(encoded, flags, dostime, dosdate, self.offset, version)
        extra = struct.pack("<HHQQ", 1, 16, 0, 0) if zip64 else b""
        sizes = 0xFFFFFFFF if zip64 else 0
        header = _LOCAL.pack(b"PK\x03\x04", version, 0, flags, _DEFLATED, dostime, dosdate, 0, sizes, sizes, len(encoded), len(extra)) + encoded + extra
        self._open = entry
        self._zip64 = zip64
        self.offset += len(header)
        return header

    def body(self, data: bytes) -> bytes:
        """Counts ``data`` (the open entry's deflate bytes) into the stream offset."""
        self.offset += len(data)
        return data

    def end(self, crc: int, compressed: int, size: int) -> bytes:
        """The open entry's data descriptor.  Raises :class:`ZipLimitError` when an entry
        without ZIP64 outgrew its 32-bit sizes (:mod:`zipfile` refuses those too)."""
        entry = self._open
        if entry is None:
            raise RuntimeError("no entry is open")
        if not self._zip64 and (size > ZIP64_LIMIT or compressed > ZIP64_LIMIT):
            raise ZipLimitError("an entry outgrew the ZIP format's 32-bit sizes without ZIP64")
        entry.crc, entry.compressed, entry.size = crc, compressed, size
        record = (_DESCRIPTOR64 if self._zip64 else _DESCRIPTOR).pack(b"PK\x07\x08", crc, compressed, size)
        self._entries.append(entry)
        self._open = None
        self.offset += len(record)
        return record

    def close(self) -> bytes:
        """The central directory and the end records (ZIP64 ones when counts or offsets need them)."""
        start = self.offset
        parts: list[bytes] = []
        for entry in self._entries:
            extra_values: list[int] = []
            compressed, size, offset = entry.compressed, entry.size, entry.offset
            if size > ZIP64_LIMIT or compressed > ZIP64_LIMIT:
                extra_values += [size, compressed]
                size = compressed = 0xFFFFFFFF
            if offset > ZIP64_LIMIT:
                extra_values.append(offset)
                offset = 0xFFFFFFFF
            extra = struct.pack(f"<HH{len(extra_values)}Q", 1, 8 * len(extra_values), *extra_values) if extra_values else b""
            version = max(entry.version, _ZIP64_VERSION if extra_values else 0)
            parts.append(
                _CENTRAL.pack(
                    b"PK\x01\x02", version, _UNIX, version, 0, entry.flags, _DEFLATED, entry.dostime, entry.dosdate,
                    entry.crc, compressed, size, len(entry.name), len(extra), 0, 0, 0, _EXTERNAL_ATTR, offset,
                )
                + entry.name
                + extra
            )
        directory = b"".join(parts)
        count, length, end_start = len(self._entries), len(directory), start + len(directory)
        tail = b""
        if count > _COUNT_LIMIT or start > ZIP64_LIMIT or length > ZIP64_LIMIT:
            tail = _END64.pack(b"PK\x06\x06", 44, _ZIP64_VERSION, _ZIP64_VERSION, 0, 0, count, count, length, start)
            tail += _LOCATOR64.pack(b"PK\x06\x07", 0, end_start, 1)
            count, length, start = min(count, _COUNT_LIMIT), min(length, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
        record = directory + tail + _END.pack(b"PK\x05\x06", 0, 0, count, count, length, start, 0)
        self.offset += len(record)
        return record
