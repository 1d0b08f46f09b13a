"""TCP_NIO: 2.12's TCP transport on java.nio selectors (``org.jgroups.protocols.TCP_NIO``).

Its wire is TCP's (the same handshake, frames and TpHeader, under protocol id 23), so jgpy's TCP serves it
as it is: one reader thread per connection with the GIL released, and a sender thread per connection with
``use_send_queues``. The selector's thread counts of 2.12 are accepted and have no effect.
"""

from __future__ import annotations

from jgpy.protocols.tcp import TCP
from jgpy.stack.properties import ignored

_NIO_THREADS = ignored("jgpy's TCP reads each connection on its own thread: TCP_NIO's selector and processor "
                       "threads have no counterpart")


class TCP_NIO(TCP):  # noqa: N801 - the JGroups name
    NAME = "TCP_NIO"

    IGNORED_PROPERTIES = dict.fromkeys(("reader_threads", "writer_threads", "processor_threads",
                                        "processor_minThreads", "processor_maxThreads", "processor_queueSize",
                                        "processor_keepAliveTime"), _NIO_THREADS)
