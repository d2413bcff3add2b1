"""Pages of a thread (thread/read, resume's newest messages) that cost O(page), whatever
the depth or the file's size.

Thread files are append-only and their seqs increase line by line (docs/storage.md), so a
sparse map of (seq, byte offset) anchors is enough to seek: a page parses from the anchor
before it and stops once it is full, instead of parsing the whole file. The map holds one
anchor per `ANCHOR_BYTES` of file, each found by reading a short window there (the first
whole good line after the boundary), so building it for a 100k-item thread costs a few
hundred small reads, not a parse of the thread.

The map is derived state. It is kept beside the thread's snapshot
(`snapshots/<id[:2]>/<id>.offsets`) and in memory while the process reads the thread;
before every use it is checked against the file by its last anchor's line (position and
sha256, `LineMark`), extended over the bytes appended since, and rebuilt from the file when
it is missing, corrupt or stale. Deleting it changes no answer. A file whose seqs do not
increase (only hand-made damage does that) is paged by scanning it from the start, which
gives the same answers the slow way.

Which bad lines a page reports (`skippedLines`): each bad line belongs to the next good
item after it, and the bad lines after the last item to the end of the file. A page
reports the bad lines of the items it returns, and the end's when it reaches the end, so
successive pages in either direction report every bad line once and a page reads only the
bytes it covers. Line numbers are counted only when a page has bad lines to report.

Pages are cut by bytes as well as by count, so an answer stays under the frame limit; an
item that cannot fit in any answer is a PayloadTooLarge naming its seq, and the cursor
just past it lets a client go on.

Thread-safe: the server reads pages off the store thread (a long read never holds another
client's record), and the store thread uses it for resume.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError, storage_error, thread_not_found
from restore.home.files import private_dirs, read_regular, write_atomically
from restore.home.layout import Layout
from restore.ids import validate_thread_id
from restore.stores.embedded.files import open_thread_file
from restore.stores.embedded.jsonl import BOM, LineMark, decode_line

ANCHOR_BYTES = 64 * 1024
"""One anchor per this many bytes: a page parses at most this much beyond its own items."""
MAP_VERSION = 1
SAVE_AFTER_ANCHORS = 16  # a map that grew by this many anchors is written again
ANSWER_OVERHEAD = 512  # the JSON-RPC envelope, the cursor and the keys around a page
_WINDOW = 8 * 1024  # read per anchor probe
_CHUNK = 256 * 1024  # read per step of counting lines, and of long lines
_FIRST_READ, _MAX_READ = 32 * 1024, 1024 * 1024  # a page's reads: small first, then doubling
_MAX_ANCHOR_LINE = 16 * 1024 * 1024  # longer lines are not worth reading for an anchor
_PROBE_LINES = 8  # bad lines tried after a boundary before giving up on its anchor
_CACHED_MAPS = 256
_NO_SEQ_ABOVE = 1 << 62  # a seq (and a byte budget) no thread reaches


@dataclass(slots=True)
class _Line:
    start: int
    """File offset of a bad line (a good line read in bulk does not need one: -1)."""
    end: int  # just past its newline (or the end of the file); -1 likewise
    item: dict[str, Any] | None
    raw: bytes = b""
    """A good line's JSON text, as sent in an answer (so its size there is exact)."""
    reason: str = ""
    preview: str = ""

    def skipped(self, line_no: int) -> dict[str, Any]:
        return {
            "lineNo": line_no,
            "byteOffset": self.start,
            "reason": self.reason,
            "preview": self.preview,
        }


@dataclass(slots=True)
class _Entry:
    """A good line and the bad lines it owns (those between it and the good line before)."""

    line: _Line
    bad: list[_Line]
    cost: int = 0
    """Bytes it adds to an answer."""

    def __post_init__(self) -> None:
        self.cost = len(self.line.raw) + 1 + (_bad_cost(self.bad) if self.bad else 0)


@dataclass
class Page:
    next_seq: int | None
    """nextAfterSeq going forward, nextBeforeSeq going back; None at the end."""
    skipped: list[dict[str, Any]]
    raw: list[bytes] = field(default_factory=list)
    """The items' JSON text as in the file: an answer embeds it rather than encode again."""
    source: tuple[int, int, int] | None = None
    """(device, inode, size) of the file the page was read from: see `ThreadPages.holds`."""

    @property
    def items(self) -> list[dict[str, Any]]:
        """The items, decoded on demand: an answer sends `raw`, and keeping 10,000 decoded
        items per page alive made the garbage collector walk them (~20% of a page's time)."""
        return [orjson.loads(raw) for raw in self.raw]


@dataclass
class OffsetMap:
    """Anchors: the good line at `offsets[i]` has seq `seqs[i]`; both increase."""

    seqs: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    sampled: int = 0
    """Every anchor boundary below this offset has been probed."""
    mark: LineMark | None = None
    """The last anchor's line: while it holds, so do all the anchors."""
    ordered: bool = True
    """False once a page saw seqs that do not increase: page by scanning from the start."""
    line_numbers: dict[int, int] = field(default_factory=dict)
    """Newlines before an offset, for bad lines' line numbers (counted on demand)."""
    unsaved: int = 0

    def matches(self, fd: int, size: int) -> bool:
        return self.sampled <= size and (self.mark is None or self.mark.holds(fd))

    def to_json(self, thread_id: str) -> bytes:
        mark = self.mark
        return orjson.dumps(
            {
                "v": MAP_VERSION,
                "threadId": thread_id,
                "sampled": self.sampled,
                "mark": None if mark is None else [mark.start, mark.end, mark.sha],
                "ordered": self.ordered,
                "seqs": self.seqs,
                "offsets": self.offsets,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, thread_id: str) -> OffsetMap | None:
        """None for anything but a map of this version and thread (it is then rebuilt)."""
        try:
            raw = orjson.loads(data)
            if raw["v"] != MAP_VERSION or raw["threadId"] != thread_id:
                return None
            seqs, offsets = [int(s) for s in raw["seqs"]], [int(o) for o in raw["offsets"]]
            mark = None if raw["mark"] is None else LineMark(*raw["mark"])
            loaded = cls(seqs, offsets, int(raw["sampled"]), mark, bool(raw["ordered"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        increasing = all(a < b for a, b in itertools.pairwise(seqs)) and all(
            a < b for a, b in itertools.pairwise(offsets)
        )
        if len(seqs) != len(offsets) or not increasing or (seqs and mark is None):
            return None
        return loaded


@dataclass
class _Anchors:
    """A consistent copy of a map's anchors for one page (the map may grow meanwhile).

    An anchor is checked against the file when a page first seeks to it (the line there
    must be the item it names), so a map that is well formed but wrong (bytes damaged in
    a way its checks miss) is caught before it can give a wrong page."""

    fd: int
    seqs: list[int]
    offsets: list[int]
    ordered: bool
    source: OffsetMap
    checked: set[int] = field(default_factory=set)

    def at(self, index: int) -> int:
        """The offset of anchor `index` (0: the file's start for index -1)."""
        if index < 0 or not self.ordered:
            return 0
        offset = self.offsets[index]
        if index not in self.checked:
            if os.pread(self.fd, 1, offset - 1) != b"\n":
                raise _WrongMap
            line = _whole_line(self.fd, offset, offset + _MAX_ANCHOR_LINE)
            item = decode_line(line.rstrip(b"\n"))[0] if isinstance(line, bytes) else None
            if item is None or item["seq"] != self.seqs[index]:
                raise _WrongMap
            self.checked.add(index)
        return offset

    def start_at_or_before(self, seq: int) -> int:
        """Where to parse from so that the item `seq` and the bad lines it owns are read:
        the last anchor whose seq is at most `seq`."""
        if not self.ordered:
            return 0
        return self.at(bisect.bisect_right(self.seqs, seq) - 1)

    def unordered(self) -> _Anchors:
        """The file's seqs do not increase: from now on it is scanned from its start."""
        self.source.ordered = False
        return self.without()

    def without(self) -> _Anchors:
        """No anchors: pages scan from the file's start (correct for any file)."""
        return _Anchors(self.fd, [], [], False, self.source)


class _Unordered(Exception):
    """Seqs that do not increase in file order: the anchors cannot be trusted to seek."""


class _WrongMap(Exception):
    """An anchor does not point at the item it names: the map is rebuilt."""


def _storage_error(exc: OSError, thread_id: str, path: Path | None = None) -> ProtocolError:
    error = storage_error(exc, path, "cannot read thread file")
    error.details["threadId"] = thread_id
    return error


def _too_large(line: _Line, budget: int) -> ProtocolError:
    assert line.item is not None
    return too_large(line.item["seq"], len(line.raw), budget)


def too_large(seq: int, size: int, budget: int) -> ProtocolError:
    """An item that fits in no answer, named, with where to page on from (both stores)."""
    return ProtocolError(
        ErrorKind.PAYLOAD_TOO_LARGE,
        f"item seq {seq} ({size} bytes) does not fit in one answer of at most "
        f"{budget} bytes; page past it from seq {seq}",
        seq=seq,
        size=size,
        limit=budget,
    )


def _bad_cost(bad: list[_Line]) -> int:
    return sum(len(line.preview.encode()) + 96 for line in bad)


class ThreadPages:
    """Pages of thread files, through offset maps cached in memory and kept on disk."""

    def __init__(self, layout: Layout, anchor_bytes: int = ANCHOR_BYTES) -> None:
        self.layout = layout
        self.anchor_bytes = anchor_bytes
        self._maps: OrderedDict[str, OffsetMap] = OrderedDict()  # by file path
        self._lock = threading.Lock()

    # --- pages ----------------------------------------------------------------------------

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        """Forward (`after`: the first `limit` items with seq > after) or back (`before`:
        the last `limit` items with seq < before); items ascending either way."""
        thread_id = validate_thread_id(thread_id)
        with _OpenFile(self.layout, thread_id) as (fd, path):
            try:
                stat = os.fstat(fd)
                result = self._read(thread_id, path, fd, stat.st_size, after, before, limit,
                                    max_bytes)  # fmt: skip
            except OSError as exc:
                raise _storage_error(exc, thread_id, path) from exc
        result.source = (stat.st_dev, stat.st_ino, stat.st_size)
        return result

    def _read(
        self,
        thread_id: str,
        path: Path,
        fd: int,
        size: int,
        after: int | None,
        before: int | None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        page = (after, before, limit, max_bytes)
        for _ in (1, 2):
            anchors = self._anchors(thread_id, path, fd, size)
            try:
                return self._page(fd, size, anchors, *page)
            except _Unordered:
                return self._page(fd, size, anchors.unordered(), *page)
            except _WrongMap:
                self._drop(thread_id, path)
        # Rebuilt and wrong again: the file is changing under us. Scan it instead.
        return self._page(fd, size, anchors.without(), *page)

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The items after seq `after`, ascending, each with its seq, cut like a forward
        page; True when more follow. For followers (server/relay.py): a thread that is
        gone has nothing after; bad lines are not items and are left out."""
        try:
            page = self.read(thread_id, after=after, limit=limit, max_bytes=max_bytes)
        except ProtocolError as exc:
            if exc.kind is ErrorKind.THREAD_NOT_FOUND:
                return [], False
            raise
        return [(orjson.loads(raw)["seq"], raw) for raw in page.raw], page.next_seq is not None

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0 when it has none); ThreadNotFound if none
        such. Read from the file's end, whatever its length."""
        page = self.read(thread_id, before=_NO_SEQ_ABOVE, limit=1, max_bytes=_NO_SEQ_ABOVE)
        return orjson.loads(page.raw[-1])["seq"] if page.raw else 0

    def holds(self, thread_id: str, page: Page, backward: bool) -> bool:
        """Whether a page read earlier is still what a read now would answer: the thread's
        file is the same file (device, inode), and no shorter. Items before a seq never
        change in an append-only file, so a backward page holds while the file only grew;
        a forward page may end at the end of the file, so it holds only at the same size."""
        found = self.layout.locate(validate_thread_id(thread_id))
        if found is None or page.source is None:
            return False
        try:
            stat = os.stat(found[0], follow_symlinks=False)
        except OSError:
            return False
        device, inode, size = page.source
        grown_only = stat.st_size >= size if backward else stat.st_size == size
        return (stat.st_dev, stat.st_ino) == (device, inode) and grown_only

    def _page(
        self,
        fd: int,
        size: int,
        anchors: _Anchors,
        after: int | None,
        before: int | None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        budget = max_bytes - ANSWER_OVERHEAD
        if before is not None:
            return self._backward(fd, size, anchors, before, limit, budget)
        return self._forward(fd, size, anchors, after or 0, limit, budget)

    def pick(
        self, thread_id: str, path: Path, seqs: list[int], max_bytes: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """The items with these seqs (ascending), newest first within `max_bytes`; True when
        older ones were left out for the budget. Reads from the oldest seq's anchor on."""
        if not seqs:
            return [], False
        fd = open_thread_file(path, os.O_RDONLY, thread_id)  # a regular file, no symlink
        try:
            size = os.fstat(fd).st_size
            anchors = self._anchors(thread_id, path, fd, size)
            try:
                start = anchors.start_at_or_before(seqs[0])
            except _WrongMap:
                self._drop(thread_id, path)
                anchors = self._anchors(thread_id, path, fd, size)
                start = anchors.start_at_or_before(seqs[0])
            wanted = set(seqs)
            found: list[_Line] = []
            for line in _scan(fd, start, size, whole_items=True):
                if line.item is None:
                    continue
                seq = line.item["seq"]
                if seq > seqs[-1] and anchors.ordered:
                    break
                if seq in wanted:
                    wanted.discard(seq)
                    found.append(line)
        except OSError as exc:
            raise _storage_error(exc, thread_id, path) from exc
        finally:
            os.close(fd)
        budget = max_bytes - ANSWER_OVERHEAD
        kept: list[dict[str, Any]] = []
        for line in reversed(found):
            budget -= len(line.raw) + 1
            if budget < 0:
                break
            kept.append(line.item)  # type: ignore[arg-type]
        kept.reverse()
        return kept, len(kept) < len(found)

    def forget(self, thread_id: str) -> None:
        """The thread is gone: drop its map (memory and disk)."""
        with self._lock:
            for key in [k for k in self._maps if Path(k).stem == thread_id]:
                del self._maps[key]
        self.layout.offsets_path(thread_id).unlink(missing_ok=True)

    def _drop(self, thread_id: str, path: Path) -> None:
        """A map found wrong: the next use rebuilds it from the file."""
        with self._lock:
            self._maps.pop(str(path), None)
        self.layout.offsets_path(thread_id).unlink(missing_ok=True)

    def _forward(
        self, fd: int, size: int, anchors: _Anchors, after: int, limit: int, budget: int
    ) -> Page:
        used = 0
        chosen: list[_Entry] = []
        bad: list[_Line] = []
        more = False
        previous = None
        for line in _scan(fd, anchors.start_at_or_before(after), size):
            if line.item is None:
                bad.append(line)
                continue
            seq = line.item["seq"]
            if anchors.ordered:
                if previous is not None and seq <= previous:
                    raise _Unordered
                previous = seq
            if seq <= after:
                bad = []  # they belong to an item of an earlier page
                continue
            if len(chosen) == limit:
                more = True
                break
            entry = _Entry(line, bad)
            if used + entry.cost > budget:
                if not chosen:
                    raise _too_large(line, budget)
                more = True
                break
            chosen.append(entry)
            used += entry.cost
            bad = []
        next_seq = chosen[-1].line.item["seq"] if more else None  # type: ignore[index]
        if not more:  # the end of the file: its bad lines come with this page
            chosen.append(_Entry(_Line(size, size, None), bad))
        return self._unpack(fd, anchors, chosen, next_seq)

    def _backward(
        self, fd: int, size: int, anchors: _Anchors, before: int, limit: int, budget: int
    ) -> Page:
        # Scan a stretch ending at the anchor after `before` (its item and the bad lines
        # before it belong to later pages) or at the end of the file, and starting at the
        # anchor `limit` seqs earlier (seqs go up by one a record, so that is usually
        # enough); step further back (twice as far each time) until the stretch holds one
        # item more than the page, or reaches the file's start.
        after_before = bisect.bisect_left(anchors.seqs, before)
        later = after_before < len(anchors.seqs)
        end = anchors.at(after_before) if later else size
        anchor = min(after_before, bisect.bisect_right(anchors.seqs, before - limit - 1)) - 1
        step, first = 1, True
        entries: list[_Entry] = []
        tail: list[_Line] = []  # the end's bad lines, when the scan reached the end
        while True:
            start = anchors.at(anchor)
            found, leftover = _collect_before(fd, start, end, before, anchors.ordered)
            if first:
                tail = (leftover or []) if not later else []
            elif entries and leftover:  # bad lines ending an older stretch: the next item's
                entries[0].bad[:0] = leftover
                entries[0].cost += _bad_cost(leftover)
            entries[:0] = found
            if start == 0 or len(entries) > limit:
                break
            end, anchor, step, first = start, anchor - step, step * 2, False
        budget -= _bad_cost(tail)
        used = 0
        chosen: list[_Entry] = []
        for entry in reversed(entries):
            if len(chosen) == limit:
                break
            if used + entry.cost > budget:
                if not chosen:
                    raise _too_large(entry.line, budget)
                break
            chosen.append(entry)
            used += entry.cost
        chosen.reverse()
        more = (len(chosen) < len(entries) or start > 0) and bool(chosen)
        next_seq = chosen[0].line.item["seq"] if more else None  # type: ignore[index]
        chosen.append(_Entry(_Line(size, size, None), tail))
        return self._unpack(fd, anchors, chosen, next_seq)

    def _unpack(
        self, fd: int, anchors: _Anchors, entries: list[_Entry], next_seq: int | None
    ) -> Page:
        """The page of these entries (the last one may be the end's, with no item)."""
        good = [e.line for e in entries if e.line.item is not None]
        bad = [line for e in entries for line in e.bad]
        numbers = self._line_numbers(fd, anchors.source, [line.start for line in bad])
        skipped = [line.skipped(number) for line, number in zip(bad, numbers, strict=True)]
        return Page(next_seq, skipped, [line.raw for line in good])

    def _line_numbers(self, fd: int, offsets: OffsetMap, starts: list[int]) -> list[int]:
        """1-based line numbers of the lines starting at `starts` (ascending), counted
        from the nearest offset counted before: only pages with bad lines pay for it."""
        if not starts:
            return []
        with self._lock:
            at = max((o for o in offsets.line_numbers if o <= starts[0]), default=0)
            count = offsets.line_numbers.get(at, 0)
        numbers = []
        for start in starts:
            while at < start:
                chunk = os.pread(fd, min(_CHUNK * 4, start - at), at)
                if not chunk:
                    break
                count += chunk.count(b"\n")
                at += len(chunk)
            numbers.append(count + 1)
        with self._lock:
            offsets.line_numbers[at] = count
        return numbers

    # --- the offset map ---------------------------------------------------------------------

    def _anchors(self, thread_id: str, path: Path, fd: int, size: int) -> _Anchors:
        """The thread's map, verified against the file and extended to its end."""
        key = str(path)
        with self._lock:
            offsets = self._maps.pop(key, None) or self._load(thread_id)
            rebuilt = offsets is None or not offsets.matches(fd, size)
            if offsets is None or rebuilt:
                offsets = OffsetMap()
            added = _sample(fd, size, offsets, self.anchor_bytes)
            offsets.unsaved += added
            if offsets.seqs and ((rebuilt and added) or offsets.unsaved >= SAVE_AFTER_ANCHORS):
                self._save(thread_id, offsets)
            self._maps[key] = offsets
            while len(self._maps) > _CACHED_MAPS:
                self._maps.popitem(last=False)
            return _Anchors(fd, list(offsets.seqs), list(offsets.offsets), offsets.ordered, offsets)

    def _load(self, thread_id: str) -> OffsetMap | None:
        try:
            data = read_regular(self.layout.offsets_path(thread_id))
        except OSError:
            return None
        return OffsetMap.from_json(data, thread_id)

    def _save(self, thread_id: str, offsets: OffsetMap) -> None:
        """Best effort: the map is an accelerator, and a read must not fail for it."""
        try:
            path = self.layout.offsets_path(thread_id)
            private_dirs(path.parent)
            write_atomically(path, offsets.to_json(thread_id))
            offsets.unsaved = 0
        except OSError:
            pass


class _OpenFile:
    """A thread's file opened for reading; a move (archive) between locating and opening
    it is retried once."""

    def __init__(self, layout: Layout, thread_id: str) -> None:
        self.layout = layout
        self.thread_id = thread_id
        self.fd = -1

    def __enter__(self) -> tuple[int, Path]:
        for attempt in (1, 2):
            found = self.layout.locate(self.thread_id)
            if found is None:
                break
            path = found[0]
            try:  # a regular file, reached without a symlink (restore/store.py)
                self.fd = open_thread_file(path, os.O_RDONLY, self.thread_id)
                return self.fd, path
            except ProtocolError:
                if attempt == 2 or os.path.lexists(path):
                    raise
        raise thread_not_found(self.thread_id)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def _collect_before(
    fd: int, start: int, end: int, before: int, ordered: bool
) -> tuple[list[_Entry], list[_Line] | None]:
    """Good lines with seq < `before` in [start, end), each with the bad lines it owns, and
    the bad lines left after the last of them (None when a newer item owns them)."""
    entries: list[_Entry] = []
    bad: list[_Line] = []
    previous = None
    for line in _scan(fd, start, end):
        if line.item is None:
            bad.append(line)
            continue
        seq = line.item["seq"]
        if ordered:
            if previous is not None and seq <= previous:
                raise _Unordered
            previous = seq
        if seq >= before:
            if ordered:
                return entries, None  # everything from here on is newer
            bad = []
            continue
        entries.append(_Entry(line, bad))
        bad = []
    return entries, bad


def _scan(fd: int, start: int, end: int, whole_items: bool = False) -> Iterator[_Line]:
    """The non-blank lines in [start, end), read in chunks; `start` is a line start.

    Every page runs this over every line it reads, so a chunk's whole lines are parsed in
    one `map` of `orjson.loads` over them; only a chunk with a line that is not a good item
    (rare: damage) is taken line by line, with offsets."""
    at = start
    if start == 0 and os.pread(fd, len(BOM), 0) == BOM:
        at = len(BOM)
    parts: list[bytes] = []  # a line cut by a chunk boundary, so far
    base = at  # file offset of the first unconsumed byte
    step = _FIRST_READ  # a page of a few items stops early; a long read grows its reads
    while at < end:
        chunk = os.pread(fd, min(step, end - at), at)
        step = min(step * 2, _MAX_READ)
        if not chunk:
            break  # truncated meanwhile: what was read is what there is
        at += len(chunk)
        if parts and b"\n" not in chunk:
            parts.append(chunk)
            continue
        data = b"".join([*parts, chunk]) if parts else chunk
        whole = data.rfind(b"\n") + 1
        parts = [data[whole:]] if whole < len(data) else []
        if whole:
            yield from _lines(data[: whole - 1], base, whole_items)
        base += whole
    if parts:
        raw = b"".join(parts)
        item, _ = decode_line(raw)
        line = _Line(base, at, item, raw) if item is not None else _bad(raw, base, at, False)
        if line is not None:
            yield line


def _lines(data: bytes, base: int, whole_items: bool) -> list[_Line]:
    """The lines of `data` (whole lines, without the last newline) at file offset `base`.

    Pages need only a good line's seq (its text is what they send): unless `whole_items`,
    a line keeps `{"seq": n}`, a dict the garbage collector does not track, and its parsed
    item is freed at once instead of living on (and being walked by every collection)."""
    raws = data.split(b"\n")
    try:
        values = list(map(orjson.loads, raws))
    except orjson.JSONDecodeError:
        values = None  # a bad or blank line among them
    if values is not None and all(
        type(value) is dict
        and "seq" in value
        and "type" in value
        and "id" in value
        and isinstance(value["seq"], int)
        for value in values
    ):
        if whole_items:
            return [_Line(-1, -1, value, raw) for value, raw in zip(values, raws, strict=True)]
        return [
            _Line(-1, -1, {"seq": value["seq"]}, raw)
            for value, raw in zip(values, raws, strict=True)
        ]
    lines: list[_Line] = []
    offset = base
    for raw in raws:
        item, _ = decode_line(raw)
        end = offset + len(raw) + 1
        line = _Line(offset, end, item, raw) if item is not None else _bad(raw, offset, end, True)
        if line is not None:
            lines.append(line)
        offset = end
    return lines


def _bad(raw: bytes, start: int, end: int, terminated: bool) -> _Line | None:
    """A line that is not a good item: None if blank (ignored), else reported with why."""
    if not raw.strip():
        return None
    reason = decode_line(raw)[1] if terminated else "torn_tail"
    return _Line(start, end, None, b"", reason, raw[:80].decode("utf-8", "replace"))


def _sample(fd: int, size: int, offsets: OffsetMap, spacing: int) -> int:
    """Probe the anchor boundaries (multiples of `spacing`) between `offsets.sampled` and
    `size`; returns how many anchors were added. A boundary whose line is not complete yet
    is probed again later."""
    added = 0
    boundary = -(-max(offsets.sampled, 1) // spacing) * spacing
    while boundary < size:
        probe = _probe(fd, boundary, size, spacing)
        if probe is None:  # the line after it is still being written (or torn)
            offsets.sampled = boundary
            return added
        if probe is not False:
            seq, start, raw = probe
            if not offsets.offsets or start > offsets.offsets[-1]:
                if offsets.seqs and seq <= offsets.seqs[-1]:
                    offsets.ordered = False
                else:
                    offsets.seqs.append(seq)
                    offsets.offsets.append(start)
                    sha = hashlib.sha256(raw).hexdigest()
                    offsets.mark = LineMark(start, start + len(raw), sha)
                    added += 1
        boundary += spacing
    offsets.sampled = size
    return added


def _probe(fd: int, boundary: int, size: int, spacing: int) -> tuple[int, int, bytes] | bool | None:
    """The first good line starting at or after `boundary`: (seq, start, its bytes with the
    newline); False when there is none worth using nearby; None when the file ends first."""
    window = os.pread(fd, _WINDOW, boundary - 1)
    newline = window.find(b"\n")
    read = len(window)
    while newline == -1:  # the line across the boundary is long: find its end
        if read >= spacing or boundary - 1 + read >= size:
            return False if read >= spacing else None
        more = os.pread(fd, _WINDOW, boundary - 1 + read)
        if not more:
            return None
        found = more.find(b"\n")
        newline = -1 if found == -1 else read + found
        read += len(more)
    start = boundary + newline
    for _ in range(_PROBE_LINES):
        if start >= size:
            return None
        line = _whole_line(fd, start, size)
        if line is None:
            return None
        if line is False:
            return False
        item, _ = decode_line(line.rstrip(b"\n"))
        if item is not None:
            return item["seq"], start, line
        start += len(line)
    return False


def _whole_line(fd: int, start: int, size: int) -> bytes | bool | None:
    """The line at `start` with its newline; None if the file ends before the newline,
    False if it is too long to be worth reading for an anchor."""
    parts: list[bytes] = []
    at = start
    while at - start < _MAX_ANCHOR_LINE:
        chunk = os.pread(fd, _WINDOW if at == start else _CHUNK, at)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline != -1:
            parts.append(chunk[: newline + 1])
            return b"".join(parts)
        parts.append(chunk)
        at += len(chunk)
        if at >= size:
            return None
    return False
