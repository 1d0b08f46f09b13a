"""Find, validate and ingest the journals of one run, before Spark sees them.

Every problem is a :class:`jgpy.journal.JournalError` that names the file and says what to do: a run
directory that does not exist or holds no journals, a member directory without meta data, a missing part,
a truncated or corrupt Parquet file, a file with another schema, bad JSON lines from the Java harness. Only
file footers and meta data are read here (and the Java JSON lines, converted to Parquet next to them).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from jgpy.journal import (CRASH_FILE, FORMAT, MEMBER_PREFIX, META_FILE, PART_RE, RAW_SUFFIX, SCHEMA, JournalError,
                          part_to_parquet, unescape_member, write_parquet_atomic)


@dataclass
class MemberJournal:
    """The journal files of one member."""

    name: str
    dir: Path
    meta: dict
    files: list[Path] = field(default_factory=list)      # Parquet parts, in order
    rows: int = 0
    crash: dict | None = None

    @property
    def impl(self) -> str:
        return str(self.meta.get("impl", "?"))

    @property
    def stack(self) -> list[str]:
        return [str(s) for s in self.meta.get("stack") or []]


@dataclass
class Run:
    dir: Path
    members: list[MemberJournal]

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.members)

    def stack_has(self, *names: str) -> bool:
        """True if any member's stack has a protocol named like one of ``names`` (``pbcast.FLUSH`` = ``FLUSH``)."""
        want = {n.rsplit(".", 1)[-1].upper() for n in names}
        return any(p.rsplit(".", 1)[-1].upper() in want for m in self.members for p in m.stack)


def discover(run_dir: str | os.PathLike, ingest: bool = True) -> Run:
    """The run's members and their validated Parquet files (Java JSON lines converted when ``ingest``)."""
    d = Path(run_dir)
    if not d.exists():
        raise JournalError(f"{d}: no such run directory")
    if not d.is_dir():
        raise JournalError(f"{d}: is a file; give the run directory (the one holding the member=<name> directories)")
    subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    mdirs = [p for p in subdirs if p.name.startswith(MEMBER_PREFIX)]
    if not mdirs:
        runs = [p.name for p in subdirs if p.name.startswith("run=")]
        if runs:
            raise JournalError(f"{d}: holds several runs ({', '.join(runs[:5])}{', ...' if len(runs) > 5 else ''}); "
                               f"give one of them, e.g. {d / runs[-1]}")
        raise JournalError(f"{d}: empty run directory: no member=<name> journal directories in it (journals are "
                           f"written by the JOURNAL protocol or the harness's connect option \"journal\")")
    members = [_member(p, ingest) for p in mdirs]
    names = [m.name for m in members]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        raise JournalError(f"{d}: member names must be unique in a run; {sorted(dups)} appear more than once")
    return Run(d, members)


def _member(mdir: Path, ingest: bool) -> MemberJournal:
    meta_path = mdir / META_FILE
    if not meta_path.is_file():
        raise JournalError(f"{meta_path}: missing journal meta data file (is {mdir} a journal directory?)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as e:
        raise JournalError(f"{meta_path}: unreadable journal meta data ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise JournalError(f"{meta_path}: not a jgpy journal meta data file (format must be {FORMAT!r})")
    name = str(meta.get("member") or unescape_member(mdir.name))
    parts: dict[int, dict[str, Path]] = {}
    for p in mdir.iterdir():
        m = PART_RE.match(p.name)
        if m:
            parts.setdefault(int(m.group(1)), {})[m.group(2)] = p
    listed = meta.get("parts")
    expected = range(int(listed)) if isinstance(listed, int) else range(max(parts) + 1 if parts else 0)
    for k in expected:
        if k not in parts:
            ext = "jsonl" if meta.get("impl") == "java" else "parquet"
            why = (f"the meta data lists {listed} parts" if isinstance(listed, int)
                   else f"parts up to {max(parts):05d} exist")
            raise JournalError(f"{mdir / f'part-{k:05d}.{ext}'}: missing journal file ({why})")
    if not parts:
        raise JournalError(f"{mdir}: no journal parts (part-NNNNN.parquet / .rows / .jsonl) in the member "
                          f"directory")
    mj = MemberJournal(name, mdir, meta)
    for k in sorted(parts):
        files = parts[k]
        pq_path = files.get("parquet")
        js = files.get("jsonl")
        ar = files.get(RAW_SUFFIX)        # a jgpy member that was killed (or is still running)
        if ar is not None and ingest and pq_path is None:
            pq_path = part_to_parquet(ar)
        if js is not None and ingest and (pq_path is None or pq_path.stat().st_mtime < js.stat().st_mtime):
            pq_path = convert_jsonl(js)
        if pq_path is None:
            raise JournalError(f"{js or ar}: journal part not converted to Parquet (ingest disabled)")
        mj.rows += validate_parquet(pq_path)
        mj.files.append(pq_path)
    crash = mdir / CRASH_FILE
    if crash.is_file():
        try:
            mj.crash = json.loads(crash.read_text())
            int(mj.crash["ts_ns"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise JournalError(f"{crash}: unreadable crash marker ({e})") from None
    return mj


def validate_parquet(path: Path) -> int:
    """Rows of a journal part; JournalError for a truncated/corrupt file or a different schema."""
    import pyarrow.parquet as pq
    try:
        md = pq.read_metadata(path)
        schema = md.schema.to_arrow_schema()
    except (OSError, pa.ArrowException) as e:
        size = path.stat().st_size if path.exists() else 0
        raise JournalError(f"{path}: not a readable Parquet file, truncated or corrupt ({size} bytes; {e}); "
                           f"remove it or re-run the member") from None
    problems = []
    for f in SCHEMA:
        if f.name not in schema.names:
            problems.append(f"column {f.name!r} missing")
        elif not schema.field(f.name).type.equals(f.type):
            problems.append(f"column {f.name!r} is {schema.field(f.name).type}, expected {f.type}")
    extra = [n for n in schema.names if n not in SCHEMA.names]
    if extra:
        problems.append(f"unexpected column(s) {extra}")
    if problems:
        raise JournalError(f"{path}: wrong journal schema: {'; '.join(problems)} (see jgpy.journal.SCHEMA)")
    return md.num_rows


def convert_jsonl(path: Path) -> Path:
    """``part-N.jsonl`` (the Java harness) -> ``part-N.parquet`` next to it (written atomically)."""
    import pyarrow.compute as pc
    import pyarrow.json as pj
    out = path.with_suffix(".parquet")
    try:
        if path.stat().st_size == 0:
            table = SCHEMA.empty_table()
        else:
            table = pj.read_json(path, read_options=pj.ReadOptions(block_size=1 << 24),
                                 parse_options=pj.ParseOptions(explicit_schema=SCHEMA,
                                                               unexpected_field_behavior="error"))
    except (OSError, pa.ArrowException) as e:
        raise JournalError(f"{path}: not valid journal JSON lines ({e})") from None
    for f in SCHEMA:
        if not f.nullable and table.column(f.name).null_count:
            row = pc.index(pc.is_null(table.column(f.name)), True).as_py()
            raise JournalError(f"{path}: line {row + 1}: field {f.name!r} is missing or null")
    write_parquet_atomic(table.cast(SCHEMA), out, compression="snappy")
    return out
