"""JOURNAL: write this member's delivery journal (a jgpy protocol; Java has no twin, nothing goes on the wire).

Put it at the top of the stack (right below the channel) so it sees what the application sends and exactly
what is delivered to it, in delivery order::

    <config> ... <pbcast.STATE_TRANSFER/> <JOURNAL dir="${jgpy.journal.dir:journals/run1}"/> </config>

or add it to a loaded config: ``with_journal(load_config("udp.xml"), run_dir)``. ``dir`` is the run
directory; this member writes ``dir/member=<logical name>/`` (see :mod:`jgpy.journal` for the layout and
the schema, ``python -m jgpy check DIR`` to check a run). Delivery timestamps are taken when a message
reaches the top of the stack, just before the application's ``receive``.
"""

from __future__ import annotations

from typing import Any

from jgpy.stack.config import StackConfig, load_config
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_float, to_int, to_str
from jgpy.stack.protocol import Protocol


def with_journal(config: str | StackConfig, run_dir: str, **properties: Any) -> StackConfig:
    """``config`` with a JOURNAL protocol on top writing into ``run_dir`` (replacing one already there).

    With pbcast.FLUSH in the stack, JOURNAL goes right below it: a multicast that FLUSH holds during a flush
    is sent in the view that follows it, and that is the send view the journal must record (it records the
    view when the message passes by); FLUSH passes everything else through unchanged. (Its BLOCK/UNBLOCK
    events start at FLUSH and do not pass JOURNAL then.)"""
    cfg = load_config(config)
    if cfg.get("JOURNAL") is not None:
        cfg = cfg.remove("JOURNAL")
    props = {"dir": str(run_dir), **{k: str(v) for k, v in properties.items()}}
    flush = next((p.name for p in cfg.protocols if p.name in ("pbcast.FLUSH", "org.jgroups.protocols.pbcast.FLUSH")),
                 None)
    return cfg.insert("JOURNAL", props, before=flush) if flush is not None else cfg.insert("JOURNAL", props)


class JOURNAL(Protocol):
    NAME = "JOURNAL"

    dir = Property(to_str, "", "the run directory; this member's journal goes to dir/member=<name>/")
    row_group_size = Property(to_int, 65536, "rows per Parquet part (bounds the memory of the buffer)")
    flush_interval = Property(to_float, 1.0, "seconds after which buffered rows are written anyway")

    def __init__(self) -> None:
        super().__init__()
        self.writer = None
        self._record_deliveries = None

    def init(self) -> None:
        from jgpy.errors import ConfigError
        if not self.dir:
            raise ConfigError("JOURNAL needs dir=<run directory> (e.g. dir=\"${jgpy.journal.dir:journals/run1}\")")
        if self.row_group_size < 1 or self.flush_interval <= 0:
            raise ConfigError("JOURNAL: row_group_size must be >= 1 and flush_interval > 0")

    def start(self) -> None:
        from jgpy._core.address import logical_name
        from jgpy.journal import JournalWriter
        name = logical_name(self.local_addr) or str(self.local_addr)
        stack = self.stack.config.names() if self.stack is not None else []
        self.writer = JournalWriter(self.dir, name, impl="jgpy", stack=stack, row_group_size=self.row_group_size,
                                    flush_interval=self.flush_interval)
        self.down_msg = self.writer.send_path(self).down_msg     # record, then pass on (C)
        self._record_deliveries = self.writer.deliveries_recorder()

    def stop(self) -> None:
        self.__dict__.pop("down_msg", None)            # back to passing messages on unrecorded
        self._record_deliveries = None
        w, self.writer = self.writer, None
        if w is not None:
            w.close()

    def destroy(self) -> None:
        self.stop()

    # ---- up ----

    def up_batch(self, msgs: list) -> None:
        record = self._record_deliveries
        if record is not None:
            record(msgs)
        self.up_prot.up_batch(msgs)

    def up(self, evt: Event) -> Any:
        w = self.writer
        t = evt.type
        if w is not None:
            if t == EventType.VIEW_CHANGE:
                w.view(evt.arg)
            elif t == EventType.SUSPECT:
                w.other("suspect", peer=evt.arg)
            elif t in (EventType.BLOCK, EventType.UNBLOCK):
                w.other(t.lower())
            elif t == EventType.GET_STATE_OK:
                info = evt.arg
                size = len(info.state) if getattr(info, "state", None) is not None else None
                w.other("state", peer=getattr(info, "target", None),
                        info="installed" + (f" {size} bytes" if size is not None else " (none)"))
            elif t == EventType.STATE_TRANSFER_INPUTSTREAM:
                w.other("state", peer=getattr(evt.arg, "target", None), info="stream opened")
            elif t == EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED:
                w.other("state", info="stream installed")
        rsp = self.up_prot.up(evt)
        if w is not None and t in (EventType.GET_APPLSTATE, EventType.STATE_TRANSFER_OUTPUTSTREAM):
            arg = rsp if t == EventType.GET_APPLSTATE else evt.arg
            size = len(arg.state) if getattr(arg, "state", None) is not None else None
            w.other("state", peer=getattr(evt.arg, "target", None),
                    info="provided" + (f" {size} bytes" if size is not None else " stream"
                                       if t == EventType.STATE_TRANSFER_OUTPUTSTREAM else " (none)"))
        return rsp

    # ---- down ----

    def down_msg(self, msg) -> Any:                  # until start(): then the C core RecordSend does this
        return self.down_prot.down_msg(msg)

    def down(self, evt: Event) -> Any:
        w = self.writer
        if w is not None and evt.type == EventType.GET_STATE:
            w.other("state", peer=getattr(evt.arg, "target", None), info="requested")
        return self.down_prot.down(evt)

    def dump_stats(self) -> dict:
        return self.writer.stats() if self.writer is not None else {}
