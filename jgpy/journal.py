"""Delivery journals: what every member of a run sent, delivered and saw, as Parquet files.

A journal is one table per member with one row per event (schema: :data:`SCHEMA`); the rows of one run live
under one run directory, one sub-directory per member::

    RUN_DIR/member=<name>/_journal.json        meta data: implementation, stack, clock, parts, closed
    RUN_DIR/member=<name>/part-00000.parquet   one row group each
    RUN_DIR/member=<name>/part-00001.parquet   ...
    RUN_DIR/member=<name>/part-00002.rows      (while the member runs, or after it was killed: converted on ingest)
    RUN_DIR/member=<name>/part-00000.jsonl     (the Java harness: JSON lines, converted on ingest)
    RUN_DIR/member=<name>/_crash.json          (written by a test driver that killed the member)

Rows are buffered in memory and written as one part per ``row_group_size`` rows or per ``flush_interval``
seconds by a background thread, atomically (tmp + rename), so a member that is killed loses at most its last
unwritten rows and never leaves a truncated file. While the member runs, parts are the row buffer's memory as
it is (40-byte rows behind a small JSON header: 10-25 ns of CPU a row, against 60-115 for columns copied into
a NumPy ``.npz``, 120 for an Arrow table written as IPC and 200-300 for Parquet); a clean end converts them to
Parquet, writes a ``close`` row and marks the meta data ``closed``; the checker converts a killed member's parts.

**Message ids.** Nothing is added to the wire: a payload that reads ``"<name>:<n>"`` (raw bytes, or a Java
``setObject(String)`` of that text, as the test harness and the demo send) gives ``sender`` = name and
``seq`` = n; any other payload has ``seq`` null and ``sender`` = the source's logical name. Every message row
records the payload ``size`` and ``hash`` (CRC-32C, the same as ``java.util.zip.CRC32C``; computed with the
SSE4.2 instruction). The message stream of a (sender, dest) pair (dest null: multicast) is numbered by the
application; the checker expects each stream's numbers to be consecutive.

**Clock.** ``ts_ns`` is ``CLOCK_MONOTONIC`` in nanoseconds: Python's ``time.monotonic_ns()`` and Java's
``System.nanoTime()`` both read it on Linux (HotSpot returns the raw ``clock_gettime(CLOCK_MONOTONIC)`` value),
so timestamps of different processes on one host are directly comparable (not across hosts, nor across
reboots). A send is stamped when JOURNAL passes it down; the messages of a delivered batch all get the time the
batch reached the top of the stack (the application's ``receive`` runs for them one after the other from then).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import re
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Iterable

try:
    import numpy  # noqa: F401  (the row buffer's chunks are NumPy arrays)
    import pyarrow as pa
except ModuleNotFoundError as e:        # only journals need it: it is in the extras, not a dependency of jgpy
    raise ModuleNotFoundError(f"delivery journals need pyarrow and numpy ({e}): pip install 'jgpy[journal]'",
                              name=e.name) from None

log = logging.getLogger("jgpy.journal")

FORMAT = "jgpy-journal"
FORMAT_VERSION = 1
CLOCK = "CLOCK_MONOTONIC"
META_FILE = "_journal.json"
CRASH_FILE = "_crash.json"
MEMBER_PREFIX = "member="
#: how a journal writes a member whose logical name it never learned (its UUID)
UUID_NAME = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
PART_RE = re.compile(r"^part-(\d{5,})\.(parquet|jsonl|rows)$")
RAW_SUFFIX = "rows"
_RAW_MAGIC = b"JGPYROWS"           # a raw part: magic, u32 header length, JSON header (padded to 8), the rows

#: event kinds (the ``kind`` column)
KINDS = ("open", "view", "send", "deliver", "suspect", "block", "unblock", "state", "close")

#: message flags the checker looks at (``Message.OOB``)
OOB = 1

#: the columns of a journal; ``member`` is not stored in the rows, it is the directory (``member=<name>``)
SCHEMA = pa.schema([
    pa.field("kind", pa.string(), nullable=False),     # one of KINDS
    pa.field("idx", pa.int64(), nullable=False),       # the member's event index: 0, 1, 2, ... in the order the
                                                       # events happened (deliveries: the local delivery order)
    pa.field("ts_ns", pa.int64(), nullable=False),     # CLOCK_MONOTONIC, ns
    pa.field("view_coord", pa.string()),               # the view at the event (kind=view: the installed view):
    pa.field("view_id", pa.int64()),                   #   its coordinator's name and id number
    pa.field("members", pa.list_(pa.string())),        # kind=view: the members, in order
    pa.field("merge", pa.bool_()),                     # kind=view: a MergeView
    pa.field("sender", pa.string()),                   # send/deliver: message id = (sender, seq) ...
    pa.field("seq", pa.int64()),                       #   ... from a numbered payload (seq null: not numbered)
    pa.field("dest", pa.string()),                     # send/deliver: destination name, null = multicast
    pa.field("size", pa.int32()),                      # send/deliver: payload bytes
    pa.field("hash", pa.int64()),                      # send/deliver: CRC-32C of the payload
    pa.field("flags", pa.int32()),                     # send/deliver: message flags (1 = OOB)
    pa.field("peer", pa.string()),                     # suspect: the suspected member; state: the other side
    pa.field("info", pa.string()),                     # open: JSON meta data; state: what happened
])
COLUMNS = tuple(SCHEMA.names)

#: how parts are written: dictionaries for the strings only, deltas for the event index and the clock (cheap to
#: write, about 12 bytes a row)
PARQUET_OPTIONS = dict(compression="snappy", write_statistics=False, store_schema=False,
                       use_dictionary=["kind", "view_coord", "members", "sender", "dest", "peer", "info"],
                       column_encoding={"idx": "DELTA_BINARY_PACKED", "ts_ns": "DELTA_BINARY_PACKED"})

#: longest payload parsed as a numbered id (longer ones are hashed, never parsed)
MAX_ID_PAYLOAD = 256

_ID_PATTERN = r"(?s)^\x12?(?P<name>.*):(?P<n>[0-9]{1,18})$"


class JournalError(Exception):
    """A journal that cannot be written or read; the message names the file and what to do."""


# ---------------------------------------------------------------------------------------------
# paths
# ---------------------------------------------------------------------------------------------

_SAFE = re.compile(r"[A-Za-z0-9._\-@+ ]")


def escape_member(name: str) -> str:
    """A member name as a directory name (``%XX`` for anything unusual, as Spark escapes partition values)."""
    return "".join(c if _SAFE.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def unescape_member(dirname: str) -> str:
    raw = dirname[len(MEMBER_PREFIX):] if dirname.startswith(MEMBER_PREFIX) else dirname
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  raw.encode()).decode("utf-8", "replace")


def member_dir(run_dir: str | os.PathLike, member: str) -> Path:
    return Path(run_dir) / (MEMBER_PREFIX + escape_member(member))


def new_run_dir(root: str | os.PathLike, run: str | None = None) -> Path:
    """``root/run=<run>`` (default run id: a timestamp plus pid), created."""
    run = run or time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    d = Path(root) / f"run={run}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def mark_crash(run_dir: str | os.PathLike, member: str, ts_ns: int | None = None, how: str = "kill -9") -> Path:
    """Record that a test driver crashed ``member`` at ``ts_ns`` (default: now, CLOCK_MONOTONIC): the checker
    reports the time from the crash to the view that excludes the member."""
    d = member_dir(run_dir, member)
    d.mkdir(parents=True, exist_ok=True)
    p = d / CRASH_FILE
    _write_json_atomic(p, {"member": member, "ts_ns": int(ts_ns if ts_ns is not None else time.monotonic_ns()),
                           "how": how})
    return p


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# payload ids, vectorised
# ---------------------------------------------------------------------------------------------

def parse_ids(payloads: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``(names, seqs)`` of a binary array of payloads: ``"<name>:<n>"`` raw or as a Java String (tag 0x12)."""
    import pyarrow.compute as pc

    if len(payloads) == 0:
        return pa.array([], pa.string()), pa.array([], pa.int64())
    ex = pc.extract_regex(payloads, pattern=_ID_PATTERN)
    raw_names = pc.struct_field(ex, [0])
    seqs = pc.struct_field(ex, [1]).cast(pa.string()).cast(pa.int64())
    names = raw_names.cast(pa.string(), safe=False)
    try:
        names.validate(full=True)
    except pa.ArrowInvalid:                           # some are not UTF-8: those are Latin-1 (Java's low bytes)
        names = pa.array([None if b is None else _decode_name(b) for b in raw_names.to_pylist()], pa.string())
    return names, seqs


def _decode_name(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


def parse_id(payload: bytes | None) -> tuple[str, int] | None:
    """The id of one payload (see :func:`parse_ids`), or None."""
    if payload is None or len(payload) > MAX_ID_PAYLOAD:
        return None
    n, s = parse_ids(pa.array([bytes(payload)], pa.binary()))
    return (n[0].as_py(), s[0].as_py()) if s[0].is_valid else None


# ---------------------------------------------------------------------------------------------
# the writer
# ---------------------------------------------------------------------------------------------

_K_DELIVER, _K_SEND, _K_VIEW, _K_OTHER = 0, 1, 2, 3

_live: "weakref.WeakSet[JournalWriter]" = weakref.WeakSet()


def close_all() -> None:
    """Close every open journal of this process (e.g. before ``os._exit``)."""
    for w in list(_live):
        try:
            w.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            log.exception("closing journal %s", w.dir)


atexit.register(close_all)


def _name(addr: Any, cache: dict) -> str | None:
    if addr is None:
        return None
    n = cache.get(addr)
    if n is None:
        from jgpy._core.address import logical_name
        n = logical_name(addr)
        if n is None:
            return str(addr)            # not cached: the logical name may be learned later
        cache[addr] = n
    return n


def _row_buffer(chunk_rows: int = 65536):
    try:
        from jgpy._core.journalbuf import RowBuffer
    except ImportError as e:
        raise JournalError(f"the journal's Cython extension is not built ({e}): run `make build` "
                           f"(python setup.py build_ext --inplace)") from None
    return RowBuffer(chunk_rows)


#: the writer's tables: dictionary-encoded strings (Parquet writes them as they are; readers see strings, as the
#: files carry no Arrow schema)
_WRITE_SCHEMA = pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string()), f.nullable)
                           if f.name in ("kind", "view_coord", "sender", "dest") else f for f in SCHEMA])


def _dict(codes, null_mask, values: list) -> pa.DictionaryArray:
    import numpy as np
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, np.int32), mask=null_mask),
                                          pa.array(values, pa.string()))


class JournalWriter:
    """The journal of one member of a jgpy run.

    Recording is cheap (a CLOCK_MONOTONIC stamp and a reference, in C; safe from any thread): the background
    thread turns rows into Parquet parts (names, ids and CRC-32C in C as well). ``view``/``send``/``deliver``
    take jgpy objects (``View``, ``Message``); a message must not be changed after it was recorded until the
    next flush (jgpy never changes a payload after send or delivery).
    """

    def __init__(self, run_dir: str | os.PathLike, member: str, *, impl: str = "jgpy", stack: Iterable[str] = (),
                 row_group_size: int = 65536, flush_interval: float = 1.0, extra: dict | None = None):
        if row_group_size < 1 or flush_interval <= 0:
            raise ValueError("row_group_size must be >= 1 and flush_interval > 0")
        self.member = member
        self.dir = member_dir(run_dir, member)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise JournalError(f"cannot create the journal directory {self.dir}: {e}") from None
        self.row_group_size = int(row_group_size)
        self.flush_interval = float(flush_interval)
        self._names: dict = {}
        self._buf = _row_buffer(min(self.row_group_size, 1 << 20))     # parts: at most 2^20 rows (40 MB)
        self._buf.addr_names = self._names
        self._buf.name_of = lambda a: _name(a, self._names)
        self._vkeys: list[tuple[str | None, int | None]] = []
        self._next_idx = 0
        self._part = self._first_free_part()
        self._flush_lock = threading.Lock()
        self._closed = False
        self._wake = threading.Event()
        self.rows_written = 0
        self.flush_cpu_seconds = 0.0            # CPU time of the flushes (the writer's cost besides recording)
        self.convert_cpu_seconds = 0.0          # CPU time of the conversion to Parquet at close
        self.errors = 0
        from jgpy import __version__
        self.meta = {"format": FORMAT, "version": FORMAT_VERSION, "member": member, "impl": impl,
                     "impl_version": __version__, "pid": os.getpid(), "stack": list(stack), "clock": CLOCK,
                     "start_ns": time.monotonic_ns(), "parts": None, "closed": False, **(extra or {})}
        _write_json_atomic(self.dir / META_FILE, self.meta)
        self.other("open", info=json.dumps({k: self.meta[k] for k in ("impl", "impl_version", "pid", "stack")}))
        self.flush()          # now, not under load: the first part pays for the imports
        self.flush_cpu_seconds = 0.0
        import numpy as np    # pyarrow imports its pandas shim on the first array made from NumPy: do it now, as
        pa.array(np.zeros(1, np.int32))     # a close at interpreter exit (atexit) can no longer import it
        self._thread = threading.Thread(target=self._run, name=f"jgpy-journal-{member}", daemon=True)
        self._thread.start()
        _live.add(self)

    def _first_free_part(self) -> int:
        nums = [int(m.group(1)) for p in self.dir.iterdir() if (m := PART_RE.match(p.name))]
        return max(nums) + 1 if nums else 0

    # ---- recording (any thread) ----

    def view(self, view: Any) -> None:
        vid = view.vid
        self._vkeys.append((_name(vid.coord_addr, self._names), vid.id))
        self._buf.view_index = len(self._vkeys) - 1
        self._buf.record(_K_VIEW, view)

    def send(self, msg: Any) -> None:
        self._buf.record(_K_SEND, msg)

    def send_path(self, owner: Any):
        """A C down path (``RecordSend``) for the JOURNAL protocol ``owner``: records each message as :meth:`send`
        does, then passes it on."""
        from jgpy._core.sendpath import RecordSend
        return RecordSend(owner, self._buf, _K_SEND)

    def deliver(self, msg: Any) -> None:
        self._buf.record(_K_DELIVER, msg)

    def deliver_batch(self, msgs: list) -> None:
        self._buf.record_batch(_K_DELIVER, msgs)

    def deliveries_recorder(self):
        """:meth:`deliver_batch` without a Python frame (``functools.partial`` of the C method), for a caller
        that records every delivered batch (JOURNAL's up path)."""
        return functools.partial(self._buf.record_batch, _K_DELIVER)

    def other(self, kind: str, peer: Any = None, info: str | None = None) -> None:
        """suspect (peer), block, unblock, state (peer, info), open, close."""
        self._buf.record(_K_OTHER, (kind, _name(peer, self._names) if peer is not None and not isinstance(peer, str)
                                    else peer, info))

    # ---- writing ----

    def _run(self) -> None:
        last = time.monotonic()
        tick = min(0.2, self.flush_interval)
        while not self._closed:
            self._wake.wait(tick)
            self._wake.clear()
            if self._closed:
                break
            n = len(self._buf)
            if n and time.monotonic() - last >= self.flush_interval:
                self.flush()
                last = time.monotonic()
            elif n >= self.row_group_size:
                self.flush(full_only=True)

    def flush(self, full_only: bool = False) -> None:
        """Write the buffered rows as raw parts of at most ``row_group_size`` rows each; ``full_only``: only
        whole row groups (at full rate, rows keep arriving while a part is written: chasing them with ever
        smaller parts would cost a few milliseconds per part)."""
        with self._flush_lock:
            t0 = time.thread_time()
            for rows, specials in self._buf.take(not full_only):
                try:
                    self._write_raw_part(rows, specials)
                except Exception as e:  # noqa: BLE001 - a journal must never take the member down
                    self.errors += 1
                    log.error("%s: journal rows lost (%d): %s", self.dir, len(rows), e)
                self._buf.give_back(rows)
            self.flush_cpu_seconds += time.thread_time() - t0

    def _write_raw_part(self, rows, specials: list) -> None:
        """The taken rows as they are (the row buffer's memory) behind a JSON header with the names and what
        the few view and other rows say: :func:`raw_to_table` makes the journal table of it later."""
        from jgpy._core.types import MergeView
        n = len(rows)
        base = self._next_idx
        self._next_idx += n                  # also if the write fails: the lost rows leave a gap in idx
        extra = []
        for i, o in specials:
            if rows["kind"][i] == _K_VIEW:
                extra.append([i, "view", [_name(a, self._names) for a in o.members], isinstance(o, MergeView),
                              None, None])
            else:
                extra.append([i, o[0], None, None, o[1], o[2]])
        head = {"base": base, "rows": n, "names": list(self._buf.names), "vkeys": [list(k) for k in self._vkeys],
                "specials": extra}
        name = f"part-{self._part:05d}.{RAW_SUFFIX}"
        tmp = self.dir / f".{name}.tmp"
        with open(tmp, "wb") as f:
            f.write(_raw_header(head))
            f.write(memoryview(rows.view("u1")))
        os.replace(tmp, self.dir / name)
        self._part += 1
        self.rows_written += n

    def close(self) -> None:
        """Record ``close``, write everything and mark the journal closed (a clean end of the member)."""
        if self._closed:
            return
        self.other("close")
        self._closed = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(30)
        self.flush()
        t0 = time.thread_time()
        for p in sorted(self.dir.glob(f"part-*.{RAW_SUFFIX}")):
            try:
                part_to_parquet(p)
            except JournalError as e:          # left as it is: the checker names it
                self.errors += 1
                log.error("%s", e)
        self.convert_cpu_seconds += time.thread_time() - t0
        self.meta.update(parts=self._part, closed=True, end_ns=time.monotonic_ns(), rows=self.rows_written)
        try:
            _write_json_atomic(self.dir / META_FILE, self.meta)
        except OSError as e:
            log.error("%s: cannot write the journal meta data: %s", self.dir, e)
        _live.discard(self)

    def stats(self) -> dict:
        """Counters; ``record_ns_per_row`` is the wall time of a sample of the recordings (:meth:`RowBuffer.timing`,
        an upper bound of their CPU cost), ``flush_cpu_seconds`` is the writer thread's CPU time."""
        ns, rows = self._buf.timing()
        return {"rows_written": self.rows_written, "parts": self._part, "buffered": len(self._buf),
                "flush_cpu_seconds": self.flush_cpu_seconds, "convert_cpu_seconds": self.convert_cpu_seconds,
                "record_ns_per_row": ns / rows if rows else None, "errors": self.errors}


def _raw_header(head: dict) -> bytes:
    """Magic, length and JSON text of a raw part's header, padded with blanks so that the rows start 8-aligned."""
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 12) % 8)
    return _RAW_MAGIC + len(text).to_bytes(4, "little") + text


def _read_raw(path: Path) -> tuple[dict, Any]:
    """The header and the rows (a ROW_DTYPE array) of a raw part; JournalError if it is not one."""
    import numpy as np

    from jgpy._core.journalbuf import ROW_DTYPE
    try:
        data = path.read_bytes()
        if data[:8] != _RAW_MAGIC or len(data) < 12:
            raise ValueError("no JGPYROWS magic")
        hlen = int.from_bytes(data[8:12], "little")
        head = json.loads(data[12:12 + hlen])
        n, start = int(head["rows"]), 12 + hlen
        if len(data) != start + n * ROW_DTYPE.itemsize:
            raise ValueError(f"{n} rows need {start + n * ROW_DTYPE.itemsize} bytes")
        for k in ("base", "names", "vkeys", "specials"):
            head[k]                       # noqa: B018 - KeyError names a missing field
        return head, np.frombuffer(data, ROW_DTYPE, n, start)
    except (OSError, ValueError, KeyError, TypeError) as e:
        size_b = path.stat().st_size if path.exists() else 0
        raise JournalError(f"{path}: not a readable raw journal part, truncated or corrupt ({size_b} bytes; {e}); "
                           f"remove it or re-run the member") from None


def raw_to_table(path: Path) -> pa.Table:
    """The journal table of a raw part (``part-N.rows``, see :meth:`JournalWriter._write_raw_part`)."""
    import numpy as np
    import pyarrow.compute as pc
    head, rows = _read_raw(path)
    col = lambda f: np.ascontiguousarray(rows[f])  # noqa: E731
    ts, kind, view, sender, dest, seq, seq_ok = (col(f) for f in ("ts", "kind", "view", "sender", "dest", "seq",
                                                                   "seq_ok"))
    size, hsh, flags = col("size"), col("hash").astype(np.int64), col("flags").astype(np.int32)
    base, names, vkeys, specials = head["base"], head["names"], head["vkeys"], head["specials"]
    n = len(ts)
    is_msg = kind <= _K_SEND
    # the view key of each row
    coords: dict = {}
    coord_code = np.array([coords.setdefault(k[0], len(coords)) for k in vkeys] or [0], np.int32)
    has_view = view >= 0
    at = np.where(has_view, view, 0)
    vc = _dict(coord_code[at], ~has_view, list(coords))
    vi = pa.array(np.array([k[1] for k in vkeys] or [0], np.int64)[at], mask=~has_view)
    # the few view and other rows: small arrays, scattered by index (position 0 of each: null)
    codes = kind.astype(np.int32)
    kind_names = ["deliver", "send", "view"]
    scatter = np.zeros(n, np.int32)
    members: list = [None]
    merge: list = [None]
    peer: list = [None]
    info: list = [None]
    for j, (i, what, mbrs, is_merge, p, inf) in enumerate(specials, 1):
        scatter[i] = j
        if what != "view":
            codes[i] = len(kind_names)
            kind_names.append(what)
        members.append(mbrs)
        merge.append(is_merge)
        peer.append(p)
        info.append(inf)
    sc = pa.array(scatter)

    def spread(values: list, typ) -> pa.Array:
        return pa.nulls(n, typ) if len(values) == 1 else pc.take(pa.array(values, typ), sc)

    return pa.Table.from_arrays([
        _dict(codes, None, kind_names), pa.array(np.arange(base, base + n, dtype=np.int64)), pa.array(ts), vc, vi,
        spread(members, pa.list_(pa.string())), spread(merge, pa.bool_()),
        _dict(sender, sender < 0, names), pa.array(seq, mask=seq_ok == 0), _dict(dest, dest < 0, names),
        pa.array(size, mask=~is_msg), pa.array(hsh, mask=~is_msg), pa.array(flags, mask=~is_msg),
        spread(peer, pa.string()), spread(info, pa.string())], schema=_WRITE_SCHEMA)


def part_to_parquet(path: Path) -> Path:
    """``part-N.rows`` (written while a member runs) -> ``part-N.parquet`` next to it (written atomically); the
    source file is removed. JournalError names a file that cannot be read (a truncated or foreign file)."""
    out = path.with_suffix(".parquet")
    table = raw_to_table(path)
    write_parquet_atomic(table, out, **PARQUET_OPTIONS)
    path.unlink()
    return out


def write_parquet_atomic(table: pa.Table, out: Path, **options: Any) -> None:
    """``table`` as ``out`` in one row group, written to a hidden temporary file that is then renamed."""
    import pyarrow.parquet as pq
    tmp = out.with_name("." + out.name + ".tmp")
    pq.write_table(table, tmp, row_group_size=max(1, table.num_rows), **options)
    os.replace(tmp, out)


# ---------------------------------------------------------------------------------------------
# rows -> table (synthetic journals, tests)
# ---------------------------------------------------------------------------------------------

def table_from_rows(rows: list[dict]) -> pa.Table:
    """A journal table from dicts with the :data:`SCHEMA` column names (missing columns are null)."""
    return pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in rows], schema=SCHEMA)


def write_parts(run_dir: str | os.PathLike, member: str, tables: Iterable[pa.Table], *, impl: str = "synthetic",
                stack: Iterable[str] = (), closed: bool = True) -> Path:
    """Write a member's journal from ready tables (one part each), with its meta data."""
    import pyarrow.parquet as pq
    d = member_dir(run_dir, member)
    d.mkdir(parents=True, exist_ok=True)
    k = 0
    for t in tables:
        if t.schema != SCHEMA:
            t = t.select(list(COLUMNS)).cast(SCHEMA)
        pq.write_table(t, d / f"part-{k:05d}.parquet", row_group_size=1 << 20, **PARQUET_OPTIONS)
        k += 1
    _write_json_atomic(d / META_FILE, {"format": FORMAT, "version": FORMAT_VERSION, "member": member, "impl": impl,
                                       "stack": list(stack), "clock": CLOCK, "parts": k if closed else None,
                                       "closed": closed})
    return d
