"""The order in which a Java 2.12 node writes back the maps it read (digests, FD_SOCK caches).

Java serialises ``Digest`` and FD_SOCK's cache/member set in hash-map iteration order, which depends
only on the keys' ``hashCode`` and the table capacity. Reproducing that order lets a golden test demand
that Java's re-encoding of jgpy's bytes is byte-identical, entry order included.

- ``Digest.readFrom`` puts the entries into a fresh ``ConcurrentHashMap(7)`` with ``putAll``.
- ``FD_SOCK$FdHeader.readFrom`` fills ``new HashMap(size)`` and ``new HashSet()``.
"""

from __future__ import annotations

from typing import Iterable, Sequence


def _table_size_for(c: int) -> int:
    n = 1
    while n < c:
        n <<= 1
    return n


def _spread(addr) -> int:
    h = addr.java_hash() & 0xFFFFFFFF if addr is not None else 0
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def _order_by_bins(keys: Sequence, capacity: int) -> list[int]:
    return sorted(range(len(keys)), key=lambda i: _spread(keys[i]) & (capacity - 1))


def chm_putall_capacity(size: int) -> int:
    """Table length of ``new ConcurrentHashMap(7)`` after ``putAll`` of ``size`` entries (Java 9+)."""
    c = _table_size_for(size + (size >> 1) + 1)
    n = max(16, c)
    if c > n - (n >> 2):       # tryPresize resizes once more when c exceeds the new sizeCtl
        n <<= 1
    return n


def hashmap_capacity(size: int, initial: int | None) -> int:
    """Table length of ``new HashMap(initial)`` (or ``new HashMap()``) after ``size`` puts."""
    cap = _table_size_for(initial) if initial else 16
    thr = int(cap * 0.75)
    for k in range(1, size + 1):
        if k > thr:
            cap <<= 1
            thr = int(cap * 0.75)
    return cap


def digest_read_order(addresses: Sequence) -> list[int]:
    """Indexes of ``addresses`` in the order Java writes a digest it has just read."""
    return _order_by_bins(addresses, chm_putall_capacity(len(addresses)))


def hashmap_order(keys: Sequence, initial: int | None) -> list[int]:
    return _order_by_bins(keys, hashmap_capacity(len(keys), initial))


def reorder(items: Iterable, order: Sequence[int]) -> list:
    items = list(items)
    return [items[i] for i in order]
