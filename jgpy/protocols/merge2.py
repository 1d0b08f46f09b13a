"""MERGE2: periodic discovery of other coordinators, triggering a merge (``org.jgroups.protocols.MERGE2``).

STATUS: not implemented yet (issue #4). This placeholder accepts MERGE2's properties so stock configs
load, and passes everything through: jgpy members answer Java's merge discovery (that is PING's job) but
never start a merge themselves, and a partition does not heal by itself.
"""

from __future__ import annotations

from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import Protocol


class MERGE2(Protocol):
    NAME = "MERGE2"
    PASS_THROUGH = "merging is not implemented yet (issue #4)"

    min_interval = Property(to_int, 5000, "min ms between merge discoveries")
    max_interval = Property(to_int, 20000, "max ms between merge discoveries")
    inconsistent_view_threshold = Property(to_int, 1, "differing views that trigger a merge")
    merge_fast = Property(to_bool, True, "discover right after a view change")
    merge_fast_delay = Property(to_int, 1000, "ms before a merge_fast discovery")

    def init(self) -> None:
        self.log.info("MERGE2 is a pass-through in this jgpy version: %s", self.PASS_THROUGH)
