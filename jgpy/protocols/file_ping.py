"""FILE_PING: discovery through a shared directory (``org.jgroups.protocols.FILE_PING`` of 2.12).

Every member writes its PingData (``PingData.writeTo``: address, no view, no view id, not a server, logical
name, physical addresses) to ``<location>/<cluster>/<address>.node`` (the address as its long UUID string),
again every ``interval`` ms. A joiner reads the directory and sends its discovery request as an OOB unicast to
each physical address it finds; members answer as with PING. An empty directory ends discovery at once (the
joiner becomes the coordinator). The coordinator removes the files of members that are not in its view. Java
and jgpy members read each other's files.

jgpy bounds what the directory can make it do: at most ``max_files`` files are read per discovery (the newest
first) and only their first ``MAX_FILE_SIZE`` bytes; a file that does not hold a PingData is removed (as 2.12
does) with a rate-limited warning. Its own file is removed when the member stops (2.12: when the JVM exits).
"""

from __future__ import annotations

import os
from typing import Any

from jgpy._core.address import UUID, logical_name
from jgpy._core.headers import PingHeader
from jgpy._core.message import Message
from jgpy._core.types import PingData, ViewId
from jgpy.errors import ConfigError
from jgpy.protocols.discovery import Discovery
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int, to_str

SUFFIX = ".node"
#: a PingData file is a few dozen bytes; anything longer is not one
MAX_FILE_SIZE = 64 * 1024


def address_file_name(addr: Any) -> str:
    """2.12's ``addressAsString``: a UUID's long form, else ``str``."""
    return addr.to_string_long() if isinstance(addr, UUID) else str(addr)


class FILE_PING(Discovery):
    NAME = "FILE_PING"

    location = Property(to_str, "/tmp/jgroups", "the shared directory (a subdirectory per cluster)")
    interval = Property(to_int, 60000, "ms between rewrites of our own file (0: written at discovery only)")
    max_files = Property(to_int, 1000, "jgpy: files read per discovery at most (the newest first)")

    def __init__(self) -> None:
        super().__init__()
        self._writer: Any = None
        self._written: str | None = None            # the path of our own file
        self.counters.update({"files_read": 0, "files_removed": 0, "bad_files": 0, "write_errors": 0})

    def init(self) -> None:
        super().init()
        if os.path.exists(self.location) and not os.path.isdir(self.location):
            raise ConfigError(f"FILE_PING location {self.location} is not a directory")
        try:
            os.makedirs(self.location, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"FILE_PING location {self.location} could not be created: {e}") from None

    def start(self) -> None:
        super().start()
        if self.interval > 0:
            self._writer = self.timer.schedule_with_fixed_delay(self.interval / 1000.0, self.interval / 1000.0,
                                                                self._write_own, "FILE_PING writer")

    def stop(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        path, self._written = self._written, None
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
        super().stop()

    # ---- the directory ----

    def _dir(self, cluster: str) -> str:
        if not cluster or os.sep in cluster or cluster in (".", ".."):
            raise ValueError(f"cluster name {cluster!r} cannot name a directory")
        return os.path.join(self.location, cluster)

    def read_all(self, cluster: str) -> list[PingData]:
        """The PingData of every file of ``cluster`` (at most ``max_files``); a bad file is removed."""
        d = self._dir(cluster)
        os.makedirs(d, exist_ok=True)
        entries = []
        with os.scandir(d) as it:
            for e in it:
                if e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                    try:
                        entries.append((e.stat(follow_symlinks=False).st_mtime, e.path))
                    except OSError:
                        continue
        entries.sort(reverse=True)
        out = []
        for _, path in entries[:max(0, self.max_files)]:
            data = self._read_file(path)
            if data is None:
                continue
            out.append(data)
        return out

    def _read_file(self, path: str) -> PingData | None:
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_SIZE + 1)
        except OSError:
            return None                              # gone meanwhile (its member left)
        self.counters["files_read"] += 1
        try:
            if len(raw) > MAX_FILE_SIZE:
                raise ValueError(f"longer than {MAX_FILE_SIZE} bytes")
            data = self.stack.dialect.decode(PingData, raw)
            if not isinstance(data, PingData) or data.own_addr is None:
                raise ValueError("no address")
            return data
        except Exception as e:  # noqa: BLE001 - whatever is in the file, it is not a member's PingData
            self.counters["bad_files"] += 1
            self._rl.warning("bad-file", "%s: failed reading %s (%s): removing it", self.local_addr,
                             os.path.basename(path), e)
            self._remove(path)
            return None

    def _remove(self, path: str) -> None:
        try:
            os.unlink(path)
            self.counters["files_removed"] += 1
        except OSError:
            pass

    def _own_data(self) -> PingData:
        physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))
        return PingData(self.local_addr, None, None, False, logical_name(self.local_addr),
                        [physical] if physical is not None else None)

    def _write_own(self, data: PingData | None = None) -> None:
        cluster = self.cluster
        if cluster is None or self.local_addr is None:
            return
        try:
            d = self._dir(cluster)
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, address_file_name(self.local_addr) + SUFFIX)
            tmp = path + f".{os.getpid()}.tmp"      # readers never see half a file
            with open(tmp, "wb") as f:
                f.write(self.stack.dialect.encode(data if data is not None else self._own_data()))
            os.replace(tmp, path)
            self._written = path
        except (OSError, ValueError) as e:
            self.counters["write_errors"] += 1
            self._rl.warning("write", "%s: failed writing our file to %s: %s", self.local_addr, self.location, e)

    # ---- discovery ----

    def find_members(self, promise, num_expected: int, break_on_coord: bool, view_id: ViewId | None):
        if view_id is None and self.cluster is not None and not self._others(self.read_all(self.cluster)):
            self._write_own()                       # nobody there: we are the first (2.12 ends discovery)
            return []
        return super().find_members(promise, num_expected, break_on_coord, view_id)

    def _others(self, found: list[PingData]) -> list[PingData]:
        return [d for d in found if d.own_addr != self.local_addr]

    def send_get_members_request(self, cluster, view_id) -> None:
        existing = self.read_all(cluster)
        data = self._own_data()
        own = set(data.physical_addrs or ())
        for entry in existing:
            for dest in entry.physical_addrs or ():
                if dest is None or dest in own:
                    continue
                msg = Message(dest, None, None, Message.OOB)
                msg.put_header(self.id, PingHeader(PingHeader.GET_MBRS_REQ, data, cluster, view_id))
                self.down_prot.down_msg(msg)
        self._write_own(data)

    def down(self, evt: Event) -> Any:
        ret = super().down(evt)
        if evt.type == EventType.VIEW_CHANGE:
            self._handle_view(evt.arg)
        return ret

    def _handle_view(self, view) -> None:
        """The coordinator removes the files of members that are not in its view."""
        mbrs = list(view.members or ())
        if not mbrs or mbrs[0] != self.local_addr or self.cluster is None:
            return
        members = set(mbrs)
        try:
            for data in self.read_all(self.cluster):
                if data.own_addr not in members:
                    self._remove(os.path.join(self._dir(self.cluster), address_file_name(data.own_addr) + SUFFIX))
        except (OSError, ValueError) as e:
            self._rl.warning("view", "%s: failed cleaning %s: %s", self.local_addr, self.location, e)
