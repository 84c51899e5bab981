"""JSONL store: one append-only file per session (``jsonl:///dir``).

A session file ``<dir>/<quoted session id>.jsonl`` (for an id too long to be a file name,
``<dir>/<start of the quoted id>+<sha256 of the id>.jsonl``; ``+`` is never in a quoted
id) holds::

    {"session_id":"s1","created":...,"runtime":...}     header (always the first line)
    {"type":"session/start","seq":0,...}                seq 0
    {"type":"user/message","seq":1,...}                 seq 1

Line ``n + 1`` is the event with seq ``n`` (the decoder checks it). Files are human-
readable and greppable; ``universal-event events`` prints the same lines.

Crash safety. Each append writes whole lines with one ``write`` and ``fsync``s before
returning (an append is a checkpoint). A writer killed mid-``write`` can leave a last
line without its newline: a torn line. Readers ignore an unterminated last line (it may
also be a live writer's line in flight) and never change a file; the next writer to the
session cuts the torn line under the lock, before writing. Lines before it are never
touched. Opening a store touches no file: the directory may hold other ``.jsonl`` files
(a user's captures), and one damaged session must not stop the others from being used.
A writer first checks that the file is this session's (its header line, or for a file
cut during its first write, the start of one): anything else is refused with
:class:`CorruptEventError` and left as it is.

Concurrency. Every append takes an exclusive ``flock`` on the session file, re-checks
the last seq in the file, and raises :class:`ConflictError` when another process got
there first: two processes never interleave lines, never leave a gap or a duplicate.
The store keeps the files it appends to open between appends (the lock is still taken
and released around each one); before writing it checks that the path still names the
file it holds, so a session deleted or replaced by another process is reopened. What it
remembers of a file's end (to skip reading it back) is kept with that open descriptor:
an inode number can be reused by a file created after the remembered one is deleted,
but not while a descriptor holds it open. Readers remember where a file's lines end
too; such a position is used only after the file's header line is found unchanged (it
holds the session's creation time, so a session deleted and created again, even on
the same inode, has another).

The header records the runtime of the first batch. When that batch names none, the
session's runtime is that of the first event that names one (as on the other
backends), found by reading the events, once per store and session.

Reads cut the file into runs of about ``DECODE_BATCH`` complete lines (by bytes, with no
Python work per line) and decode each run as one JSON array (newlines become commas);
a run that does not check out is decoded line by line, which names the damaged seq.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import threading
import time
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec

from universal_event.errors import (
    ConflictError,
    CorruptEventError,
    SessionNotFoundError,
    StoreError,
)
from universal_event.events import Event, EventBase
from universal_event.stores._base import (
    DECODE_BATCH,
    HASHED_NAME_MARK,
    UNSTORABLE,
    AppendSignal,
    Batches,
    FileLiveLocks,
    LineSource,
    LiveLocks,
    Rehoming,
    SessionInfo,
    TailByPolling,
    check_batch,
    check_fork_point,
    decode_page,
    decode_stored,
    local_path,
    runtime_of,
    runtime_of_payloads,
    session_file_stem,
    unstorable,
)

__all__ = ["JsonlStore"]

_log = logging.getLogger(__name__)

_SUFFIX = ".jsonl"
_TAIL_CHUNK = 1 << 16
_READ_CHUNK = 1 << 18
"""Bytes read at a time (memory stays bounded: a block of lines at a time)."""
_SAMPLE = 1 << 13
"""Bytes sampled to size a run of lines (see ``_line_groups``)."""
_MAX_OPEN_FILES = 64
"""Session files kept open between appends; the least recently used is closed first."""
_MAX_REMEMBERED_PATHS = 4096
_SKIP_BLOCK = 1 << 18
"""Bytes read at a time when skipping the lines before a range (see :func:`_skip_lines`)."""


class _Header(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The first line of a session file: the session's metadata."""

    universal_event_session: int = 1
    """Format version of the file; not written while it is 1 (``omit_defaults``), so a
    header is told from an event by being the first line."""
    session_id: str
    created: float
    runtime: str | None = None
    parent_id: str | None = None
    fork_seq: int | None = None


class _LineHead(msgspec.Struct):
    """Just enough of an event line to read its seq."""

    seq: int | None = None


_header_encoder = msgspec.json.Encoder()
_lines_encoder = msgspec.json.Encoder()
"""``encode_lines`` in C: the same bytes as :func:`universal_event.codec.encode_lines`."""
_header_decoder = msgspec.json.Decoder(_Header)
_line_head_decoder = msgspec.json.Decoder(_LineHead)
_sources_decoder = msgspec.json.Decoder(list[LineSource])
_source_decoder = msgspec.json.Decoder(LineSource)


class _Position(msgspec.Struct):
    """A known point in a file: the line for ``seq + 1`` starts at byte ``offset``;
    ``header``: the file's header line, checked before the position is used."""

    inode: int
    seq: int
    offset: int
    header: bytes


class _Marks:
    """Where some lines of a session file start, noted while skipping to a range (one
    per block skipped, every ~256 KiB): a later read skips from the nearest mark before
    its range, not from the file's start. Without them, paging through a long session
    after its end had been read (a tail, a live viewer) skipped from line 0 at every
    page: quadratic (126 s for a million events in pages of 1000).

    ``points`` is ``(seq, offset)`` (line ``seq`` starts at byte ``offset``), ascending;
    a list of tuples, so a reader in another thread never sees half a point."""

    __slots__ = ("inode", "header", "points")

    def __init__(self, inode: int, header: bytes) -> None:
        self.inode = inode
        self.header = header
        self.points: list[tuple[int, int]] = []

    def note(self, seq: int, offset: int) -> None:
        if not self.points or seq > self.points[-1][0]:
            self.points.append((seq, offset))

    def at_or_before(self, seq: int) -> tuple[int, int] | None:
        """The last noted line at or before ``seq``."""
        index = bisect_right(self.points, (seq, math.inf)) - 1
        return self.points[index] if index >= 0 else None


class _Held:
    """A session file kept open for appending, and what this store knows of it."""

    __slots__ = ("fd", "identity", "header", "seq", "end")

    def __init__(self, fd: int, identity: tuple[int, int]) -> None:
        self.fd = fd
        self.identity = identity
        """(device, inode) of the open file."""
        self.header: bytes | None = None
        """Its header line, once read or written."""
        self.seq = -1
        self.end = -1
        """The file ended at byte ``end`` with seq ``seq`` when this store last wrote to it
        (or read its end) through this descriptor; -1: not known."""


class _RuntimeScan(msgspec.Struct):
    """How far a session file was searched for its runtime (``header`` names the file)."""

    header: bytes
    offset: int
    runtime: str | None


class JsonlStore(TailByPolling, FileLiveLocks):
    """Sessions as JSON-lines files in one directory. Thread- and process-safe."""

    def __init__(
        self, directory: str | os.PathLike[str], *, fsync: bool = True, poll_interval: float = 0.02
    ) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"a JSONL store is a directory; {str(self.directory)!r} is a file")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._poll_interval = poll_interval
        self._lock = threading.RLock()
        self._appended = AppendSignal()
        self._positions: dict[str, _Position] = {}
        self._marks: dict[str, _Marks] = {}
        self._paths: dict[str, Path] = {}
        self._open_files: dict[str, _Held] = {}
        """Session → its file, unlocked between appends (insertion = LRU order)."""
        self._runtimes: dict[str, _RuntimeScan] = {}
        self._live_locks = LiveLocks(self.directory / ".live")

    @classmethod
    def from_url(cls, url: str, **options: Any) -> JsonlStore:
        """``jsonl:///abs/dir`` or ``jsonl:///./relative/dir``."""
        return cls(cls.path_of(url), **options)

    @staticmethod
    def path_of(url: str) -> str:
        """The directory a ``jsonl:`` URL names."""
        return local_path(url, "jsonl", "directory")

    def _path(self, session_id: str) -> Path:
        """The session's file; remembered, as quoting and joining cost an append ~3 µs."""
        path = self._paths.get(session_id)
        if path is None:
            if len(self._paths) >= _MAX_REMEMBERED_PATHS:
                self._paths.clear()
            path = self._paths[session_id] = self.directory / (
                session_file_stem(session_id) + _SUFFIX
            )
        return path

    # ------------------------------------------------------------------ writes

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        check_batch(session_id, events, expected_seq)
        with self._lock:
            locked = self._lock_file(session_id, create=expected_seq == 0 and bool(events))
            if locked is None:
                if expected_seq != 0:
                    raise ConflictError(session_id, expected_seq, 0)
                return
            held, stat = locked
            fd = held.fd
            try:
                if held.end == stat.st_size:
                    size, last_seq = held.end, held.seq  # nobody wrote since we did
                else:
                    size, last_seq, held.header = _settle_end(session_id, fd, stat.st_size)
                    held.seq, held.end = last_seq, size
                if last_seq + 1 != expected_seq:
                    raise ConflictError(session_id, expected_seq, last_seq + 1)
                if not events:
                    return
                try:
                    data = _lines_encoder.encode_lines(events)
                except UNSTORABLE as exc:
                    raise unstorable(session_id, exc) from exc
                if size == 0:
                    header = _Header(
                        session_id=session_id, created=time.time(), runtime=runtime_of(events)
                    )
                    held.header = _header_encoder.encode(header) + b"\n"
                    data = held.header + data
                held.end = -1  # unknown until the write is whole
                _write_all(fd, data)
                if self._fsync:
                    os.fsync(fd)
                    if size == 0:
                        _fsync_directory(self.directory)
                held.seq, held.end = events[-1].seq, size + len(data)
                if held.header is not None:
                    self._remember(
                        session_id, _Position(stat.st_ino, held.seq, held.end, held.header)
                    )
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        self._appended.appended()

    def _remember(self, session_id: str, position: _Position) -> None:
        """Keep where the session's file ended (forgotten in bulk past a bound: a
        long-running store touches many sessions)."""
        if len(self._positions) >= _MAX_REMEMBERED_PATHS and session_id not in self._positions:
            self._positions.clear()
        self._positions[session_id] = position

    def _lock_file(self, session_id: str, *, create: bool) -> tuple[_Held, os.stat_result] | None:
        """The session's kept file, its descriptor holding the flock, and the file's
        stat; ``None`` when it does not exist.

        A kept descriptor is reused when the path still names its file (another process
        may have deleted the session, or deleted and created it again, since): the
        path's stat, taken under the lock, must show the inode the descriptor was opened
        on (which no other file can have while the descriptor holds it open). That one
        ``stat`` also gives the size the append starts at (syscalls cost 2-4 µs each
        here; an append used to make three). Not ``fstat``'s link count of the
        descriptor: on NFS an unlinked file that is still open is renamed (``.nfs…``)
        and keeps its link, so a session deleted by another machine would go unnoticed.
        """
        path = self._path(session_id)
        held = self._open_files.pop(session_id, None)
        if held is not None:
            fcntl.flock(held.fd, fcntl.LOCK_EX)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                stat = None
            if stat is not None and (stat.st_dev, stat.st_ino) == held.identity:
                self._open_files[session_id] = held  # now the most recently used
                return held, stat
            os.close(held.fd)
        opened = _open_locked(session_id, path, create=create)
        if opened is None:
            return None
        while len(self._open_files) >= _MAX_OPEN_FILES:
            os.close(self._open_files.pop(next(iter(self._open_files))).fd)
        fd, stat = opened
        held = self._open_files[session_id] = _Held(fd, (stat.st_dev, stat.st_ino))
        return held, stat

    def _close_file(self, session_id: str) -> None:
        held = self._open_files.pop(session_id, None)
        if held is not None:
            os.close(held.fd)

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        """Write the copy to a temporary file, then link it in (atomic; replaces only a
        file holding no event).

        The source is read through one descriptor, opened first: a source deleted or
        replaced meanwhile by another process is copied as it was when opened (its
        lines are never changed), and the child's ``fork_seq`` is the last seq copied.
        Each line is copied as it is but for the session id in it (see
        :func:`_copy_lines`).
        """
        check_fork_point(source_id, new_id, upto_seq)
        try:
            handle = open(self._path(source_id), "rb")
        except FileNotFoundError:
            raise SessionNotFoundError(source_id) from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            found = _read_header(source_id, handle)
            if found is None:
                raise SessionNotFoundError(source_id)
            source, header_line = found
            source_last = _last_seq(source_id, handle.fileno(), size)
            if source_last < 0:
                raise SessionNotFoundError(source_id)  # a session without events is none
            last = min(upto_seq, source_last)
            if last < 0:
                latest = self.latest_seq(new_id)
                if latest >= 0:
                    raise ConflictError(new_id, 0, latest + 1)
                return  # nothing to copy: a session without events is none
            runtime = source.runtime or self._runtime(source_id, handle, header_line)
            if runtime is not None:  # the child's own events may not name it yet
                handle.seek(len(header_line))
                runtime = runtime_of_payloads(islice(handle, last + 1))
            header = _Header(
                session_id=new_id,
                created=time.time(),
                runtime=runtime,
                parent_id=source_id,
                fork_seq=last,
            )
            final = self._path(new_id)
            temporary = final.with_name(f"{final.name}.{uuid.uuid4().hex}.tmp")
            try:
                with open(temporary, "wb") as out:
                    out.write(_header_encoder.encode(header) + b"\n")
                    handle.seek(len(header_line))
                    copied = _copy_lines(source_id, new_id, handle, out, last + 1)
                    if copied != last + 1:
                        raise CorruptEventError(
                            source_id, copied, f"fork copied {copied} of {last + 1} events"
                        )
                    out.flush()
                    if self._fsync:
                        os.fsync(out.fileno())
                self._link_in(new_id, temporary, final)
            finally:
                temporary.unlink(missing_ok=True)
        if self._fsync:
            _fsync_directory(self.directory)
        self._appended.appended()

    def _link_in(self, new_id: str, temporary: Path, final: Path) -> None:
        """Make ``temporary`` the session file of ``new_id``: linked in when there is
        none; put in place of one that holds no event (a first write cut short, or in
        flight: its writer holds the lock, and finds the fork's events once it is
        released); else :class:`ConflictError`."""
        while True:
            try:
                os.link(temporary, final)
                return
            except FileExistsError:
                pass
            opened = _open_locked(new_id, final, create=False)
            if opened is None:
                continue  # deleted meanwhile: link again
            fd, stat = opened
            try:
                end = _last_newline_end(fd, stat.st_size)
                _check_own_file(new_id, fd, end)  # another's file is never replaced
                latest = _last_seq(new_id, fd, end)
                if latest >= 0:
                    raise ConflictError(new_id, 0, latest + 1)
                os.replace(temporary, final)  # under the lock of the file it replaces
                return
            finally:
                os.close(fd)

    def delete(self, session_id: str) -> None:
        path = self._path(session_id)
        with self._lock:
            self._close_file(session_id)
            opened = _open_locked(session_id, path, create=False)
            if opened is None:
                return
            fd, stat = opened
            try:
                if stat.st_size:  # an empty file: a first write that never came
                    # Not a file of this session (a user's own): not the store's to delete.
                    _check_own_file(session_id, fd, _last_newline_end(fd, stat.st_size))
                path.unlink()
                self._positions.pop(session_id, None)
                self._marks.pop(session_id, None)
                self._runtimes.pop(session_id, None)
            finally:
                os.close(fd)

    # ------------------------------------------------------------------ reads

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        """Stream lines from the file; an unterminated last line is not there yet."""
        return chain.from_iterable(self._read_batches(session_id, start, end))

    def _read_batches(self, session_id: str, start: int, end: int | None) -> Batches:
        try:
            handle = open(self._path(session_id), "rb")
        except FileNotFoundError:
            return
        except IsADirectoryError:
            raise _not_a_file(session_id) from None
        with handle:
            yield from self._read_from(session_id, handle, start, end)

    def _read_from(self, session_id: str, handle: Any, start: int, end: int | None) -> Batches:
        """The events of an open session file (``handle`` at its start)."""
        stat = os.fstat(handle.fileno())
        inode = stat.st_ino
        found = self._seek(session_id, handle, stat, max(start, 0))
        if found is None:
            return
        seq, header = found
        offset = handle.tell()
        if seq < start:  # lines before the range: skipped, not decoded
            marks = self._marks_of(session_id, inode, header)
            skipped = _skip_lines(handle.fileno(), seq, start, offset, marks.note)
            if skipped is None:
                return
            seq, offset = start, skipped
            handle.seek(offset)
        for group in _line_groups(handle) if end is None or seq < end else ():
            count, events = _decode_run(session_id, seq, group, end)
            yield events
            seq += count
            if end is not None and seq >= end:
                offset += _nth_newline_end(group, count)
                break
            offset += len(group)
        with self._lock:
            known = self._positions.get(session_id)
            if seq > 0 and (
                known is None
                or (known.inode, known.header) != (inode, header)
                or known.seq < seq - 1
            ):
                self._remember(session_id, _Position(inode, seq - 1, offset, header))

    def _seek(
        self, session_id: str, handle: Any, stat: os.stat_result, start: int
    ) -> tuple[int, bytes] | None:
        """Position ``handle`` (whose file's ``stat`` was just taken) at the first line to
        read; return that line's seq and the file's header line.

        Starts at the nearest known line at or before ``start``: the last known position
        (tailing and re-reading the end of a long session stay cheap) or a mark
        (:class:`_Marks`), taken in this file: same inode and same header line (a session
        deleted and created again may get the inode back, never the header). Otherwise
        checks the header and starts at seq 0. ``None``: the file holds no complete
        header yet.
        """
        with self._lock:
            known = self._positions.get(session_id)
            marks = self._marks.get(session_id)
        starts: list[tuple[int, int, int, bytes]] = []
        if known is not None and known.seq < start:
            starts.append((known.seq + 1, known.offset, known.inode, known.header))
        mark = None if marks is None else marks.at_or_before(start)
        if marks is not None and mark is not None:
            starts.append((*mark, marks.inode, marks.header))
        fd = handle.fileno()
        for seq, offset, inode, header in sorted(starts, reverse=True):
            if (
                inode == stat.st_ino
                and offset <= stat.st_size
                and os.pread(fd, len(header), 0) == header
            ):
                handle.seek(offset)
                return seq, header
        found = _read_header(session_id, handle)
        return None if found is None else (0, found[1])

    def _marks_of(self, session_id: str, inode: int, header: bytes) -> _Marks:
        """The session file's marks (new ones when the file is another)."""
        with self._lock:
            marks = self._marks.get(session_id)
            if marks is None or (marks.inode, marks.header) != (inode, header):
                if len(self._marks) >= _MAX_REMEMBERED_PATHS:
                    self._marks.clear()
                marks = self._marks[session_id] = _Marks(inode, header)
            return marks

    def latest_seq(self, session_id: str) -> int:
        try:
            with open(self._path(session_id), "rb") as handle:
                if _read_header(session_id, handle) is None:
                    return -1
                return _last_seq(session_id, handle.fileno(), os.fstat(handle.fileno()).st_size)
        except FileNotFoundError:
            return -1
        except IsADirectoryError:
            raise _not_a_file(session_id) from None

    def list_sessions(self) -> list[SessionInfo]:
        """The sessions whose files read as such. A ``.jsonl`` file without a valid
        header for its name (a user's own capture in the directory, a damaged header) or
        whose last line is unreadable is left out with a logged warning, not raised: one
        such file must not hide every other session. Reading it still raises
        :class:`CorruptEventError`."""
        found: list[SessionInfo] = []
        for path in sorted(self.directory.glob("*" + _SUFFIX)):
            if not path.is_file():
                _log.warning("skipping %s in the listing: not a file", path.name)
                continue
            session_id = self._session_of(path)
            if session_id is None:
                continue
            try:
                found.append(self.session_info(session_id))
            except SessionNotFoundError:
                continue
            except CorruptEventError as exc:
                _log.warning("skipping session %r in the listing: %s", session_id, exc)
        return sorted(found, key=lambda info: info.session_id)

    def _session_of(self, path: Path) -> str | None:
        """The session id a file in the directory is named for. A hashed name (a long
        id) is read from the file's header and must hash to the name; otherwise (a
        user's file) None, with a logged warning."""
        stem = path.name[: -len(_SUFFIX)]
        if HASHED_NAME_MARK not in stem:
            return unquote(stem)
        try:
            with open(path, "rb") as handle:
                line = handle.readline()
                if not line.endswith(b"\n"):
                    return None  # no session yet (a first write in flight, or cut short)
                header = _header_decoder.decode(line)
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError, RecursionError) as exc:
            _log.warning("skipping %s in the listing: no session header: %s", path.name, exc)
            return None
        if self._path(header.session_id).name != path.name:
            _log.warning("skipping %s in the listing: not named for its session", path.name)
            return None
        return header.session_id

    def session_info(self, session_id: str) -> SessionInfo:
        try:
            with open(self._path(session_id), "rb") as handle:
                stat = os.fstat(handle.fileno())
                found = _read_header(session_id, handle)
                if found is None:
                    raise SessionNotFoundError(session_id)
                header, header_line = found
                last = _last_seq(session_id, handle.fileno(), stat.st_size)
                if last < 0:
                    raise SessionNotFoundError(session_id)
                runtime = header.runtime or self._runtime(session_id, handle, header_line)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id) from None
        except IsADirectoryError:
            raise _not_a_file(session_id) from None
        return SessionInfo(
            session_id=session_id,
            runtime=runtime,
            created=header.created,
            # The header's time is the clock's, a file's mtime the kernel's coarser one:
            # a session written within a tick of its creation may seem older than it.
            last_activity=max(stat.st_mtime, header.created),
            event_count=last + 1,
            parent_id=header.parent_id,
            fork_seq=header.fork_seq,
        )

    def _runtime(self, session_id: str, handle: Any, header_line: bytes) -> str | None:
        """The runtime of the session's first event that names one (its header names
        none); ``handle`` reads on after the header.

        What was searched is remembered (by the header line, which tells the file), so
        asking again reads only the lines appended since.
        """
        with self._lock:
            scan = self._runtimes.get(session_id)
        if scan is None or scan.header != header_line:
            scan = _RuntimeScan(header=header_line, offset=len(header_line), runtime=None)
        elif scan.runtime is not None:
            return scan.runtime
        handle.seek(scan.offset)
        offset = scan.offset
        runtime = None
        for group in _line_groups(handle):
            runtime = _first_runtime(group)
            if runtime is not None:
                break
            offset += len(group)
        with self._lock:
            if len(self._runtimes) >= _MAX_REMEMBERED_PATHS:
                self._runtimes.clear()
            self._runtimes[session_id] = _RuntimeScan(
                header=header_line, offset=offset, runtime=runtime
            )
        return runtime

    def close(self) -> None:
        """Close the session files kept open for appending."""
        with self._lock:
            while self._open_files:
                os.close(self._open_files.popitem()[1].fd)


# ---------------------------------------------------------------------- file helpers


def _first_runtime(run: bytes) -> str | None:
    """The runtime of the first event line in ``run`` (complete lines) naming one.
    Lines that do not decode are passed over: reading the session reports them."""
    try:
        lines = _sources_decoder.decode(b"[" + run[:-1].replace(b"\n", b",") + b"]")
    except (msgspec.DecodeError, RecursionError):
        lines = []
        for line in run[:-1].split(b"\n"):
            try:
                lines.append(_source_decoder.decode(line))
            except (msgspec.DecodeError, RecursionError):
                continue
    return next((line.source.runtime for line in lines if line.source is not None), None)


def _open_locked(session_id: str, path: Path, *, create: bool) -> tuple[int, os.stat_result] | None:
    """Open ``path`` and hold its exclusive flock; ``None`` when it does not exist.

    After locking, the path must still name the file we hold (a concurrent ``delete``
    may have unlinked it while we waited); otherwise try again. Returns the descriptor
    and the path's stat (taken under the lock).
    """
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
    while True:
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise _not_a_file(session_id) from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            stat = None
        if stat is not None:
            held = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) == (held.st_dev, held.st_ino):
                return fd, stat
        os.close(fd)


def _not_a_file(session_id: str) -> CorruptEventError:
    return CorruptEventError(session_id, None, "its path is a directory, not a session file")


def _settle_end(session_id: str, fd: int, size: int) -> tuple[int, int, bytes | None]:
    """Cut a torn last line (caller holds the lock); return (size, last seq, header
    line; None when the file has none yet).

    Only a file shown to be this session's is cut (see :func:`_check_own_file`): the
    directory may hold files the store did not write, and those are not its to change.
    """
    if size == 0:
        return 0, -1, None
    end = _last_newline_end(fd, size)
    header = _check_own_file(session_id, fd, end)
    if end != size:
        os.ftruncate(fd, end)
        os.fsync(fd)
    return end, _last_seq(session_id, fd, end), header


def _check_own_file(session_id: str, fd: int, end: int) -> bytes | None:
    """Raise :class:`CorruptEventError` unless the file is this session's; return its
    header line (None when it has no complete line).

    ``end``: just past the file's last newline. A file with a complete first line must
    start with this session's header (the rule readers apply). A file with no complete
    line was cut during its first write only if what it holds is the start of this
    session's header line; then cutting it loses nothing acknowledged.
    """
    if end > 0:
        line = _first_line(fd)
        _decode_header(session_id, line)
        return line
    _check_header_start(session_id, os.pread(fd, len(_header_start(session_id)), 0))
    return None


def _header_start(session_id: str) -> bytes:
    """The bytes every header line of ``session_id`` starts with (up to its time)."""
    sample = _header_encoder.encode(_Header(session_id=session_id, created=0.0))
    return sample[: sample.index(b'"created":')]


def _check_header_start(session_id: str, start: bytes) -> None:
    """Raise :class:`CorruptEventError` unless ``start``, a file's bytes before its first
    newline, can begin this session's header line (a first write cut short, or still in
    flight): anything else is not a file of this session."""
    expected = _header_start(session_id)
    if not expected.startswith(start[: len(expected)]):
        raise CorruptEventError(session_id, None, "not a session file: no header line")


def _first_line(fd: int) -> bytes:
    """The file's first line with its newline (the caller knows the file has one)."""
    line = bytearray()
    while True:
        chunk = os.pread(fd, _TAIL_CHUNK, len(line))
        index = chunk.find(b"\n")
        if index >= 0 or not chunk:
            line += chunk[: index + 1]
            return bytes(line)
        line += chunk


def _last_newline_end(fd: int, size: int) -> int:
    """The offset just past the file's last newline (0 when it has none)."""
    position = size
    while position > 0:
        chunk_start = max(0, position - _TAIL_CHUNK)
        chunk = os.pread(fd, position - chunk_start, chunk_start)
        index = chunk.rfind(b"\n")
        if index >= 0:
            return chunk_start + index + 1
        position = chunk_start
    return 0


def _last_seq(session_id: str, fd: int, size: int) -> int:
    """The seq of the last complete line; -1 for a file with no event line yet."""
    end = _last_newline_end(fd, size)
    if end == 0:
        return -1
    start = _last_newline_end(fd, end - 1)
    if start == 0:
        return -1  # the only line is the header
    line = os.pread(fd, end - start, start)
    try:
        head = _line_head_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        problem = f"last line unreadable: {exc}"
        raise CorruptEventError(session_id, _seq_after(session_id, fd, start), problem) from None
    if head.seq is None:
        raise CorruptEventError(
            session_id, _seq_after(session_id, fd, start), "last line has no seq"
        )
    return head.seq


def _seq_after(session_id: str, fd: int, end: int) -> int | None:
    """The seq of the line starting at ``end``: one after the line before it (so a
    damaged last line is named by its seq); ``None`` when that line is damaged too."""
    try:
        return _last_seq(session_id, fd, end) + 1
    except CorruptEventError:
        return None


def _read_header(session_id: str, handle: Any) -> tuple[_Header, bytes] | None:
    """The header at the start of the session's file, and its line (``handle`` reads on
    after it).

    ``None`` when the file holds no complete header line yet (a first write in flight,
    or cut short); :class:`CorruptEventError` when the file is not this session's.
    """
    first: bytes = handle.readline()
    if not first.endswith(b"\n"):
        _check_header_start(session_id, first)
        return None
    return _decode_header(session_id, first), first


def _decode_header(session_id: str, line: bytes) -> _Header:
    try:
        header = _header_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise CorruptEventError(session_id, None, f"bad session header: {exc}") from None
    if header.session_id != session_id:
        raise CorruptEventError(
            session_id, None, f"header names another session {header.session_id!r}"
        )
    return header


def _line_groups(handle: Any) -> Iterator[bytes]:
    """Runs of about :data:`DECODE_BATCH` complete lines, read on from ``handle``.

    Cut by bytes, not by counting lines: a run is DECODE_BATCH lines of the average
    length seen in its first few KB, moved on to the next newline. Finding a cut is
    two C-level calls; nothing is done per line in Python. An unterminated last line
    is not returned: it is torn, or a live writer's line in flight.
    """
    pending = b""
    while True:
        # A line longer than what is pending doubles the read, so a 20 MB line costs
        # a few reads, not a copy of the pending bytes per chunk.
        chunk = handle.read(max(_READ_CHUNK, len(pending)))
        if not chunk:
            return
        data = pending + chunk if pending else chunk
        position = 0
        end = data.rfind(b"\n") + 1
        while position < end:
            sampled = data.count(b"\n", position, position + _SAMPLE)
            run = DECODE_BATCH * _SAMPLE // max(sampled, 1)
            cut = data.find(b"\n", min(position + run, end) - 1) + 1
            yield data[position:cut]
            position = cut
        pending = data[position:]


def _nth_newline_end(data: bytes, lines: int) -> int:
    """The offset just past the ``lines``-th newline of ``data``."""
    position = 0
    for _ in range(lines):
        position = data.index(b"\n", position) + 1
    return position


def _decode_run(
    session_id: str, first_seq: int, run: bytes, end: int | None
) -> tuple[int, Iterable[Event]]:
    """The events of a run of complete lines (those before seq ``end``) and how many.

    An encoded event holds no raw newline, so the run becomes one JSON array by turning
    its newlines into commas: one decoder call, every event's seq and session checked.
    A run that does not check out is decoded line by line, lazily, so the good events
    before a damaged line reach the reader and the error names the damaged seq (an
    event type this version does not know reads back as ``native/unknown``).
    """
    events = decode_page(session_id, first_seq, None, b"[" + run[:-1].replace(b"\n", b",") + b"]")
    if events is not None:
        if end is not None and first_seq + len(events) > end:
            del events[end - first_seq :]
        return len(events), events
    lines = run[:-1].split(b"\n")
    if end is not None:
        del lines[end - first_seq :]
    return len(lines), _decode_lines(session_id, first_seq, lines)


def _copy_lines(source_id: str, new_id: str, handle: Any, out: Any, stop: int) -> int:
    """Copy the event lines ``0..stop-1`` of ``handle`` (at its first event line) to
    ``out``, re-homed into ``new_id``; how many were copied.

    A run of lines at a time, as a read goes: each run is decoded and checked as a read
    checks it (damage raises :class:`CorruptEventError` naming the seq), then its bytes
    are written with the session id in each line replaced
    (:class:`~universal_event.stores._base.Rehoming`), never encoded again from what this
    version decoded: what a newer producer wrote reaches the child whole.
    """
    rehoming = Rehoming(source_id, new_id)
    seq = 0
    for group in _line_groups(handle):
        count, events = _decode_run(source_id, seq, group, stop)
        deque(events, maxlen=0)  # decoded to be checked: raises at a damaged line
        run = group if seq + count < stop else group[: _nth_newline_end(group, count)]
        out.write(rehoming.lines(run, count))
        seq += count
        if seq >= stop:
            break
    return seq


def _decode_lines(session_id: str, first_seq: int, lines: list[bytes]) -> Iterator[Event]:
    for index, line in enumerate(lines):
        yield decode_stored(session_id, first_seq + index, line)


def _skip_lines(
    fd: int, seq: int, start: int, offset: int, note: Callable[[int, int], None]
) -> int | None:
    """The offset of line ``start``, from line ``seq`` at byte ``offset``; None when the
    file ends before it (no complete line ``start - 1`` yet).

    Newlines are counted a block at a time (in C: a ``readline`` per line took 0.3 s
    to skip a million lines); ``note(seq, offset)`` is told where the line after each
    whole block skipped starts.
    """
    read_at = offset
    while True:
        block = os.pread(fd, _SKIP_BLOCK, read_at)
        newlines = block.count(b"\n")
        wanted = start - seq
        if newlines >= wanted:
            end = -1
            for _ in range(wanted):
                end = block.index(b"\n", end + 1)
            return read_at + end + 1
        if len(block) < _SKIP_BLOCK:
            return None
        if newlines:
            seq += newlines
            read_at += block.rindex(b"\n") + 1
            note(seq, read_at)
        else:  # inside a line longer than a block
            read_at += len(block)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    """Make a new file's directory entry durable (a file fsync alone does not)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
