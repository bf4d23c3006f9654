"""Reading an import file without holding it whole.

A JSON file is read twice, streamed both times by ijson (the yajl C parser):
the first pass checks its syntax, hashes its bytes and keeps a skeleton -- the
document with each list that holds the runs (`results`, `benchmarks`, `runs`)
cut to its first item -- from which the format is told and the small keys
(context, metadata, machine_info ...) are read, wherever they stand in the
file; the second pass hands the runs' items over one at a time. Memory is
bounded by the largest item (one hyperfine command, one perflab run), not by
the file. A file that ijson refuses is read whole by the standard json module
instead: its message and line number are those users know, and it accepts
the NaN and Infinity that Python's json writes (which the importers then
refuse with the key that holds them).

A text file is sniffed from its first 64 KiB and then read line by line.
gzip-compressed files (pyperf's FILE.json.gz) are decompressed on the fly.
"""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ijson
from ijson.common import ObjectBuilder

from perflab.core.errors import PerflabError
from perflab.exchange.importers.base import Node

# Top-level keys whose list holds the runs, one item per run (or per entry).
STREAMED = ("results", "benchmarks", "runs")
HEAD_BYTES = 64 * 1024
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
_START = frozenset(("start_map", "start_array"))
_END = frozenset(("end_map", "end_array"))


class NotText(Exception):
    """The file (decompressed) is not UTF-8 text."""


class BadGzip(Exception):
    """A gzip file that cannot be decompressed."""


class _Whole(Exception):
    """A document to read whole with the json module rather than stream."""


class Changed(PerflabError):
    """The file changed between the two passes of an import."""


class _Hashing(io.RawIOBase):
    """A raw reader that hashes every byte it reads (the file's digest names its runs)."""

    def __init__(self, f):
        self.f = f
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self.f.readinto(buf)
        if n:
            self.sha.update(memoryview(buf)[:n])
        return n or 0

    def drain(self) -> str:
        """Read what is left and return the digest of the whole file."""
        while self.f.read(_CHUNK):
            pass
        return self.sha.hexdigest()

    def hexdigest(self) -> str:
        return self.sha.hexdigest()


class _SkipBOM(io.RawIOBase):
    """A byte stream without its leading UTF-8 byte-order mark (yajl refuses it)."""

    def __init__(self, f):
        self.f = f
        head = f.read(3)
        self.pending = head[3:] if head.startswith(_BOM) else head

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self.pending:
            n = min(len(buf), len(self.pending))
            buf[:n] = self.pending[:n]
            self.pending = self.pending[n:]
            return n
        data = self.f.read(len(buf))
        buf[: len(data)] = data
        return len(data)


@dataclass
class Opened:
    """A file ready to be read: what it is and how to read it again."""

    path: str
    kind: str  # "json" or "text"
    digest: str
    mtime: dt.datetime
    head: str = ""  # the first 64 KiB of a text file, for sniffing
    doc: "Document | None" = None  # JSON that parsed
    json_error: json.JSONDecodeError | None = None  # JSON that did not (then `text` holds the file)
    text: str | None = None
    _reopen: Callable | None = None  # -> (hashing reader, decoded byte stream)
    _source: str | bytes = b""  # the path, or the bytes of a pipe
    _gz: bool = False

    def lines(self) -> Iterator[str]:
        """The lines of a text file, read as they are needed."""
        try:
            hashing, stream = self._reopen()
            reader = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="strict", newline=None)
            for line in reader:
                yield line.rstrip("\n")
        except UnicodeDecodeError:
            raise NotText() from None
        except (OSError, EOFError, zlib.error) as e:
            if not self._gz:
                raise  # a read error of the file itself: the CLI names the file and the error
            raise BadGzip(str(e)) from None
        if hashing.drain() != self.digest:
            raise Changed(f"{self.path}: the file changed while it was being imported; nothing of it was imported")

    def whole_text(self) -> str:
        """The whole file as text (universal newlines are not applied: a CSV field keeps its CR LF)."""
        if self.text is None:
            self.text = _read_all(self._source, self._gz)
        return self.text


class Document:
    """A JSON document: its skeleton for navigation, and its streamed lists item by item."""

    def __init__(self, header, counts: dict[str, int], stream: Callable[[str], Iterator]):
        self.header = header
        self.counts = counts
        self._stream = stream

    @property
    def root(self) -> Node:
        return Node(self.header)

    def count(self, key: str) -> int:
        value = self.header.get(key) if isinstance(self.header, dict) else None
        return self.counts.get(key, len(value) if isinstance(value, list) else 0)

    def items(self, key: str) -> Iterator[Node]:
        """The items of the top-level list `key` (a Problem if it is missing or not a list)."""
        self.root.get(key, "list")
        if key not in self.counts:
            yield from self.root.get(key).items()
            return
        for i, value in enumerate(self._stream(key)):
            yield Node(value, f"{key}[{i}]")


def _layers(source, gz: bool):
    """(hashing reader, decompressed stream without BOM) over a path or bytes."""
    f = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")
    hashing = _Hashing(f)
    stream = io.BufferedReader(hashing, _CHUNK)
    if gz:
        stream = gzip.GzipFile(fileobj=stream, mode="rb")
    return hashing, io.BufferedReader(_SkipBOM(stream), _CHUNK)


def _skeleton(stream, check: Callable[[], None]) -> tuple[object, dict[str, int]]:
    """One pass over the JSON events: the document with its STREAMED lists cut
    to their first item, and their lengths. Raises ijson's errors."""
    events = ijson.basic_parse(stream, use_float=True)
    first = next(events, None)
    if first is None:
        raise ijson.common.IncompleteJSONError("no JSON value")
    if first[0] != "start_map":
        # Not an object: no format of ours; only its kind is needed, and its syntax checked.
        for n, _ in enumerate(events):
            if not n & 0xFFFF:
                check()
        return ([] if first[0] == "start_array" else first[1]), {}
    header, counts = {}, {}
    ticks = 0
    for event, key in events:
        if event == "end_map":
            break
        event, value = next(events)
        if key in STREAMED and event == "start_array":
            if key in counts:
                # ijson would stream the items of both lists; json.loads keeps the last one.
                raise _Whole()
            count, depth, builder, kept = 0, 0, None, []
            for event, value in events:
                ticks += 1
                if not ticks & 0xFFFF:
                    check()
                if event in _END:
                    if depth == 0:
                        break
                    depth -= 1
                    if builder is not None:
                        builder.event(event, value)
                        if depth == 0:
                            kept.append(builder.value)
                            builder = None
                    continue
                if depth == 0:
                    count += 1
                    if count == 1:
                        builder = ObjectBuilder()
                if builder is not None:
                    builder.event(event, value)
                if event in _START:
                    depth += 1
                elif depth == 0 and builder is not None:
                    kept.append(builder.value)  # a scalar item
                    builder = None
            header[key] = kept
            counts[key] = count
            continue
        builder = ObjectBuilder()
        builder.event(event, value)
        if event in _START:
            depth = 1
            for event, value in events:
                ticks += 1
                if not ticks & 0xFFFF:
                    check()
                builder.event(event, value)
                if event in _START:
                    depth += 1
                elif event in _END:
                    depth -= 1
                    if depth == 0:
                        break
        header[key] = builder.value
        counts.pop(key, None)  # a later non-list value replaces the list, as json.loads does
    for _ in events:  # trailing garbage is a syntax error
        pass
    return header, counts


def _read_all(source, gz: bool) -> str:
    """The whole file as text (the path for files ijson refused)."""
    raw = source if isinstance(source, bytes) else open(source, "rb").read()
    data = raw
    if gz:
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise BadGzip(str(e)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise NotText() from None


def open_file(path: str, check: Callable[[], None] = lambda: None) -> Opened:
    """Find out what a file is and read what telling its format needs.

    Raises OSError (missing file ...), NotText, BadGzip, Problem (a document
    ijson reads but no importer could stream).
    """
    st = os.stat(path)
    mtime = dt.datetime.fromtimestamp(st.st_mtime, dt.UTC).replace(tzinfo=None)
    # A pipe (`perflab import <(go test -bench .)`) cannot be read twice: hold its bytes.
    source = path if stat.S_ISREG(st.st_mode) else open(path, "rb").read()
    with (io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")) as f:
        gz = f.read(2) == b"\x1f\x8b"

    def reopen():
        return _layers(source, gz)

    try:
        hashing, stream = reopen()
        head_bytes = stream.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        raise BadGzip(str(e)) from None
    try:
        head = codecs.getincrementaldecoder("utf-8")().decode(head_bytes, final=len(head_bytes) < HEAD_BYTES)
    except UnicodeDecodeError:
        raise NotText() from None

    stripped = head.lstrip()
    if not stripped.startswith(("{", "[")):
        digest = hashing.drain()
        return Opened(path, "text", digest, mtime, head=head, _reopen=reopen, _source=source, _gz=gz)

    try:
        hashing, stream = reopen()
        header, counts = _skeleton(stream, check)
        digest = hashing.drain()
    except (ijson.JSONError, UnicodeDecodeError, RecursionError, _Whole):
        return _parse_whole(path, source, gz, mtime)
    except (OSError, EOFError, zlib.error) as e:
        raise BadGzip(str(e)) from None

    def stream_items(key: str) -> Iterator:
        try:
            hashing, stream = reopen()
            yield from ijson.items(stream, f"{key}.item", use_float=True)
            again = hashing.drain()
        except (ijson.JSONError, UnicodeDecodeError, OSError, EOFError, zlib.error):
            again = None
        if again != digest:
            raise Changed(f"{path}: the file changed while it was being imported; nothing of it was imported")

    return Opened(path, "json", digest, mtime, doc=Document(header, counts, stream_items), _reopen=reopen,
                  _source=source, _gz=gz)


def _parse_whole(path: str, source, gz: bool, mtime: dt.datetime) -> Opened:
    text = _read_all(source, gz)
    raw = source if isinstance(source, bytes) else open(source, "rb").read()
    digest = hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return Opened(path, "json", digest, mtime, json_error=e, text=text)
    except RecursionError:
        return Opened(path, "json", digest, mtime, json_error=json.JSONDecodeError("nested too deeply", text, 0), text=text)
    return Opened(path, "json", digest, mtime, doc=Document(doc, {}, lambda key: iter(())))
